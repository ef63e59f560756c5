"""A stored record computed under other hyperparameter defaults is stale: the store treats it as
absent, so that a changed default (e.g. OWTTT's λ, once retuned) never serves old numbers."""

from __future__ import annotations

import dataclasses

from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore, current_config


def test_record_with_other_hyperparameters_counts_as_absent(tmp_path):
    store = ResultsStore(tmp_path)
    spec = RunSpec(method="owttt", corruptions=("none",), profile="smoke")
    record = Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "mean": {}, "config": current_config(spec)})
    store.put(record)
    assert store.get(spec) == record
    assert "da_scale=1.0" in record.config
    stale = dataclasses.replace(record, config=record.config.replace("da_scale=1.0", "da_scale=5.0"))
    store.put(stale)
    assert store.get(spec) is None
    stale = dataclasses.replace(stale, config=None)  # none: hand-made, or from before configs were stored
    store.put(stale)
    assert store.get(spec) == stale
