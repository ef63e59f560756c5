"""The realistic online protocol (issue 28): a method that costs C(g) forwards adapts on every
C-th batch and only predicts the others; C = 1 is today's protocol bit for bit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from stamplib.data import StreamSpec
from stamplib.evaluation import runner
from stamplib.evaluation.assembly import build_method, build_stream
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.methods import contract
from tests.support import context_for

SMOKE = dict(dataset="digits", outlier_set="noise", corruptions=("gaussian_noise", "contrast"), profile="smoke")


def _outputs(store: ResultsStore, spec: RunSpec) -> dict[str, np.ndarray]:
    with np.load(store.path(spec).with_suffix(".outputs.npz")) as npz:
        return {k: npz[k] for k in npz.files}


@pytest.mark.parametrize("method", ["tent", "stamp"])
def test_relative_speed_one_is_todays_protocol_bit_for_bit(tmp_path: Path, method: str) -> None:
    paper = RunSpec(method=method, **SMOKE)
    realistic = paper.with_stream(realistic=True, relative_speed=1)
    store = ResultsStore(tmp_path)
    a, b = runner.run(paper, context_for(store)), runner.run(realistic, context_for(store))
    assert paper.key() != realistic.key()
    out_a, out_b = _outputs(store, paper), _outputs(store, realistic)
    assert out_a.keys() == out_b.keys() and all(np.array_equal(out_a[k], out_b[k]) for k in out_a)
    for corruption, row in a.per_corruption.items():
        other = b.per_corruption[corruption]
        assert dataclasses.replace(row, seconds=None) == dataclasses.replace(
            other, seconds=None, speed=None, adapted_batches=None, batches=None)
        assert other.speed.value == 1 and other.adapted_batches == other.batches == 2
    assert a.realistic is None and b.realistic.speed.value == 1 and not b.realistic.measured


def test_every_third_batch_is_adapted_and_the_others_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = RunSpec(method="tent", **SMOKE)
    stream = build_stream(spec, max_id=400)
    assert len(stream) == 8
    method = build_method(spec)
    stepped, predicted = [], []
    step, predict = method.step, method.predict

    def counting_step(x):
        stepped.append(len(stepped) + len(predicted))
        return step(x)

    def watched_predict(x):
        predicted.append(len(stepped) + len(predicted))
        before = contract.method_state(method)
        out = predict(x)
        contract.assert_same(contract.method_state(method), before, "tent after predict()")
        return out

    monkeypatch.setattr(method, "step", counting_step)
    monkeypatch.setattr(method, "predict", watched_predict)
    weights = [p.detach().clone() for p in method.adapted_parameters()]
    result = runner.run_stream(method, stream, adapt_every=3)
    assert stepped == [0, 3, 6] and predicted == [1, 2, 4, 5, 7]
    assert (result.adapted_batches, result.batches) == (3, 8) and result.probs.shape[0] == stream.is_outlier.numel()
    assert any(not p.equal(w) for p, w in zip(method.adapted_parameters(), weights)), "tent adapted on 3 batches"


def test_a_realistic_record_carries_its_relative_speed_and_adapted_batches(tmp_path: Path) -> None:
    spec = RunSpec(method="tent", stream=StreamSpec(realistic=True, relative_speed=2), **SMOKE)
    record = runner.run(spec, context_for(tmp_path))
    assert record.to_json()["realistic"] == {"relative_speed": 2, "step_seconds": None, "forward_seconds": None,
                                             "measured": False, "adapted_batches": 2, "batches": 4}
    assert record.to_json()["spec"]["realistic"] is True and record.to_json()["spec"]["relative_speed"] == 2


def test_the_relative_speed_is_measured_once_per_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def measured(spec: RunSpec, stream, context, repeats=3):
        calls.append(spec.key())
        return runner.RelativeSpeed.from_times(0.0035, 0.001)

    monkeypatch.setattr(runner, "measure_relative_speed", measured)
    record = runner.run(RunSpec(method="tent", stream=StreamSpec(realistic=True), **SMOKE), context_for(tmp_path))
    assert len(calls) == 1 and record.realistic.measured
    assert record.realistic.speed.value == 4  # 3.5 rounded up
    assert [row.speed.value for row in record.per_corruption.values()] == [4, 4]


def test_rounding_up_forgives_timing_noise_only() -> None:
    assert runner.RelativeSpeed.from_times(1.05, 1.0).value == 1  # as fast as the forward: noise
    assert runner.RelativeSpeed.from_times(1.2, 1.0).value == 2
    assert runner.RelativeSpeed.from_times(16.5, 1.0).value == 17
    assert runner.RelativeSpeed.from_times(0.5, 1.0).value == 1


def test_stamp_is_slower_than_tent_on_the_same_stream(tmp_path: Path) -> None:
    tent = RunSpec(method="tent", **SMOKE)
    stream = build_stream(tent)
    fast = runner.measure_relative_speed(tent, stream, context_for(tmp_path), repeats=5)
    slow = runner.measure_relative_speed(tent.with_(method="stamp"), stream, context_for(tmp_path), repeats=5)
    assert slow.value > fast.value, (slow, fast)
    assert fast.value >= 1 and slow.step_seconds > fast.step_seconds
