"""Batch size, label shift, mixed domains and gradual severities: a RunSpec's stream (issue 35)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import stamplib
from stamplib import RunSpec, data, methods
from stamplib.data import StreamSpec
from stamplib.data.orders import long_tail_counts
from stamplib.data.streams import stream_order
from stamplib.evaluation import assembly, runner
from stamplib.experiments import registry
from tests.support import context_for

pytestmark = pytest.mark.usefixtures("fresh_streams")

BASE = RunSpec(method="tent", dataset="digits", outlier_set="noise", corruptions=("contrast", "gaussian_noise"),
               profile="smoke")


def test_the_new_fields_leave_every_older_key_and_stream_as_it_was() -> None:
    assert RunSpec(method="stamp").key() == "8c92a55947dd4606"  # written before the fields existed
    explicit = BASE.with_stream(batch_size=64, label_shift="", schedule="episodic")
    assert explicit.key() == BASE.key() and explicit.to_dict() == BASE.to_dict()
    for changed in (dict(batch_size=4), dict(label_shift="sorted"), dict(schedule="mixed"), dict(schedule="gradual")):
        spec = BASE.with_stream(**changed)
        assert spec.key() != BASE.key() and RunSpec.from_dict(spec.to_dict()) == spec
    plain = data.build_stream(data.CorruptionStreamSpec("digits", "noise", "contrast", max_id=64))
    same = data.build_stream(data.CorruptionStreamSpec(
        "digits", "noise", "contrast", max_id=64, stream=StreamSpec(batch_size=64, label_shift="")))
    assert torch.equal(plain.images, same.images) and torch.equal(plain.labels, same.labels)


@pytest.mark.parametrize(("changes", "message"), [
    (dict(batch_size=0), "batch_size must be a positive integer"),
    (dict(batch_size=2.5), "batch_size must be a positive integer"),
    (dict(label_shift="imbalance:0.5"), "a number ≥ 1"),
    (dict(label_shift="imbalance:x"), "must be a number ≥ 1"),
    (dict(label_shift="longtail"), "unknown part 'longtail'"),
    (dict(label_shift="sorted", dirichlet=0.1), "one label order"),
    (dict(mixed_domains=True, continual=True), "give one of continual"),
    (dict(gradual=True, mixed_domains=True), "give one of continual"),
    (dict(mixed_domains="yes"), "mixed_domains is True or False"),
    (dict(gradual=True, realistic=True), "no mixed_domains, no gradual"),
])
def test_bad_values_get_one_clear_error(changes: dict, message: str) -> None:
    """Checked once, where the stream is built (the key's names, as a record's spec holds them)."""
    with pytest.raises(ValueError, match=message):
        RunSpec.from_dict({**BASE.to_dict(), **changes})
    with pytest.raises(ValueError, match="name two or more"):
        BASE.with_(corruptions=("contrast",), stream=StreamSpec(schedule="mixed"))


def test_batch_size_cuts_the_stream_into_batches_of_that_size() -> None:
    stream = assembly.build_stream(BASE.with_stream(batch_size=7))
    sizes = [b.x.shape[0] for b in stream.batches()]
    assert stream.batch_size == 7 and sizes[:-1] == [7] * (len(sizes) - 1) and sum(sizes) == 80
    same_order = assembly.build_stream(BASE)
    assert torch.equal(stream.labels, same_order.labels)  # only the cut changes


def test_imbalance_keeps_a_long_tail_and_the_outlier_share() -> None:
    assert long_tail_counts(10, 200, 10.0) == [200, 155, 120, 93, 72, 56, 43, 33, 26, 20]  # 200·10^(−c/9), rounded
    stream = data.build_stream(data.CorruptionStreamSpec("cifar10_builtin", "noise", "contrast", max_id=1000,
                               stream=StreamSpec(label_shift="imbalance:10")))
    known = stream.labels[stream.labels >= 0]
    counts = torch.bincount(known, minlength=10).tolist()
    assert counts == long_tail_counts(10, 100, 10.0) and counts[0] / counts[-1] == 10
    assert stream.num_outliers == data.outliers_for_ratio(known.numel(), 0.2)


def test_sorted_order_brings_the_classes_one_after_another_with_outliers_between() -> None:
    stream = data.build_stream(data.CorruptionStreamSpec(
        "cifar10_builtin", "noise", "contrast", max_id=1000, stream=StreamSpec(label_shift="sorted")))
    known = stream.labels[stream.labels >= 0]
    assert torch.equal(known, known.sort().values) and known.unique().numel() == 10
    positions = torch.nonzero(stream.labels < 0).flatten().float()
    assert positions.min() < 0.1 * stream.labels.numel() and positions.max() > 0.9 * stream.labels.numel()
    iid = data.build_stream(data.CorruptionStreamSpec("cifar10_builtin", "noise", "contrast", max_id=1000))
    assert sorted(iid.labels.tolist()) == sorted(stream.labels.tolist())  # same samples, another order
    order = stream_order(torch.tensor([2, 0, 1, 0, 2, 1]), 0, seed=3, stream=StreamSpec(label_shift="sorted"))
    assert torch.tensor([2, 0, 1, 0, 2, 1])[order].tolist() == [0, 0, 1, 1, 2, 2]


def _resets(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = methods.TTAMethod.reset
    monkeypatch.setattr(methods.TTAMethod, "reset", lambda self: (calls.append(1), original(self))[1])
    return calls


def test_mixed_domains_is_one_stream_without_a_reset_with_metrics_per_corruption(
    tmp_path: Path, digits_model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    separate = stamplib.run(BASE, context_for(tmp_path))
    resets, streams = _resets(monkeypatch), []
    original = runner.run_stream
    monkeypatch.setattr(runner, "run_stream", lambda m, s, *a, **k: (streams.append(s), original(m, s, *a, **k))[1])
    mixed = stamplib.run(BASE.with_stream(schedule="mixed"), context_for(tmp_path))
    assert len(resets) == 1 and len(streams) == 1 and streams[0].labels.numel() == 160
    for corruption in BASE.corruptions:
        assert mixed.per_corruption[corruption].n_id == separate.per_corruption[corruption].n_id == 64
    whole = mixed.stream.whole
    assert mixed.stream.options["mixed_domains"] is True and whole.n_id == 128 and whole.n_outliers == 32
    # The corruptions arrive interleaved, not one after the other.
    stream, source = data.interleave([assembly.build_stream(BASE, c) for c in BASE.corruptions], BASE.seed)
    assert 0.3 < source[:80].float().mean() < 0.7
    outputs = np.load(tmp_path / mixed.outputs)
    assert sorted(outputs["contrast.label"].tolist()) == sorted(assembly.build_stream(BASE, "contrast").labels.tolist())


def test_gradual_runs_severity_one_to_five_to_one_per_corruption_without_a_reset(
    tmp_path: Path, digits_model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    resets, built = _resets(monkeypatch), []
    original = runner.build_stream
    monkeypatch.setattr(
        runner,
        "build_stream",
        lambda spec, corruption, severity=None, data_root=None: (
            built.append((corruption, severity)),
            original(spec, corruption, severity=severity, data_root=data_root),
        )[1],
    )
    record = stamplib.run(BASE.with_stream(schedule="gradual"), context_for(tmp_path))
    levels = [1, 2, 3, 4, 5, 4, 3, 2, 1]
    assert built == [(c, s) for c in BASE.corruptions for s in levels] and len(resets) == 1
    for row in record.per_corruption.values():
        assert [r.severity for r in row.severities] == levels and row.n_id == 64 * 9
    assert data.gradual_severities(3) == (1, 2, 3, 2, 1)


@pytest.mark.parametrize("name", methods.available())
def test_batch_size_one_runs_for_every_method_that_supports_it(name: str, tmp_path: Path, digits_model) -> None:
    spec = (
        BASE.with_(method=name, corruptions=("contrast",)) if methods.method_class(name).min_batch_size == 1 else None
    )
    if spec is None:
        with pytest.raises(ValueError, match=f"method '{name}' cannot adapt on a batch of 1: the smallest batch"):
            BASE.with_(method=name, stream=StreamSpec(batch_size=1))
        spec = BASE.with_(
            method=name,
            corruptions=("contrast",),
            stream=StreamSpec(batch_size=methods.method_class(name).min_batch_size),
        )
    else:
        spec = spec.with_stream(batch_size=1)
    record = stamplib.run(spec, context_for(tmp_path))
    row = record.per_corruption["contrast"]
    assert row.n_id == 64 and all(np.isfinite(row.scores[k]) for k in ("acc", "auroc", "h")), row


def test_only_unient_needs_more_than_one_sample() -> None:
    assert {m for m in methods.available() if methods.method_class(m).min_batch_size > 1} == {"unient", "unient_plus"}


def test_notebook_13_plans_each_axis_against_the_paper_stream() -> None:
    plan = registry.plan("13_stress_streams", profile="quick", batch_sizes="1,4,16,64")
    table1 = {s.key() for s in registry.plan("02_table1_cifar_outlier_aware", profile="quick").specs}
    variants = {c.variant for c in plan.cells}
    assert {
        "batch size=1",
        "batch size=64",
        "label shift=imbalance:10",
        "label shift=sorted",
        "domains=mixed",
        "domains=separate",
    } <= variants
    paper = [c.spec for c in plan.cells if c.variant in ("label shift=none", "domains=separate", "batch size=64")]
    assert {s.key() for s in paper} <= table1  # the paper's stream is notebook 02's cell
    batches = [c for c in plan.cells if c.variant.startswith("batch size")]
    # the batch axis: one corruption, that of the batch of 64 read from notebook 02's cell
    assert {c.corruptions or c.spec.corruptions for c in batches} == {("gaussian_noise",)}
    assert not any(c.spec.method.startswith("unient") and c.spec.stream.batch_size == 1 for c in plan.cells)
    assert any("unient" in note for note in plan.notes)
    # 3 batch sizes of their own, 3 harder streams, less UniEnt's batch of 1; the paper's stream
    rows = len(methods.TABLE_ORDER)
    no_batch_of_one = sum(methods.method_class(m).min_batch_size > 1 for m in methods.TABLE_ORDER)
    assert len(plan.specs) == rows * (3 + 3) - no_batch_of_one + rows + 2 * rows  # and it over seeds 1, 2: the band
    assert {
        c.variant for c in registry.plan("13_stress_streams", profile="quick").cells if c.variant.startswith("batch")
    } == {"batch size=4", "batch size=16", "batch size=64"}
    every = registry.plan("13_stress_streams", profile="quick", batch_corruptions="")
    assert {c.spec.key() for c in every.cells if c.variant == "batch size=64"} <= table1
    smoke = registry.plan("13_stress_streams", profile="smoke")
    assert not any(c.spec.stream.schedule == "mixed" for c in smoke.cells) and any(
        "two or more" in n for n in smoke.notes
    )
