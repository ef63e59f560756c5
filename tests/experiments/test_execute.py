"""execute.compute: a plan's records from the results store, the missing ones run once."""

from __future__ import annotations

import pytest

from stamplib.experiments import execute, registry
from tests.support import context_for


def _refuse_to_run(*args, **kwargs):
    pytest.fail("a cell ran")


def test_missing_cells_are_run_once_then_read_from_the_store(tmp_path, digits_model, monkeypatch, capsys):
    plan = registry.plan("02_table1_cifar_outlier_aware", profile="smoke", methods="source")
    context = context_for(tmp_path)
    assert execute.compute(plan, context, compute_missing=False, progress=False) == {}
    assert "1 of 1 cells are not in the results store" in capsys.readouterr().out

    records = execute.compute(plan, context, progress=False)
    assert list(records) == [plan.specs[0].key()]
    monkeypatch.setattr(execute, "run", _refuse_to_run)
    assert execute.compute(plan, context, progress=False) == records


def test_unknown_metrics_are_refused_before_any_cell_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(execute, "run", _refuse_to_run)
    plan = registry.plan("02_table1_cifar_outlier_aware", profile="smoke", methods="source")
    with pytest.raises(ValueError, match="hh"):
        execute.compute(plan, context_for(tmp_path), metrics=["hh"])
