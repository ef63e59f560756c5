"""Per-sample outputs beside each record: written with it, re-scored without running the
method (a metric added later included), and records made before outputs existed still render."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import stamplib
from stamplib.evaluation import metrics
from stamplib.evaluation.outputs import (
    NoOutputsError,
    StreamOutputs,
    load_outputs,
    outputs_path,
    rescore,
    save_outputs,
)
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments.registry import plan
from stamplib.report.reproduce import paper_table
from tests.support import context_for


def _spec(method: str = "tent") -> RunSpec:
    return RunSpec(method=method, dataset="digits", outlier_set="noise", corruptions=("gaussian_noise", "contrast"),
                   profile="smoke")


def test_outputs_round_trip_and_refuse_ragged_arrays(tmp_path: Path) -> None:
    probs = torch.softmax(torch.randn(7, 3, generator=torch.Generator().manual_seed(0)), 1)
    out = StreamOutputs.from_tensors(probs, torch.arange(7.0), torch.tensor([0, 1, -1, 2, -1, 0, 1]))
    path = save_outputs(tmp_path / "x.outputs.npz", {"fog": out, "none": out})
    back = load_outputs(path)
    assert list(back) == ["fog", "none"]
    for name in ("prediction", "ood_score", "label", "index"):
        np.testing.assert_array_equal(getattr(back["fog"], name), getattr(out, name))
    assert back["fog"].index.tolist() == list(range(7))
    with pytest.raises(ValueError, match="one length"):
        StreamOutputs(out.prediction, out.ood_score[:3], out.label, out.index)


def test_a_new_record_is_rescored_without_running_the_method(tmp_path: Path, digits_model, monkeypatch) -> None:
    store = ResultsStore(tmp_path)
    spec = _spec()
    record = stamplib.run(spec, context_for(store))
    assert record.outputs == outputs_path(store.path(spec)).name and (tmp_path / record.outputs).is_file()
    for row in record.per_corruption.values():
        assert set(metrics.METRICS) <= set(row.scores)

    # Rescoring reproduces the stored numbers from the outputs file alone: no method may run.
    monkeypatch.setattr(stamplib.methods, "create", lambda *a, **k: pytest.fail("a method ran"))
    again = rescore(store.get(spec), tmp_path)
    for corruption, row in record.per_corruption.items():
        for name in metrics.METRICS:
            assert again.per_corruption[corruption].scores[name] == pytest.approx(row.scores[name], abs=1e-6,
                                                                                 nan_ok=True)

    # A metric registered after the record was made scores it too.
    monkeypatch.setitem(metrics.METRICS, "fpr80", lambda p, s, y: metrics.fpr_at_tpr(s, y < 0, tpr=0.80))
    monkeypatch.setitem(metrics.METRIC_LABELS, "fpr80", "FPR80")
    fresh = rescore(store.get(spec), tmp_path, ["fpr80"])
    outputs = load_outputs(tmp_path / record.outputs)["contrast"]
    expected = metrics.fpr_at_tpr(torch.from_numpy(outputs.ood_score), torch.from_numpy(outputs.label) < 0, 0.80)
    assert fresh.per_corruption["contrast"].scores["fpr80"] == pytest.approx(expected)
    assert fresh.mean.scores["fpr80"] == pytest.approx(
        np.mean([r.scores["fpr80"] for r in fresh.per_corruption.values()])
    )
    assert fresh.mean.scores["fpr80"] <= fresh.mean.scores["fpr95"] + 1e-9  # a laxer TPR accepts fewer outliers


def test_a_record_made_before_outputs_still_renders_and_says_how_to_rescore(tmp_path: Path) -> None:
    # The shape of a record written before this change: the paper's three metrics, no outputs.
    table_plan = plan("02_table1_cifar_outlier_aware", profile="smoke", methods="tent")
    cell = table_plan.cells[0]
    old = {
        "key": cell.spec.key(),
        "spec": cell.spec.to_dict(),
        "collapsed": [],
        "per_corruption": {
            c: {"acc": 50.0, "auroc": 60.0, "h": 54.5, "collapsed": False} for c in cell.spec.corruptions
        },
        "mean": {"acc": 50.0, "auroc": 60.0, "h": 54.5},
    }
    (tmp_path / "old.json").write_text(json.dumps(old))
    records = {old["key"]: Record.from_json(old)}
    old = records[old["key"]]
    table = paper_table(table_plan, records)
    assert table.loc[0, "H ours"] == 54.5
    wider = paper_table(table_plan, records, metrics=["h", "fpr95", "oscr"])
    assert (
        wider.loc[0, "H ours"] == 54.5 and np.isnan(wider.loc[0, "FPR95 ours"]) and np.isnan(wider.loc[0, "OSCR paper"])
    )
    with pytest.raises(NoOutputsError, match="recompute"):
        rescore(old, tmp_path)
    assert ResultsStore(tmp_path).rescored([old]) == [old]
