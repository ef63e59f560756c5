"""A stored record computed under other hyperparameter defaults is stale: the store treats it as
absent, so that a changed default (e.g. OWTTT's λ, issue 16) never serves old numbers."""

from __future__ import annotations

from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore, current_config


def test_record_with_other_hyperparameters_counts_as_absent(tmp_path):
    store = ResultsStore(tmp_path)
    spec = RunSpec(method="owttt", corruptions=("none",), profile="smoke")
    record = {"key": spec.key(), "spec": spec.to_dict(), "mean": {}, "config": current_config(spec)}
    store.put(record)
    assert store.get(spec) == record
    assert "da_scale=1.0" in record["config"]
    stale = dict(record, config=record["config"].replace("da_scale=1.0", "da_scale=5.0"))
    store.put(stale)
    assert store.get(spec) is None
    del stale["config"]  # a record without one (hand-made, or from before configs were stored)
    store.put(stale)
    assert store.get(spec) == stale
