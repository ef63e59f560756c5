"""Per-batch traces of a run: what a method's filter let through, what its memory holds, its
loss, and the cost of each batch.

A method reports its own view of a batch through :meth:`stamplib.methods.TTAMethod.report`
(the samples that passed its filter, its loss, its memory's samples and pseudo-labels); the
methods never see labels. :class:`StreamTracer`, which knows the stream, turns that into
numbers that need the labels:

* ``n_passed`` / ``passed_outliers``: samples through the filter, and how many were outliers
  (filter precision = 1 − passed_outliers / n_passed);
* ``memory_size`` / ``memory_outliers`` / ``memory_counts``: items in the memory, how many are
  outlier images (found by their pixels among the stream's outliers: memory purity =
  1 − memory_outliers / memory_size) and the memory's histogram over its pseudo-labels;
* ``loss``: the adaptation loss of the batch (NaN when the method did not adapt);
* ``seconds``: wall time of the step; ``peak_memory_mb``: on CUDA the peak allocated during the
  step, on the CPU the process's peak resident set so far (``ru_maxrss``: a high-water mark).

A trace is stored in the record as columns (one list per field, one entry per batch) under
``record["trace"][corruption]``; methods that report nothing have no trace. Two more columns are
kept for views drawn in the same process (the explorer, the walkthrough) but never stored, so
records keep their shape: ``passed`` (the filter's bool mask over the batch) and ``step_size``
(the step size the method's update used).
"""

from __future__ import annotations

import math
import resource
import sys
import time
from typing import Any

import torch

from stamplib.data.streams import Batch, Stream
from stamplib.methods.base import BatchReport

FIELDS = ("seconds", "peak_memory_mb", "n_passed", "passed_outliers", "memory_size", "memory_outliers",
          "memory_counts", "loss")
LIVE_FIELDS = ("passed", "step_size")  # in :attr:`StreamTracer.columns` only, not in records


def _pixel_keys(images: torch.Tensor) -> list[bytes]:
    """One key per image: its uint8 pixels (float [N,3,H,W] in [0,1] or uint8 [N,H,W,3])."""
    if images.dtype != torch.uint8:
        images = images.detach().float().mul(255.0).round().clamp(0, 255).byte().permute(0, 2, 3, 1)
    flat = images.cpu().contiguous().view(images.shape[0], -1).numpy()
    return [row.tobytes() for row in flat]


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return kib / 2**20 if sys.platform == "darwin" else kib / 2**10


class StreamTracer:
    """Collects one row per batch of one stream. Call :meth:`begin` before a step, the method
    calls the tracer with its :class:`BatchReport`, then :meth:`end` after the step."""

    def __init__(self, stream: Stream, num_classes: int, device: str | torch.device = "cpu") -> None:
        self.num_classes = num_classes
        self.device = torch.device(device)
        outliers = stream.images[stream.is_outlier]
        self._outlier_keys = set(_pixel_keys(outliers)) if outliers.shape[0] else set()
        self.columns: dict[str, list[Any]] = {name: [] for name in FIELDS + LIVE_FIELDS}
        self.reported = False
        self._report: BatchReport | None = None
        self._started = 0.0

    def __call__(self, report: BatchReport) -> None:
        self._report = report
        self.reported = True

    def begin(self) -> None:
        self._report = None
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self._started = time.perf_counter()

    def end(self, batch: Batch) -> None:
        seconds = time.perf_counter() - self._started
        r = self._report or BatchReport()
        row: dict[str, Any] = {"seconds": round(seconds, 5), "peak_memory_mb": round(_peak_memory_mb(self.device), 1)}
        if r.passed is not None:
            passed = r.passed.bool().cpu()
            row["n_passed"] = int(passed.sum())
            row["passed_outliers"] = int((passed & batch.is_outlier.cpu()).sum())
            row["passed"] = passed.numpy()
        if r.memory_samples is not None:
            keys = _pixel_keys(r.memory_samples) if r.memory_samples.shape[0] else []
            row["memory_size"] = len(keys)
            row["memory_outliers"] = sum(k in self._outlier_keys for k in keys)
        if r.memory_labels is not None:
            counts = torch.bincount(r.memory_labels.long().cpu(), minlength=self.num_classes)
            row["memory_counts"] = counts.tolist()
        row["loss"] = float(r.loss) if r.loss is not None else math.nan
        row["step_size"] = r.step_size
        for name in self.columns:
            self.columns[name].append(row.get(name))

    def trace(self) -> dict[str, list[Any]]:
        """The columns a record stores, without those the method never filled."""
        return {k: self.columns[k] for k in FIELDS if any(x is not None for x in self.columns[k])}


def filter_precision(trace: dict[str, list[Any]]) -> list[float]:
    """Per batch: the share of the samples through the filter that were known-class samples
    (NaN where none passed)."""
    return [math.nan if not n else 1.0 - o / n for n, o in zip(trace["n_passed"], trace["passed_outliers"])]


def memory_purity(trace: dict[str, list[Any]]) -> list[float]:
    """Per batch: the share of the memory's items that are known-class images (NaN when empty)."""
    return [math.nan if not n else 1.0 - o / n for n, o in zip(trace["memory_size"], trace["memory_outliers"])]
