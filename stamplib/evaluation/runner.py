"""run(spec, context): compute one cell — every corruption's stream, the method reset before
each (protocol.md §1.2; the continual, mixed and gradual schedules of a spec's stream reset
once, before the first) — and store one JSON record per spec in the context's results store,
reading the data sets from its data root, on its device.

An episodic cell survives an interruption: each corruption is kept in the store as it
finishes (:meth:`ResultsStore.put_partial`), and a rerun starts at the first corruption not
kept. The reset before each corruption restores the method's weights, optimiser and random
generators, so the resumed record equals an uninterrupted one bit for bit. A continual cell
carries its state from one corruption to the next and restarts from the beginning.

The realistic online protocol (Alfarra et al., "Evaluation of Test-Time Adaptation Under
Computational Time Constraints", ICML 2024; a spec's ``stream.realistic``): the stream arrives at the
speed of a plain forward, so a method whose step costs C(g) forwards adapts on batches 0, C,
2C, … and answers the batches that arrive while it is busy with
:meth:`~stamplib.methods.TTAMethod.predict`, its most recently adapted model without
adaptation. The runner decides which batches reach ``step``; no method changes. C(g) is fixed
by the spec or measured once per cell (:func:`measure_relative_speed`), and a resumed cell
keeps the C(g) of its stored corruptions."""

from __future__ import annotations

import math
import platform
import time
from dataclasses import dataclass
from typing import Any

import torch
from tqdm.auto import tqdm

from stamplib import data, methods
from stamplib.blocks import graphs
from stamplib.blocks.entropy import logit_entropy
from stamplib.evaluation.assembly import build_method, build_stream, layout_name, network_layout
from stamplib.evaluation.metrics import METRIC_LABELS, aggregate, stream_metrics
from stamplib.evaluation.outputs import StreamOutputs
from stamplib.evaluation.precision import apply_tf32_policy
from stamplib.evaluation.provenance import provenance
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.evaluation.traces import StreamTracer, synchronize
from stamplib.paths import RunContext
from stamplib.version import __version__

#: The stream fields a record's ``stream`` section names only where they are set, so that a
#: record of the older fields stays as it was.
LATER_STREAM_FIELDS = ("batch_size", "label_shift", "mixed_domains", "gradual")

@dataclass
class StreamResult:
    """Everything a method emitted on one stream, in stream order."""

    probs: torch.Tensor  # [N, C]
    ood_score: torch.Tensor  # [N], higher = outlier
    labels: torch.Tensor  # [N], −1 = outlier
    seconds: float
    adapted_batches: int = 0  # batches that reached ``step`` (the others were only predicted)
    batches: int = 0

    @property
    def is_outlier(self) -> torch.Tensor:
        return self.labels < 0


def run_stream(
    method: methods.TTAMethod, stream: data.Stream, device: str = "cpu", progress: bool = False,
    tracer: StreamTracer | None = None, adapt_every: int = 1, replay_graphs: bool = False,
) -> StreamResult:
    """Feed a stream batch by batch through ``method`` (no reset here: the caller decides).
    With a ``tracer``, each step is timed and the method's reports are collected
    (:mod:`stamplib.evaluation.traces`). ``adapt_every`` = C(g) of the realistic protocol:
    only batches 0, C, 2C, … reach ``step``, the others ``predict``. ``replay_graphs``: the
    method was built with ``build_method(..., replay_graphs=True)``; each batch starts a step."""
    assert adapt_every >= 1, f"adapt_every is C(g) ≥ 1, got {adapt_every}"
    probs, scores, labels = [], [], []
    adapted = 0
    start = time.perf_counter()
    batches = tqdm(stream.batches(device), total=len(stream), disable=not progress, leave=False)
    for index, batch in enumerate(batches):
        if tracer is not None:
            tracer.begin(batch)
        stepped = index % adapt_every == 0
        if replay_graphs:
            graphs.step_begins()
        if stepped:
            out = method.step(batch.x)
            adapted += 1
        else:
            out = method.predict(batch.x)
        report = method.take_report() if stepped else None  # taken either way: it is this batch's only
        if tracer is not None:
            tracer.end(batch, report)
        probs.append(out.probs.detach().float().cpu())
        scores.append(out.ood_score.detach().float().cpu())
        labels.append(batch.y.cpu())
    return StreamResult(torch.cat(probs), torch.cat(scores), torch.cat(labels), time.perf_counter() - start,
                        adapted, len(probs))


#: A measured ratio up to this much above an integer counts as that integer: timing noise alone
#: must not give a method whose step is one forward (BN Stats) C(g) = 2.
SPEED_TOLERANCE = 0.1


@dataclass(frozen=True)
class RelativeSpeed:
    """C(g) of the realistic protocol: how many batches pass while the method adapts on one.
    Measured (with the two least timings it came from) or fixed by the spec (times None)."""

    value: int
    step_seconds: float | None = None  # the method's step on one batch (least of several timings)
    forward_seconds: float | None = None  # the source model's forward on the same batch (likewise)

    @classmethod
    def from_times(cls, step_seconds: float, forward_seconds: float) -> RelativeSpeed:
        """C(g) = the ratio of the two times rounded up (Alfarra et al.), within :data:`SPEED_TOLERANCE`."""
        ratio = step_seconds / max(forward_seconds, 1e-9)
        return cls(max(1, math.ceil(ratio - SPEED_TOLERANCE)), round(step_seconds, 6), round(forward_seconds, 6))

    @classmethod
    def from_metrics(cls, metrics: dict[str, Any]) -> RelativeSpeed:
        return cls(int(metrics["relative_speed"]), metrics.get("step_seconds"), metrics.get("forward_seconds"))

    def as_metrics(self) -> dict[str, Any]:
        return {"relative_speed": self.value, "step_seconds": self.step_seconds, "forward_seconds": self.forward_seconds}


def measure_relative_speed(spec: RunSpec, stream: data.Stream, context: RunContext, repeats: int = 5
                           ) -> RelativeSpeed:
    """C(g) of ``spec``'s method on this device: the time of its step on the stream's first batch
    over the time of the source model's forward (the Source method) on the same batch, each the
    least of ``repeats`` timings after one warm-up (other work on the machine only ever adds
    time, so the least is the steadiest estimate of the cost itself), the two timed in turn.
    Both run on throwaway instances, so the run's own method is untouched."""
    assert repeats >= 1
    device = context.device
    x = next(iter(stream.batches(device))).x
    method = build_method(spec, device, data_root=context.data_root)
    plain = spec.with_(method="source", overrides={}, stream=spec.stream.with_(realistic=False, relative_speed=0))
    source = build_method(plain, device, data_root=context.data_root)
    clock = torch.device(device)

    def seconds(call: Any) -> float:
        synchronize(clock)
        started = time.perf_counter()
        call(x)
        synchronize(clock)
        return time.perf_counter() - started

    method.step(x)
    source.step(x)
    steps, forwards = [], []
    for _ in range(repeats):
        steps.append(seconds(method.step))
        forwards.append(seconds(source.step))
    return RelativeSpeed.from_times(min(steps), min(forwards))


@torch.no_grad()
def frozen_entropy(model: torch.nn.Module, stream: data.Stream, device: str = "cpu") -> torch.Tensor:
    """Entropy of a model's prediction for every sample of a stream, without adapting it
    (BN as the model is configured). Used to compare a model before and after adaptation."""
    return torch.cat([logit_entropy(model(b.x)).cpu() for b in stream.batches(device)])


def collapse_reason(result: StreamResult) -> str | None:
    """Why a stream's output cannot be trusted, or None (issue: never average a collapse)."""
    if not torch.isfinite(result.probs).all() or not torch.isfinite(result.ood_score).all():
        return "non-finite outputs"
    preds = result.probs.argmax(dim=1)
    if preds.numel() >= 128 and preds.unique().numel() == 1:
        return f"predicts a single class ({int(preds[0])}) for the whole stream"
    return None


def _versions() -> dict[str, str]:
    import numpy
    import sklearn
    import torchvision

    return {
        "stamplib": __version__,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": numpy.__version__,
        "scikit-learn": sklearn.__version__,
        "python": platform.python_version(),
    }


def result_metrics(result: StreamResult) -> dict[str, Any]:
    """A stream's metrics, sample counts, time and collapse flag, as a record's row."""
    reason = collapse_reason(result)
    return {
        **stream_metrics(result.probs, result.ood_score, result.labels),
        "n_id": int((result.labels >= 0).sum()),
        "n_outliers": int(result.is_outlier.sum()),
        "seconds": round(result.seconds, 3),
        "collapsed": reason is not None,
        "collapse_reason": reason,
    }


def concatenate(results: list[StreamResult]) -> StreamResult:
    """Several streams' results as one, in the order they ran."""
    if len(results) == 1:
        return results[0]
    return StreamResult(torch.cat([r.probs for r in results]), torch.cat([r.ood_score for r in results]),
                        torch.cat([r.labels for r in results]), sum(r.seconds for r in results),
                        sum(r.adapted_batches for r in results), sum(r.batches for r in results))


def run_corruption(
    method: methods.TTAMethod, spec: RunSpec, corruption: str, context: RunContext, first_position: int = 0,
    speed: RelativeSpeed | None = None,
) -> tuple[dict[str, Any], StreamOutputs, dict[str, list[Any]] | None]:
    """One corruption of a cell (no reset here): its metrics, outputs and trace (None when the
    method reports nothing). The stream lives only in here, so a stream too large for the
    stream cache is released before the next corruption's is built. ``first_position``: where
    the stream starts among all the samples the method has seen since its reset (traces).
    ``speed``: C(g) of a realistic spec; None fixes it from the spec or measures it on this
    stream (the metrics then carry it). The gradual schedule runs one stream per severity
    (:func:`stamplib.data.gradual_severities`) and pools them; its row lists each level's
    metrics under ``severities``."""
    gradual, device = spec.stream.schedule == "gradual", context.device
    levels = data.gradual_severities(spec.severity) if gradual else (spec.severity,)
    results, rows, trace = [], [], {}
    for severity in levels:
        stream = build_stream(spec, corruption, severity=severity, data_root=context.data_root)
        if spec.stream.realistic and speed is None:
            speed = (RelativeSpeed(spec.stream.relative_speed) if spec.stream.relative_speed
                     else measure_relative_speed(spec, stream, context))
        tracer = StreamTracer(stream, method.num_classes, device, first_position)
        results.append(run_stream(method, stream, device, tracer=tracer, adapt_every=speed.value if speed else 1))
        first_position += stream.labels.numel()
        for name, column in (tracer.trace() if tracer.reported else {}).items():
            trace.setdefault(name, []).extend(column)
        if gradual:
            rows.append({"severity": severity, **stream_metrics(results[-1].probs, results[-1].ood_score,
                                                                results[-1].labels)})
    result = concatenate(results)
    metrics = result_metrics(result)
    if spec.stream.realistic:
        metrics.update(speed.as_metrics(), adapted_batches=result.adapted_batches, batches=result.batches)
    if rows:
        metrics["severities"] = rows
    outputs = StreamOutputs.from_tensors(result.probs, result.ood_score, result.labels)
    return metrics, outputs, trace or None


def run_mixed_domains(
    method: methods.TTAMethod, spec: RunSpec, context: RunContext,
) -> tuple[dict[str, dict[str, Any]], dict[str, StreamOutputs], dict[str, Any]]:
    """Every corruption's stream in one shuffled stream (:func:`stamplib.data.interleave`), fed
    through ``method`` without a reset (none here: the caller resets once). Returns each
    corruption's metrics and outputs (its samples, in the order they came) and the metrics of
    the whole stream. A corruption's ``seconds`` is the whole run's time times its share of the
    samples. No trace: a trace follows one corruption's stream."""
    stream, source = data.interleave([build_stream(spec, c, data_root=context.data_root) for c in spec.corruptions],
                                     spec.seed)
    whole = run_stream(method, stream, context.device)
    per_corruption, outputs = {}, {}
    for index, corruption in enumerate(spec.corruptions):
        mine = source == index
        part = StreamResult(whole.probs[mine], whole.ood_score[mine], whole.labels[mine],
                            whole.seconds * float(mine.float().mean()))
        per_corruption[corruption] = result_metrics(part)
        outputs[corruption] = StreamOutputs.from_tensors(part.probs, part.ood_score, part.labels)
    return per_corruption, outputs, result_metrics(whole)


def run(spec: RunSpec, context: RunContext, *, force: bool = False, progress: bool = False) -> dict[str, Any]:
    """Compute ``spec`` (or return its stored record, unless ``force``) where ``context`` says:
    the data sets from its data root, on its device, the record into its results store, naming
    its command."""
    store = ResultsStore(context.results)
    if not force:
        record = store.get(spec)
        if record is not None:
            return record
    apply_tf32_policy(context.allow_tf32)  # a record is a fidelity run: float32, not TF32, on a GPU
    device, stream = context.device, spec.stream
    method = build_method(spec, device, progress, data_root=context.data_root)
    per_corruption: dict[str, dict[str, Any]] = {}
    outputs: dict[str, StreamOutputs] = {}
    traces: dict[str, dict[str, list[Any]]] = {}
    record_provenance = provenance(spec.dataset, context.data_root, context.command,
                                   layout_name(network_layout(device)))
    checkpoint_sha = record_provenance["checkpoint"]["sha256"]
    resumable = stream.resets_per_corruption and len(spec.corruptions) > 1
    started, kept_seconds = time.perf_counter(), 0.0
    speed: RelativeSpeed | None = None  # realistic: C(g), fixed or measured once per cell
    whole_stream = None  # mixed domains: the metrics over the one stream
    mixed = stream.schedule == "mixed"
    if mixed:
        method.reset()
        per_corruption, outputs, whole_stream = run_mixed_domains(method, spec, context)
    for corruption in tqdm(() if mixed else spec.corruptions, desc=f"{spec.method}/{spec.outliers}",
                           disable=not progress, leave=False):
        kept = store.partial(spec, corruption, checkpoint_sha) if resumable else None
        if kept is not None:
            per_corruption[corruption], outputs[corruption], trace = kept
            kept_seconds += float(per_corruption[corruption].get("seconds", 0.0))
        else:
            if stream.resets_per_corruption or not per_corruption:  # else one reset, before the first
                method.reset()
            seen = 0 if stream.resets_per_corruption else sum(m["n_id"] + m["n_outliers"] for m in per_corruption.values())
            per_corruption[corruption], outputs[corruption], trace = run_corruption(
                method, spec, corruption, context, seen, speed)
            if resumable:
                store.put_partial(spec, corruption, per_corruption[corruption], outputs[corruption], trace or None,
                                  checkpoint_sha)
        if stream.realistic and speed is None:  # the first corruption's C(g); a resumed cell keeps it
            speed = RelativeSpeed.from_metrics(per_corruption[corruption])
        if trace:
            traces[corruption] = trace
    record = {
        "key": spec.key(),
        "spec": spec.to_dict(),
        "config": repr(method.config),
        "per_corruption": per_corruption,
        "mean": aggregate(per_corruption),  # averaged over all, with "collapsed": [names] flagged
        "collapsed": sorted(c for c, m in per_corruption.items() if m["collapsed"]),
        "seconds": round(time.perf_counter() - started + kept_seconds, 3),  # kept: of an interrupted run
        "device": device,
        "versions": _versions(),
        "provenance": record_provenance,
    }
    if traces:
        record["trace"] = traces
    if stream.realistic:
        rows = per_corruption.values()
        record["realistic"] = {**speed.as_metrics(), "measured": not stream.relative_speed,
                               "adapted_batches": sum(m["adapted_batches"] for m in rows),
                               "batches": sum(m["batches"] for m in rows)}
    record.update(stream_section(spec, whole_stream))
    store.put(record, outputs)
    return record


def stream_section(spec: RunSpec, whole_stream: dict[str, Any] | None) -> dict[str, Any]:
    """A record's ``stream`` section, for a stream other than the paper's: the continual
    schedule, Dirichlet order and outlier bursts always, the later fields only where set (as
    the key holds them), so that a record of the older fields stays as it was."""
    keyed = spec.stream.key_fields()
    continual = spec.stream.schedule == "continual"
    later = {name: value for name, value in keyed.items() if name in LATER_STREAM_FIELDS}
    if not (continual or spec.stream.dirichlet or spec.stream.outlier_burst or later):
        return {}
    section = {"continual": continual, "order": list(spec.corruptions), "dirichlet": spec.stream.dirichlet,
               "outlier_burst": spec.stream.outlier_burst, **later}
    return {"stream": {**section, "whole": whole_stream} if whole_stream is not None else section}


def summary_lines(record: dict[str, Any]) -> list[str]:
    """What ``run`` prints of a record: each corruption's metrics (a collapse named), their
    mean, and the realistic protocol's C(g)."""
    shown = [m for m in METRIC_LABELS if m in record["mean"]]  # a stored older record has fewer
    lines = [f"{'corruption':20s}" + "".join(f" {METRIC_LABELS[m]:>8s}" for m in shown)]
    for name, m in record["per_corruption"].items():
        flag = "  COLLAPSED: " + m["collapse_reason"] if m["collapsed"] else ""
        lines.append(f"{name:20s}" + "".join(f" {m[k]:8.1f}" for k in shown) + flag)
    lines.append(f"{'mean':20s}" + "".join(f" {record['mean'][k]:8.1f}" for k in shown))
    if "realistic" in record:
        r = record["realistic"]
        how = "measured" if r["measured"] else "fixed"
        lines.append(f"realistic protocol: C(g) = {r['relative_speed']} ({how}), adapted on {r['adapted_batches']} "
                     f"of {r['batches']} batches")
    return lines
