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

import platform
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from tqdm.auto import tqdm

from stamplib import data, methods
from stamplib.blocks import graphs
from stamplib.blocks.entropy import logit_entropy
from stamplib.evaluation import diagnostics
from stamplib.evaluation.assembly import build_method, build_stream, layout_name, network_layout
from stamplib.evaluation.metrics import METRIC_LABELS, stream_metrics
from stamplib.evaluation.outputs import StreamOutputs
from stamplib.evaluation.precision import apply_tf32_policy
from stamplib.evaluation.provenance import provenance
from stamplib.evaluation.record import (
    Mean,
    Provenance,
    Realistic,
    Record,
    RelativeSpeed,
    Row,
    Severity,
    StreamSection,
    Trace,
)
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.evaluation.traces import StreamTracer, synchronize
from stamplib.paths import RunContext
from stamplib.version import __version__


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
    tracer: StreamTracer | None = None, adapt_every: int = 1, replay_graphs: bool = False, oracle: bool = False,
) -> StreamResult:
    """Feed a stream batch by batch through ``method`` (no reset here: the caller decides).
    With a ``tracer``, each step is timed and the method's reports are collected
    (:mod:`stamplib.evaluation.traces`). ``adapt_every`` = C(g) of the realistic protocol:
    only batches 0, C, 2C, … reach ``step``, the others ``predict``. ``replay_graphs``: the
    method was built with ``build_method(..., replay_graphs=True)``; each batch starts a step.
    ``oracle``: the oracle diagnostic (:mod:`stamplib.evaluation.diagnostics`) tells the method
    which samples of each batch it adapts on are outliers."""
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
            if oracle:
                method.reveal_outliers(batch.is_outlier.to(batch.x.device))
            out = method.step(batch.x)
            adapted += 1
        else:
            out = method.predict(batch.x)
        report = method.take_report() if stepped else None  # taken either way: it is this batch's only
        if tracer is not None:
            tracer.end(batch, report, out.probs)
        probs.append(out.probs.detach().float().cpu())
        scores.append(out.ood_score.detach().float().cpu())
        labels.append(batch.y.cpu())
    return StreamResult(torch.cat(probs), torch.cat(scores), torch.cat(labels), time.perf_counter() - start,
                        adapted, len(probs))


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
    """Why a stream's output cannot be trusted, or None (a collapsed stream is named, never averaged in silently)."""
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


def result_row(result: StreamResult, **realistic: Any) -> Row:
    """A stream's metrics, sample counts, time and collapse flag, as a record's row (``realistic``:
    the protocol's speed and batch counts)."""
    reason = collapse_reason(result)
    return Row(stream_metrics(result.probs, result.ood_score, result.labels), collapsed=reason is not None,
               collapse_reason=reason, n_id=int((result.labels >= 0).sum()), n_outliers=int(result.is_outlier.sum()),
               seconds=round(result.seconds, 3), **realistic)


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
) -> tuple[Row, StreamOutputs, Trace | None]:
    """One corruption of a cell (no reset here): its row, outputs and trace (None when the
    method reports nothing). The stream lives only in here, so a stream too large for the
    stream cache is released before the next corruption's is built. ``first_position``: where
    the stream starts among all the samples the method has seen since its reset (traces).
    ``speed``: C(g) of a realistic spec; None fixes it from the spec or measures it on this
    stream (the row then carries it). The gradual schedule runs one stream per severity
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
        counterfactual = diagnostics.diagnostic(spec.diagnostic, spec.method)
        results.append(run_stream(method, stream, device, tracer=tracer, adapt_every=speed.value if speed else 1,
                                  oracle=counterfactual is not None and counterfactual.oracle))
        first_position += stream.labels.numel()
        for name, column in tracer.trace().items():  # every method's: accuracy per batch is everyone's
            trace.setdefault(name, []).extend(column)
        if gradual:
            rows.append(Severity(severity, stream_metrics(results[-1].probs, results[-1].ood_score,
                                                          results[-1].labels)))
    result = concatenate(results)
    realistic = (dict(speed=speed, adapted_batches=result.adapted_batches, batches=result.batches)
                 if spec.stream.realistic else {})
    row = result_row(result, severities=tuple(rows) if rows else None, **realistic)
    outputs = StreamOutputs.from_tensors(result.probs, result.ood_score, result.labels)
    return row, outputs, Trace.from_json(trace) if trace else None


def run_mixed_domains(
    method: methods.TTAMethod, spec: RunSpec, context: RunContext,
) -> tuple[dict[str, Row], dict[str, StreamOutputs], Row]:
    """Every corruption's stream in one shuffled stream (:func:`stamplib.data.interleave`), fed
    through ``method`` without a reset (none here: the caller resets once). Returns each
    corruption's row and outputs (its samples, in the order they came) and the row of
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
        per_corruption[corruption] = result_row(part)
        outputs[corruption] = StreamOutputs.from_tensors(part.probs, part.ood_score, part.labels)
    return per_corruption, outputs, result_row(whole)


def run(spec: RunSpec, context: RunContext, *, force: bool = False, progress: bool = False) -> Record:
    """Compute ``spec`` (or return its stored record, unless ``force``) where ``context`` says:
    the data sets from its data root, on its device, the record into its results store, naming
    its command."""
    store = ResultsStore(context.results)
    if not force:
        stored = store.get(spec)
        if stored is not None:
            return stored
    store.check_space(spec)  # a full disk is found before the compute, not after it
    apply_tf32_policy(context.allow_tf32)  # a record is a fidelity run: float32, not TF32, on a GPU
    method = build_method(spec, context.device, progress, data_root=context.data_root)
    record_provenance = provenance(spec.dataset, context.data_root, context.command,
                                   layout_name(network_layout(context.device)), spec.network)
    started = time.perf_counter()
    cell = SCHEDULE_LOOPS[spec.stream.schedule](method, spec, context, store, record_provenance["checkpoint"]["sha256"],
                                                progress)
    rows = cell.rows
    mean = Mean.of(rows)  # averaged over all, with the collapsed ones named
    record = Record(
        key=spec.key(), spec=spec, per_corruption=rows, mean=mean,
        collapsed=tuple(sorted(c for c, row in rows.items() if row.collapsed)),
        config=repr(method.config),
        seconds=round(time.perf_counter() - started + cell.kept_seconds, 3),  # kept: of an interrupted run
        device=context.device, versions=_versions(), provenance=Provenance.from_json(record_provenance),
        trace=cell.traces, realistic=cell.realistic(spec), stream=StreamSection.of(spec, cell.whole),
    )
    return store.put(record, cell.outputs)


@dataclass
class CellResult:
    """What a schedule's loop computed: each corruption's row, outputs and trace, the seconds of
    the corruptions kept from an interrupted run, the mixed schedule's whole-stream row, and the
    realistic protocol's C(g)."""

    rows: dict[str, Row] = field(default_factory=dict)
    outputs: dict[str, StreamOutputs] = field(default_factory=dict)
    traces: dict[str, Trace] = field(default_factory=dict)
    kept_seconds: float = 0.0
    whole: Row | None = None
    speed: RelativeSpeed | None = None  # realistic: fixed or measured once per cell

    def add(self, corruption: str, row: Row, outputs: StreamOutputs, trace: Trace | None) -> None:
        self.rows[corruption], self.outputs[corruption] = row, outputs
        if trace is not None:
            self.traces[corruption] = trace
        if self.speed is None and row.speed is not None:  # the first corruption's C(g); a resumed cell keeps it
            self.speed = row.speed

    @property
    def samples(self) -> int:
        return sum(row.samples for row in self.rows.values())

    def realistic(self, spec: RunSpec) -> Realistic | None:
        if not spec.stream.realistic:
            return None
        rows = self.rows.values()
        return Realistic(self.speed, not spec.stream.relative_speed, sum(r.adapted_batches for r in rows),
                         sum(r.batches for r in rows))


def _corruptions(spec: RunSpec, progress: bool) -> Any:
    return tqdm(spec.corruptions, desc=f"{spec.method}/{spec.outlier_set}", disable=not progress, leave=False)


def run_episodic(method: methods.TTAMethod, spec: RunSpec, context: RunContext, store: ResultsStore,
                 checkpoint_sha: str | None, progress: bool) -> CellResult:
    """The paper's protocol: the method reset before each corruption. With several corruptions
    each is kept in the store as it finishes, and a rerun resumes at the first not kept."""
    cell, resumable = CellResult(), len(spec.corruptions) > 1
    for corruption in _corruptions(spec, progress):
        kept = store.partial(spec, corruption, checkpoint_sha) if resumable else None
        if kept is not None:
            cell.add(corruption, *kept)
            cell.kept_seconds += kept[0].seconds or 0.0
            continue
        method.reset()
        row, outputs, trace = run_corruption(method, spec, corruption, context, 0, cell.speed)
        if resumable:
            store.put_partial(spec, corruption, row, outputs, trace, checkpoint_sha)
        cell.add(corruption, row, outputs, trace)
    return cell


def run_continual(method: methods.TTAMethod, spec: RunSpec, context: RunContext, store: ResultsStore,
                  checkpoint_sha: str | None, progress: bool) -> CellResult:
    """The continual and gradual schedules: one reset, then the corruptions in turn (gradual: each
    through its severities, :func:`run_corruption`), the method's
    state carried from one to the next (so an interrupted cell restarts from the beginning)."""
    cell = CellResult()
    method.reset()
    for corruption in _corruptions(spec, progress):
        cell.add(corruption, *run_corruption(method, spec, corruption, context, cell.samples, cell.speed))
    return cell


def run_mixed(method: methods.TTAMethod, spec: RunSpec, context: RunContext, store: ResultsStore,
              checkpoint_sha: str | None, progress: bool) -> CellResult:
    """The mixed schedule: one reset, then every corruption in one shuffled stream."""
    method.reset()
    cell = CellResult()
    rows, outputs, cell.whole = run_mixed_domains(method, spec, context)
    for corruption, row in rows.items():
        cell.add(corruption, row, outputs[corruption], None)
    return cell


#: The loop of each schedule (:data:`stamplib.data.SCHEDULES`).
SCHEDULE_LOOPS = {"episodic": run_episodic, "continual": run_continual, "gradual": run_continual, "mixed": run_mixed}


def summary_lines(record: Record) -> list[str]:
    """What ``run`` prints of a record: each corruption's metrics (a collapse named), their
    mean, and the realistic protocol's C(g)."""
    shown = [m for m in METRIC_LABELS if m in record.mean.scores]  # a stored older record has fewer
    lines = [f"{'corruption':20s}" + "".join(f" {METRIC_LABELS[m]:>8s}" for m in shown)]
    for name, row in record.per_corruption.items():
        flag = "  COLLAPSED: " + row.collapse_reason if row.collapsed else ""
        lines.append(f"{name:20s}" + "".join(f" {row.scores[k]:8.1f}" for k in shown) + flag)
    lines.append(f"{'mean':20s}" + "".join(f" {record.mean.scores[k]:8.1f}" for k in shown))
    if record.realistic is not None:
        r = record.realistic
        how = "measured" if r.measured else "fixed"
        lines.append(f"realistic protocol: C(g) = {r.speed.value} ({how}), adapted on {r.adapted_batches} "
                     f"of {r.batches} batches")
    return lines
