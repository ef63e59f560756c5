"""Metrics on hand-computed cases, the registry, RunSpec, the results store and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import tiny_net

import stamplib
from stamplib import methods
from stamplib.evaluation import metrics
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore


# -- metrics (protocol.md §2) ---------------------------------------------------------------------------
def test_accuracy_ignores_outliers():
    preds = torch.tensor([0, 1, 2, 0, 1])
    labels = torch.tensor([0, 1, 1, -1, -1])
    assert metrics.accuracy(preds, labels) == pytest.approx(200 / 3)


def test_auroc_cases():
    is_out = torch.tensor([False, False, True, True])
    assert metrics.auroc(torch.tensor([0.1, 0.2, 0.8, 0.9]), is_out) == 100.0
    assert metrics.auroc(torch.tensor([0.9, 0.8, 0.2, 0.1]), is_out) == 0.0
    assert metrics.auroc(torch.tensor([0.5, 0.5, 0.5, 0.5]), is_out) == 50.0
    # one of four (ID, outlier) pairs misordered -> 75 %
    assert metrics.auroc(torch.tensor([0.1, 0.6, 0.5, 0.9]), is_out) == 75.0
    assert torch.isnan(torch.tensor(metrics.auroc(torch.rand(4), torch.zeros(4, dtype=torch.bool))))


def test_h_score_and_aggregation_average_per_corruption_h():
    assert metrics.h_score(60.0, 80.0) == pytest.approx(2 * 60 * 80 / 140)
    assert metrics.h_score(0.0, 0.0) == 0.0
    rows = {"a": {"acc": 90.0, "auroc": 50.0, "h": metrics.h_score(90, 50)},
            "b": {"acc": 30.0, "auroc": 90.0, "h": metrics.h_score(30, 90)}}
    mean = metrics.aggregate(rows)
    assert mean["acc"] == 60.0 and mean["auroc"] == 70.0
    assert mean["h"] == pytest.approx((metrics.h_score(90, 50) + metrics.h_score(30, 90)) / 2)
    assert mean["h"] < metrics.h_score(60.0, 70.0)  # not H of the means


# -- registry -------------------------------------------------------------------------------------------
def test_registry_lists_methods_and_refuses_unknown_names():
    assert {"source", "bn_stats", "tent", "stamp"} <= set(methods.available())
    with pytest.raises(ValueError, match="available"):
        methods.create("stampp", tiny_net(), 4)
    with pytest.raises(ValueError, match="valid"):
        methods.create("tent", tiny_net(), 4, learning_rate=0.1)
    with pytest.raises(ValueError, match="known"):
        methods.create("tent", tiny_net(), 4, dataset="mnist")


def test_create_leaves_the_callers_model_untouched():
    net = tiny_net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    tent = methods.create("tent", net, 4, lr=0.1)
    for _ in range(3):
        tent.step(torch.rand(8, 3, 32, 32))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert isinstance(net.conv1[1], torch.nn.BatchNorm2d) and type(net.conv1[1]) is torch.nn.BatchNorm2d


@pytest.mark.parametrize("name", ["source", "bn_stats", "tent"])
def test_reset_identity_and_output_contract(name):
    x = [torch.rand(8, 3, 32, 32, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    used = methods.create(name, tiny_net(), 4, lr=0.05) if name == "tent" else methods.create(name, tiny_net(), 4)
    fresh = methods.create(name, tiny_net(), 4, lr=0.05) if name == "tent" else methods.create(name, tiny_net(), 4)
    first = [used.step(xb) for xb in x]
    used.reset()
    for xb, out in zip(x, first):
        again = used.step(xb)
        assert torch.equal(again.probs, fresh.step(xb).probs) and torch.equal(again.probs, out.probs)
        assert out.probs.shape == (8, 4) and out.ood_score.shape == (8,)
        assert torch.allclose(out.probs.sum(1), torch.ones(8), atol=1e-5)
    assert (len(used.adapted_parameters()) == 0) == (name != "tent")


def test_ood_score_is_higher_for_uncertain_samples():
    out = methods.create("source", tiny_net(), 4).step(torch.rand(8, 3, 32, 32))
    order = torch.argsort(out.ood_score)
    max_prob = out.probs.max(1).values
    assert max_prob[order[0]] >= max_prob[order[-1]]  # lowest entropy is the most confident


# -- RunSpec and store ------------------------------------------------------------------------------------
def test_runspec_validates_and_hashes_stably():
    spec = RunSpec.make("tent", corruptions=("gaussian_noise",), overrides={"lr": 0.01})
    assert spec.key() == RunSpec.from_dict(json.loads(json.dumps(spec.to_dict()))).key()
    assert spec.key() != spec.with_(seed=1).key()
    for bad, match in [(dict(severity=6), "severity"), (dict(outlier_ratio=1.0), "ratio"),
                       (dict(corruptions=("fog2",)), "corruption"), (dict(profile="huge"), "profile")]:
        with pytest.raises(ValueError, match=match):
            RunSpec.make("tent", **bad)
    with pytest.raises(ValueError, match="unknown method"):
        RunSpec(method="nope")


def test_run_stores_one_record_and_skips_on_rerun(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path / "store")
    spec = RunSpec(method="bn_stats", corruptions=("none", "contrast"), profile="smoke")
    record = stamplib.run(spec, store=store)
    assert set(record["per_corruption"]) == {"none", "contrast"}
    assert record["per_corruption"]["none"]["n_id"] == 64 and record["per_corruption"]["none"]["n_outliers"] == 16
    assert list((tmp_path / "store").glob("*.json")) == [store.path(spec)]

    def boom(*args, **kwargs):
        raise AssertionError("a stored spec must not be recomputed")

    monkeypatch.setattr(stamplib.models, "source_model", boom)
    assert stamplib.run(spec, store=store) == record


def test_store_writes_atomically_and_ignores_partial_files(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    spec = RunSpec(method="source", corruptions=("none",), profile="smoke")
    record = {"key": spec.key(), "spec": spec.to_dict(), "mean": {}}

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.put(record)
    monkeypatch.undo()
    assert store.get(spec) is None  # only a temporary file exists
    store.path(spec).write_text('{"key": "trunc')  # a truncated record is ignored, not trusted
    with pytest.warns(UserWarning, match="unreadable"):
        assert store.get(spec) is None
    store.put(record)
    assert store.get(spec) == record


def test_cli_run_and_doctor(tmp_path):
    env = {**os.environ, "STAMPLIB_RESULTS": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "stamplib", "run", "--method", "source", "--corruptions", "none",
         "--profile", "smoke"], capture_output=True, text=True, env=env, check=True,
    ).stdout
    assert "mean" in out and len(list(tmp_path.glob("*.json"))) == 1
    bad = subprocess.run([sys.executable, "-m", "stamplib", "run", "--method", "stampp"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "available" in bad.stderr
    doctor = subprocess.run([sys.executable, "-m", "stamplib", "doctor"], capture_output=True, text=True,
                            env=env, check=True).stdout
    assert "digits" in doctor and "methods:" in doctor
