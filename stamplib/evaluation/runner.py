"""run(spec): compute one cell — every corruption's stream, the method reset before each
(protocol.md §1.2; a ``continual`` spec resets once, before the first) — and store one JSON
record per spec.

An episodic cell survives an interruption: each corruption is kept in the store as it
finishes (:meth:`ResultsStore.put_partial`), and a rerun starts at the first corruption not
kept. The reset before each corruption restores the method's weights, optimiser and random
generators, so the resumed record equals an uninterrupted one bit for bit. A continual cell
carries its state from one corruption to the next and restarts from the beginning."""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from typing import Any

import torch
from tqdm.auto import tqdm

from stamplib import data, methods
from stamplib.blocks.entropy import logit_entropy
from stamplib.evaluation.assembly import build_method, build_stream
from stamplib.evaluation.metrics import aggregate, stream_metrics
from stamplib.evaluation.outputs import StreamOutputs
from stamplib.evaluation.precision import apply_tf32_policy
from stamplib.evaluation.provenance import provenance
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.evaluation.traces import StreamTracer
from stamplib.version import __version__


@dataclass
class StreamResult:
    """Everything a method emitted on one stream, in stream order."""

    probs: torch.Tensor  # [N, C]
    ood_score: torch.Tensor  # [N], higher = outlier
    labels: torch.Tensor  # [N], −1 = outlier
    seconds: float

    @property
    def is_outlier(self) -> torch.Tensor:
        return self.labels < 0


def run_stream(
    method: methods.TTAMethod, stream: data.Stream, device: str = "cpu", progress: bool = False,
    tracer: StreamTracer | None = None,
) -> StreamResult:
    """Feed a stream batch by batch through ``method`` (no reset here: the caller decides).
    With a ``tracer``, each step is timed and the method's reports are collected
    (:mod:`stamplib.evaluation.traces`)."""
    probs, scores, labels = [], [], []
    start = time.perf_counter()
    method.tracer = tracer
    try:
        for batch in tqdm(stream.batches(device), total=len(stream), disable=not progress, leave=False):
            if tracer is not None:
                method.positions = tracer.begin(batch)
            out = method.step(batch.x)
            if tracer is not None:
                tracer.end(batch)
            probs.append(out.probs.detach().float().cpu())
            scores.append(out.ood_score.detach().float().cpu())
            labels.append(batch.y.cpu())
    finally:
        method.tracer = None
        method.positions = None
    return StreamResult(torch.cat(probs), torch.cat(scores), torch.cat(labels), time.perf_counter() - start)


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


def run_corruption(
    method: methods.TTAMethod, spec: RunSpec, corruption: str, device: str = "cpu", first_position: int = 0,
) -> tuple[dict[str, Any], StreamOutputs, dict[str, list[Any]] | None]:
    """One corruption of a cell (no reset here): its metrics, outputs and trace (None when the
    method reports nothing). The stream lives only in here, so a stream too large for the
    stream cache is released before the next corruption's is built. ``first_position``: where
    the stream starts among all the samples the method has seen since its reset (traces)."""
    stream = build_stream(spec, corruption)
    tracer = StreamTracer(stream, method.num_classes, device, first_position)
    result = run_stream(method, stream, device, tracer=tracer)
    reason = collapse_reason(result)
    metrics = {
        **stream_metrics(result.probs, result.ood_score, result.labels),
        "n_id": int((result.labels >= 0).sum()),
        "n_outliers": int(result.is_outlier.sum()),
        "seconds": round(result.seconds, 3),
        "collapsed": reason is not None,
        "collapse_reason": reason,
    }
    outputs = StreamOutputs.from_tensors(result.probs, result.ood_score, result.labels)
    return metrics, outputs, tracer.trace() if tracer.reported else None


def run(
    spec: RunSpec,
    store: ResultsStore | None = None,
    device: str = "cpu",
    force: bool = False,
    progress: bool = False,
) -> dict[str, Any]:
    """Compute ``spec`` (or return its stored record) and store the result."""
    store = store if store is not None else ResultsStore()
    if not force:
        record = store.get(spec)
        if record is not None:
            return record
    apply_tf32_policy()  # a record is a fidelity run: float32, not TF32, on a GPU
    method = build_method(spec, device, progress)
    per_corruption: dict[str, dict[str, Any]] = {}
    outputs: dict[str, StreamOutputs] = {}
    traces: dict[str, dict[str, list[Any]]] = {}
    record_provenance = provenance(spec.dataset)
    checkpoint_sha = record_provenance["checkpoint"]["sha256"]
    resumable = not spec.continual and len(spec.corruptions) > 1
    started, kept_seconds = time.perf_counter(), 0.0
    for corruption in tqdm(spec.corruptions, desc=f"{spec.method}/{spec.outliers}", disable=not progress, leave=False):
        kept = store.partial(spec, corruption, checkpoint_sha) if resumable else None
        if kept is not None:
            per_corruption[corruption], outputs[corruption], trace = kept
            kept_seconds += float(per_corruption[corruption].get("seconds", 0.0))
            if trace:
                traces[corruption] = trace
            continue
        if not spec.continual or not per_corruption:  # continual: one reset, before the first
            method.reset()
        seen = sum(m["n_id"] + m["n_outliers"] for m in per_corruption.values()) if spec.continual else 0
        per_corruption[corruption], outputs[corruption], trace = run_corruption(method, spec, corruption, device, seen)
        if trace:
            traces[corruption] = trace
        if resumable:
            store.put_partial(spec, corruption, per_corruption[corruption], outputs[corruption],
                              traces.get(corruption), checkpoint_sha)
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
    if spec.continual or spec.dirichlet or spec.outlier_burst:
        record["stream"] = {"continual": spec.continual, "order": list(spec.corruptions),
                            "dirichlet": spec.dirichlet, "outlier_burst": spec.outlier_burst}
    store.put(record, outputs)
    return record
