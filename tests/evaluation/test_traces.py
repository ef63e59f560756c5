"""Per-batch traces: the tracer's counts are exact for a method whose reports we know, the five
tracing methods report on the built-in benchmark, and tracing changes no output."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
import torch

import stamplib
from stamplib import methods
from stamplib.data.streams import StreamSpec, mix
from stamplib.evaluation.runner import run_stream
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.traces import StreamTracer, filter_precision, memory_purity
from stamplib.methods.base import TTAMethod, TTAOutput
from tests.support import context_for, tiny_net


@dataclass(frozen=True)
class _NoConfig:
    pass


class _FirstThree(TTAMethod):
    """Passes the first three samples of every batch; its 'memory' is the current batch."""

    config_cls = _NoConfig
    configs = {"cifar10_c": _NoConfig()}

    def step(self, x: torch.Tensor) -> TTAOutput:
        probs = torch.softmax(self.model(x), dim=1)
        passed = torch.zeros(x.shape[0], dtype=torch.bool)
        passed[:3] = True
        self.report(passed=passed, loss=1.5, memory_tags=self.sample_tags(x.shape[0]),
                    memory_labels=probs.argmax(1))
        return TTAOutput(probs, -probs.max(1).values)


def _stream(n_id: int = 40, n_out: int = 10):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 256, (n_id, 8, 8, 3), dtype=torch.uint8, generator=g)
    outs = torch.randint(0, 256, (n_out, 8, 8, 3), dtype=torch.uint8, generator=g)
    return mix(ids, torch.arange(n_id) % 4, outs, n_out, seed=1, stream=StreamSpec(batch_size=16))


def test_the_tracer_counts_exactly_what_a_method_reports() -> None:
    stream = _stream()
    method = _FirstThree(tiny_net(4).eval(), 4, _NoConfig())
    tracer = StreamTracer(stream, 4)
    attributes = set(vars(method))
    result = run_stream(method, stream, tracer=tracer)
    trace = tracer.trace()
    assert set(vars(method)) == attributes  # the runner sets nothing on the method
    batches = [stream.labels[s : s + 16] for s in range(0, 50, 16)]
    assert trace["n_passed"] == [min(3, len(b)) for b in batches]
    assert trace["passed_outliers"] == [int((b[:3] < 0).sum()) for b in batches]
    assert trace["memory_size"] == [len(b) for b in batches]
    assert trace["memory_outliers"] == [int((b < 0).sum()) for b in batches]  # found by their positions
    preds = result.probs.argmax(1)
    assert trace["memory_counts"][0] == torch.bincount(preds[:16], minlength=4).tolist()
    assert trace["loss"] == [1.5] * 4 and len(trace["seconds"]) == 4
    assert all(p >= 1 for p in trace["peak_memory_mb"])
    assert filter_precision(trace)[0] == pytest.approx(1 - trace["passed_outliers"][0] / 3)
    assert memory_purity(trace)[-1] == pytest.approx(1 - trace["memory_outliers"][-1] / trace["memory_size"][-1])


@pytest.mark.parametrize("name", ["stamp", "sotta", "rotta", "eata", "sar"])
def test_tracing_methods_report_on_the_builtin_benchmark(name: str, tmp_path, digits_model) -> None:
    spec = RunSpec(method=name, corruptions=("gaussian_noise",), profile="smoke")
    record = stamplib.run(spec, context_for(tmp_path))
    trace = record.trace["gaussian_noise"]
    n_batches = len(trace.seconds)
    assert n_batches >= 2 and methods.method_class(name).reports_trace
    for passed, outliers in zip(trace.n_passed, trace.passed_outliers):
        assert 0 <= outliers <= passed <= 64
    if trace.memory_size is not None:  # the memory methods
        assert all(0 <= o <= s <= 64 for o, s in zip(trace.memory_outliers, trace.memory_size))
        assert tuple(sum(c) for c in trace.memory_counts) == trace.memory_size
    assert any(v == v for v in trace.loss)  # some batch adapted (NaN ≠ NaN)


def test_methods_without_reports_trace_only_the_stream_and_tracing_changes_no_output(tmp_path, digits_model) -> None:
    """A method that reports nothing (Tent) still gets the columns every method has (time, memory and its
    accuracy per batch, so it can be drawn beside STAMP's over the stream), and none of a method's report."""
    record = stamplib.run(RunSpec(method="tent", corruptions=("gaussian_noise",), profile="smoke"),
                          context_for(tmp_path))
    assert not methods.method_class("tent").reports_trace
    (trace,) = record.trace.values()
    assert set(trace.columns()) == {"seconds", "peak_memory_mb", "n_known", "n_correct", "n_outliers"}
    assert all(0 <= c <= k for c, k in zip(trace.n_correct, trace.n_known))
    assert all(k + o > 0 for k, o in zip(trace.n_known, trace.n_outliers))  # every sample is known or an outlier
    stream = stamplib.data.build_stream(stamplib.data.CorruptionStreamSpec(
        "digits", "noise", "gaussian_noise", max_id=96))
    plain, traced = (methods.create("sotta", digits_model, 8, seed=0) for _ in range(2))
    a = run_stream(plain, stream)
    b = run_stream(traced, stream, tracer=StreamTracer(stream, 8))
    assert torch.equal(a.probs, b.probs) and torch.equal(a.ood_score, b.ood_score)


class _Recorder(StreamTracer):
    """A tracer that also checks, at every report, that each memory item is the stream image
    at the position it carries (the memories keep positions beside their samples)."""

    def __init__(self, stream, method: TTAMethod) -> None:
        super().__init__(stream, method.num_classes)
        self.stream, self.method, self.checked = stream, method, 0

    def end(self, batch, report=None, probs=None) -> None:
        super().end(batch, report, probs)
        memory = self.method.memory
        items = [it.data for it in memory.items()] if callable(memory.items) else [x for c in memory.items for x in c]
        assert len(items) == report.memory_tags.numel()
        if items:
            stored = torch.stack(items).mul(255).round().byte().permute(0, 2, 3, 1)
            assert torch.equal(stored, self.stream.images[self.positions_of(report.memory_tags)])
            self.checked += len(items)


@pytest.mark.parametrize("name", ["stamp", "sotta", "rotta"])
def test_memories_carry_each_items_stream_position_and_tracing_changes_no_output(name: str, digits_model) -> None:
    stream = stamplib.data.build_stream(stamplib.data.CorruptionStreamSpec(
        "digits", "noise", "gaussian_noise", max_id=192))
    plain, traced = (methods.create(name, digits_model, 8, seed=0) for _ in range(2))
    recorder = _Recorder(stream, traced)
    a, b = run_stream(plain, stream), run_stream(traced, stream, tracer=recorder)
    assert torch.equal(a.probs, b.probs) and torch.equal(a.ood_score, b.ood_score)
    assert recorder.checked > 0
    assert recorder.trace()["memory_size"][-1] > 0


def test_positions_outside_the_stream_are_not_its_outliers() -> None:
    """A continual run gives each stream its own range: items kept from the previous stream are
    not taken for this one's outliers."""
    stream = _stream()
    tracer = StreamTracer(stream, 4, first_position=100)
    batch = next(iter(stream.batches()))
    assert tracer.begin(batch).tolist() == list(range(100, 116))
    outliers = torch.nonzero(stream.is_outlier).flatten()
    assert tracer.outliers_at(outliers + 100) == stream.num_outliers
    assert tracer.outliers_at(outliers) == tracer.outliers_at(outliers + 150) == 0


def test_steps_are_timed_between_two_cuda_synchronizes(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA the clock stops only after the GPU has finished the step: the tracer synchronizes
    before starting and before stopping it (a stub here; no GPU needed)."""
    events: list[str] = []

    def synchronize(device: torch.device) -> None:
        assert device == torch.device("cuda")
        events.append("sync")
        time.sleep(0.01)  # the GPU finishing queued work

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: 3 * 2**20)

    class _Logged(_FirstThree):
        def step(self, x: torch.Tensor) -> TTAOutput:
            events.append("step")
            return super().step(x)

    stream = _stream()
    tracer = StreamTracer(stream, 4, device="cuda")
    run_stream(_Logged(tiny_net(4).eval(), 4, _NoConfig()), stream, tracer=tracer)
    assert events == ["sync", "step", "sync"] * 4
    trace = tracer.trace()
    assert all(s >= 0.01 for s in trace["seconds"]) and trace["peak_memory_mb"] == [3.0] * 4


def test_cpu_steps_never_synchronize(monkeypatch: pytest.MonkeyPatch) -> None:
    def synchronize(device: torch.device) -> None:
        raise AssertionError("synchronize on the CPU")

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    stream = _stream()
    tracer = StreamTracer(stream, 4)
    run_stream(_FirstThree(tiny_net(4).eval(), 4, _NoConfig()), stream, tracer=tracer)
    assert len(tracer.trace()["seconds"]) == 4


def test_tags_of_an_earlier_stream_are_not_this_streams_outliers() -> None:
    """A continual run feeds one method several streams: the tracer of the second stream never
    saw the tags of the first, so items kept from it count in the memory but not as its outliers."""
    stream = _stream()
    method = _FirstThree(tiny_net(4).eval(), 4, _NoConfig())
    run_stream(method, stream, tracer=StreamTracer(stream, 4))  # tags 0 … 49
    second = StreamTracer(stream, 4, first_position=50)
    assert second.positions_of(torch.tensor([0, 49])).tolist() == [-1, -1]
    run_stream(method, stream, tracer=second)  # tags 50 … 99, mapped to positions 50 … 99
    assert second.positions_of(torch.tensor([50, 99, 3])).tolist() == [50, 99, -1]
    assert second.trace()["memory_outliers"] == [int((stream.labels[s : s + 16] < 0).sum()) for s in range(0, 50, 16)]
