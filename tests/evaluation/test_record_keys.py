"""Every committed record keeps its key: a RunSpec rebuilt from a record's ``spec`` hashes to the
record's ``key`` and writes back the same dict, so a change to how a RunSpec is held (its
stream in a StreamSpec, issue 40) can never orphan a stored result."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from stamplib import paths
from stamplib.evaluation.spec import RunSpec, current_names
from stamplib.experiments import tune

RESULTS = (paths.repo_root() or Path.cwd()) / "results"
STORES = ("reference", "builtin_benchmark")


def _records(store: str) -> list[dict]:
    found = [json.loads(p.read_text()) for p in sorted((RESULTS / store).glob("*.json"))]
    return [r for r in found if "spec" in r]


@pytest.mark.parametrize("store", STORES)
def test_every_committed_record_hashes_to_its_key(store: str) -> None:
    records = _records(store)
    assert records, f"results/{store} holds no record"
    wrong = []
    for record in records:
        spec = RunSpec.from_dict(record["spec"])
        # it writes back the same dict, each field under its name today (a record's spec keeps the
        # names it was written with: the outlier set as "outliers")
        if spec.key() != record["key"] or spec.to_dict() != current_names(record["spec"]):
            wrong.append(record["key"])
    assert not wrong, f"records whose spec no longer gives their key: {wrong}"


def test_the_stream_records_are_among_them() -> None:
    """The committed stores hold cells with harder streams (batch size, label shift, mixed
    domains, the realistic protocol), so the test above covers the stream's fields."""
    fields = {name for record in _records("reference") for name in record["spec"]}
    assert {"batch_size", "label_shift", "mixed_domains", "realistic"} <= fields


def test_every_committed_tuning_table_names_the_keys_of_its_cells() -> None:
    """results/tuning_real_images keeps the tables (one row per cell and its key), not records:
    the job each table's name and rows describe gives the same keys in the same order."""
    tables = sorted((RESULTS / "tuning_real_images").glob("tune__*.csv"))
    assert tables
    for path in tables:
        _, method, dataset, outlier_set, hyperparameter_set, profile = path.stem.split("__")
        table = pd.read_csv(path)
        names = list(table.columns[: list(table.columns).index("ACC")])
        grid = tuple((name, tuple(dict.fromkeys(table[name].tolist()))) for name in names)
        job = tune.TuneJob(method, dataset=dataset, outlier_set=outlier_set, hyperparameter_set=hyperparameter_set,
                           profile=profile, grid=grid)
        assert [s.key() for s in job.specs()] == table["key"].tolist(), path.name
