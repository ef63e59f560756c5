"""Adding a stream option is what docs/architecture.md ("A stream option") says, and nothing
more (issue 40): its two lines, taken from the page, are applied to a copy of the package, and
the option runs end to end from the command line in a new process — keys of the specs that do
not set it unchanged, the stream it makes what it says, the record's stream section naming it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

import stamplib
from stamplib import paths
from stamplib.evaluation.spec import RunSpec

PACKAGE = Path(stamplib.__file__).resolve().parent
RECIPE = (paths.repo_root() or Path.cwd()) / "docs" / "architecture.md"
#: Where each of the page's two snippets goes in data/streams.py: after this line.
ANCHORS = {
    "the field": "    relative_speed: int = option(0, validation.check_relative_speed, run_level=True)\n",
    "the one place that reads it": "    order = stream_order(id_labels, num_outliers, seed, stream)\n",
}


def recipe_snippets() -> dict[str, str]:
    """The page's code blocks marked ``# recipe: <what>``, by what they are."""
    blocks = re.findall(r"```python\n# recipe: ([^(\n]+?) \(([^)]*)\)\n(.*?)```", RECIPE.read_text(), re.S)
    return {what: code for what, _where, code in blocks}


def apply_recipe(package: Path) -> list[Path]:
    """Edit a copy of the package as the page says; returns the files it touched."""
    snippets = recipe_snippets()
    assert set(snippets) == set(ANCHORS), f"docs/architecture.md's recipe has {sorted(snippets)}"
    streams = package / "data" / "streams.py"
    text = streams.read_text()
    for what, anchor in ANCHORS.items():
        assert text.count(anchor) == 1, f"data/streams.py no longer has the line the recipe's {what} follows"
        text = text.replace(anchor, anchor + snippets[what])
    streams.write_text(text)
    return [streams]


def _run(package_parent: Path, results: Path, *flags: str) -> dict:
    argv = [sys.executable, "-m", "stamplib", "run", "--method", "source", "--dataset", "digits", "--profile",
            "smoke", "--corruptions", "none", "--results", str(results), "--json", *flags]
    env = {**os.environ, "PYTHONPATH": str(package_parent), "STAMPLIB_HOME": str(paths.home()),
           "OMP_NUM_THREADS": "1"}  # the cached digits model is reused
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=package_parent, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout[proc.stdout.index("\n{") + 1:])


def test_a_new_stream_option_is_one_file_and_runs_end_to_end(tmp_path: Path, digits_model) -> None:
    copy = tmp_path / "src" / "stamplib"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pt", "*.npz"))
    for shipped in (*PACKAGE.rglob("*.pt"), *PACKAGE.rglob("*.npz")):  # the built-in benchmark's files, linked
        (copy / shipped.relative_to(PACKAGE)).symlink_to(shipped)
    touched = apply_recipe(copy)
    assert [p.relative_to(copy).as_posix() for p in touched] == ["data/streams.py"]

    plain = _run(copy.parent, tmp_path / "results")
    reversed_ = _run(copy.parent, tmp_path / "results", "--stream", "reverse=true")
    here = RunSpec(method="source", dataset="digits", profile="smoke", corruptions=("none",))
    assert plain["key"] == here.key() and plain["spec"] == here.to_dict()  # a spec without it keeps its key
    assert reversed_["spec"] == {**here.to_dict(), "reverse": True} and reversed_["key"] != here.key()
    # The record names it in its stream section, written from the StreamSpec (no list to update).
    assert "stream" not in plain and reversed_["stream"] == {"continual": False, "order": ["none"], "dirichlet": 0.0,
                                                             "outlier_burst": 0, "reverse": True}
    labels = [np.load(tmp_path / "results" / r["outputs"])["none.label"] for r in (plain, reversed_)]
    assert np.array_equal(labels[1], labels[0][::-1])  # the stream it made is the plain one, reversed
    # Its check is the field's: bad text is one line and exit code 2.
    env = {**os.environ, "PYTHONPATH": str(copy.parent), "STAMPLIB_HOME": str(paths.home())}
    bad = subprocess.run([sys.executable, "-m", "stamplib", "run", "--method", "source", "--profile", "smoke",
                          "--stream", "reverse=maybe", "--results", str(tmp_path / "results")],
                         capture_output=True, text=True, env=env, cwd=copy.parent, timeout=600)
    assert bad.returncode == 2 and bad.stderr == "error: stream option 'reverse' takes true or false, got 'maybe'\n"
    # It orders the samples (orders=bool), so the mixed schedule, whose shuffle would undo it, refuses it.
    mixed = subprocess.run([sys.executable, "-m", "stamplib", "run", "--method", "source", "--profile", "smoke",
                            "--corruptions", "fog,snow", "--mixed-domains", "--stream", "reverse=true", "--results",
                            str(tmp_path / "results")], capture_output=True, text=True, env=env, cwd=copy.parent,
                           timeout=600)
    assert mixed.returncode == 2 and mixed.stderr.startswith("error: schedule='mixed' shuffles") and \
        "reverse=True" in mixed.stderr and len(mixed.stderr.splitlines()) == 1, mixed.stderr
