"""docs/architecture.md's outlier-set recipe, the five edits SVHN-C has, applied to a copy of the
package: the new set runs end to end from the command line, and nothing else was edited."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from stamplib.data import downloads, loaders, outlier_c
from stamplib.data.registry import OUTLIER_SETS
from stamplib.report import paper
from tests.recipes.support import apply, changed_files, run_cli, scratch_package

ANCHORS = {
    "the loader": None,
    "the -C entry": "    for s in (\n",
    "the registration": '_register_outlier_c("svhn", "svhn/test_32x32.mat", "SVHN-C", "svhn")\n',
    "where to get it": "RESOURCES: dict[str, Resource] = {\n    r.name: r\n    for r in (\n",
    "its column name": '    "svhn": "SVHN-C",\n',
}
FILES = ["data/catalog.py", "data/downloads.py", "data/loaders.py", "data/outlier_c.py", "report/paper.py"]


def test_svhn_c_has_each_of_the_five_places_the_recipe_names() -> None:
    """The recipe is SVHN-C's: its loader, -C entry, registration, resource and label."""
    assert callable(loaders.load_svhn) and "svhn" in outlier_c.SETS and "svhn" in downloads.RESOURCES
    assert OUTLIER_SETS["svhn"].corrupted and paper.OUTLIER_LABELS["svhn"] == "SVHN-C"


def test_a_new_outlier_set_is_five_edits_and_runs_end_to_end(tmp_path: Path, digits_model) -> None:
    copy = scratch_package(tmp_path)
    assert apply("outlier", copy, ANCHORS) == FILES
    assert changed_files(copy) == FILES  # nothing else was edited
    data_root = tmp_path / "data"
    (data_root / "my_outliers").mkdir(parents=True)
    rng = np.random.default_rng(0)
    np.savez(data_root / "my_outliers" / "test.npz", images=rng.integers(0, 256, (400, 32, 32, 3), dtype=np.uint8))
    done = run_cli(copy, "run", "--method", "source", "--dataset", "digits", "--outlier-set", "my_outliers",
                   "--profile", "smoke", "--data-root", str(data_root), "--results", str(tmp_path / "results"),
                   "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout[done.stdout.index("\n{") + 1:])
    assert record["spec"]["outlier_set"] == "my_outliers"
    assert all(row["n_outliers"] > 0 for row in record["per_corruption"].values())
    assert 0 <= record["mean"]["auroc"] <= 100
