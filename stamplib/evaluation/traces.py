"""Per-batch traces of a run: what a method's filter let through, what its memory holds, its
loss, and the cost of each batch.

A method keeps its own view of a batch through :meth:`stamplib.methods.TTAMethod.report`
(the samples that passed its filter, its loss, its memory's items and pseudo-labels), and the
runner hands the report (:meth:`~stamplib.methods.TTAMethod.take_report`) to the tracer: it
sets nothing on the method. The methods never see labels nor stream positions.
:class:`StreamTracer`, which knows the stream, turns that into numbers that need the labels:

* ``n_passed`` / ``passed_outliers``: samples through the filter, and how many were outliers
  (filter precision = 1 − passed_outliers / n_passed);
* ``memory_size`` / ``memory_outliers`` / ``memory_counts``: items in the memory, how many are
  outlier images of this stream (memory purity = 1 − memory_outliers / memory_size) and the
  memory's histogram over its pseudo-labels. A memory keeps the tag each item came with
  (:meth:`TTAMethod.sample_tags`) and the report names the tags the batch was given; the tracer
  maps each batch's tags to the batch's stream positions and so tells the outliers by where each
  item came from, at one bit per stream sample. Items from an earlier stream of a continual run
  carry tags this tracer never saw, so they are not this stream's outliers;
* ``adapted_size`` / ``adapted_outliers``: the samples the batch's update was computed on (a
  memory's items, or the batch itself for a method that adapts on it) and how many of them were
  outlier images of this stream;
* ``n_known`` / ``n_correct`` / ``n_outliers``: the batch's known-class samples, how many of them
  the method's prediction got right, and its outliers — for every method, from its output, so that
  a method's accuracy over the stream (and its filter's recall, ``passed_outliers`` against
  ``n_outliers``) can be read beside another's;
* ``loss``: the adaptation loss of the batch (NaN when the method did not adapt);
* ``seconds``: wall time of the step, between two ``torch.cuda.synchronize`` on CUDA (kernels
  run asynchronously: without them the clock would stop before the GPU had finished);
  ``peak_memory_mb``: on CUDA the peak allocated during the step, on the CPU the process's peak
  resident set so far (``ru_maxrss``: a high-water mark).

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
          "memory_counts", "adapted_size", "adapted_outliers", "n_known", "n_correct", "n_outliers", "loss")
LIVE_FIELDS = ("passed", "step_size")  # in :attr:`StreamTracer.columns` only, not in records


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued kernels (CUDA runs them asynchronously); a no-op on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return kib / 2**20 if sys.platform == "darwin" else kib / 2**10


class StreamTracer:
    """Collects one row per batch of one stream, the batches in stream order. Call
    :meth:`begin` before a step (it gives the batch's stream positions) and :meth:`end` after
    it, with the method's :class:`BatchReport` of the batch (None: it reported nothing).

    ``first_position``: the position of the stream's first sample, for a run that feeds one
    method several streams without a reset (continual): give each stream its own range, so that
    an item kept from an earlier stream is not taken for one of this stream's."""

    def __init__(self, stream: Stream, num_classes: int, device: str | torch.device = "cpu",
                 first_position: int = 0) -> None:
        self.num_classes = num_classes
        self.device = torch.device(device)
        self.first_position = first_position
        self._is_outlier = stream.is_outlier.cpu()
        self._next = 0  # stream index of the next batch's first sample
        self.columns: dict[str, list[Any]] = {name: [] for name in FIELDS + LIVE_FIELDS}
        self.reported = False
        self._positions = torch.empty(0, dtype=torch.long)  # of the batch being stepped
        self._position_of_tag: dict[int, int] = {}
        self._started = 0.0

    def begin(self, batch: Batch) -> torch.Tensor:
        """Start timing the step on ``batch``; returns its samples' stream positions."""
        size = batch.y.shape[0]
        positions = torch.arange(self._next, self._next + size) + self.first_position
        self._positions = positions
        self._next += size
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        synchronize(self.device)  # the previous batch's work is not this step's
        self._started = time.perf_counter()
        return positions

    def outliers_at(self, positions: torch.Tensor) -> int:
        """How many of ``positions`` are outliers of this stream."""
        index = positions.cpu() - self.first_position
        index = index[(index >= 0) & (index < self._is_outlier.numel())]
        return int(self._is_outlier[index].sum())

    def positions_of(self, tags: torch.Tensor) -> torch.Tensor:
        """The stream positions of tagged samples (−1 for a tag this tracer never saw)."""
        return torch.tensor([self._position_of_tag.get(t, -1) for t in tags.tolist()], dtype=torch.long)

    def end(self, batch: Batch, report: BatchReport | None = None, probs: torch.Tensor | None = None) -> None:
        """Close the batch's row with the method's ``report`` of it and its output ``probs``
        (``[B, C]``: what it predicted for the batch)."""
        synchronize(self.device)
        seconds = time.perf_counter() - self._started
        self.reported |= report is not None
        r = report or BatchReport()
        if r.batch_tags is not None:
            self._position_of_tag.update(zip(r.batch_tags.tolist(), self._positions.tolist()))
        row: dict[str, Any] = {"seconds": round(seconds, 5), "peak_memory_mb": round(_peak_memory_mb(self.device), 1)}
        if probs is not None:
            labels = batch.y.cpu()
            known = labels >= 0
            row["n_known"] = int(known.sum())
            row["n_correct"] = int((probs.detach().argmax(dim=1).cpu()[known] == labels[known]).sum())
            row["n_outliers"] = int(batch.is_outlier.cpu().sum())
        if r.adapted_tags is not None:
            row["adapted_size"] = int(r.adapted_tags.numel())
            row["adapted_outliers"] = self.outliers_at(self.positions_of(r.adapted_tags))
        if r.passed is not None:
            passed = r.passed.bool().cpu()
            row["n_passed"] = int(passed.sum())
            row["passed_outliers"] = int((passed & batch.is_outlier.cpu()).sum())
            row["passed"] = passed.numpy()
        if r.memory_tags is not None:
            row["memory_size"] = int(r.memory_tags.numel())
            row["memory_outliers"] = self.outliers_at(self.positions_of(r.memory_tags))
        if r.memory_labels is not None:
            counts = torch.bincount(r.memory_labels.long().cpu(), minlength=self.num_classes)
            row["memory_counts"] = counts.tolist()
        if report is not None:
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


def share(part: list[Any], whole: list[Any]) -> list[float]:
    """Per batch: ``part / whole`` (NaN where ``whole`` is 0 or not recorded)."""
    return [math.nan if not w or p is None else p / w for p, w in zip(part, whole)]


def memory_purity(trace: dict[str, list[Any]]) -> list[float]:
    """Per batch: the share of the memory's items that are known-class images (NaN when empty)."""
    return [math.nan if not n else 1.0 - o / n for n, o in zip(trace["memory_size"], trace["memory_outliers"])]
