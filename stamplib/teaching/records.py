"""What the lessons read from the results store beyond a table: per-sample outputs batch by
batch, the spread of a cell over seeds, and the colours every lesson gives the methods.

Seeds: a lesson plans seed 0 (what ``./run_all.sh`` computes for every notebook) and shows the
other seeds of the same cell wherever their records exist, in the run's store or in the
committed quick-run records (``results/builtin_benchmark``); where none exists it says "one
seed" instead of pretending to a spread (:func:`seed_spread`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from stamplib import paths
from stamplib.evaluation.outputs import StreamOutputs, record_outputs
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.report import palette

#: The seeds a lesson looks for (the three the built-in benchmark computes: results/builtin_benchmark).
SEEDS = (0, 1, 2)
#: The committed records of the quick run on the built-in benchmark, beside the run's own store.
COMMITTED_QUICK_RUN = "results/builtin_benchmark"
#: STAMP's colour in every lesson's figure, as in every other figure (stamplib.report.palette); a
#: STAMP variant shown beside it ("STAMP, weighting=none") takes the palette's light red, the other
#: methods keep their own.
STAMP_COLOUR = palette.STAMP


def method_colours(names: Iterable[str]) -> dict[str, Any]:
    """A colour per method name (or label): STAMP :data:`STAMP_COLOUR`, a variant of it
    (``"STAMP, …"``) :data:`stamplib.report.palette.STAMP_VARIANT`, the others the palette's."""
    names = list(dict.fromkeys(names))
    own = palette.method_colours([n for n in names if not n.startswith("STAMP")])
    return {n: own[n] if not n.startswith("STAMP") else STAMP_COLOUR if n in ("STAMP", "stamp")
            else palette.STAMP_VARIANT for n in names}


def stream_outputs(record: Record, results: str | Path) -> dict[str, StreamOutputs]:
    """The record's per-sample outputs by corruption, in stream order (store root ``results``)."""
    return record_outputs(record, Path(results))


def per_batch(record: Record, results: str | Path) -> pd.DataFrame:
    """One row per batch of the record's streams, in stream order: ``corruption``, ``batch``
    (counted over the whole run, so a continual stream's batches follow each other), ``acc``
    (percent of the batch's known-class samples predicted right), ``top_class_share`` (the share
    of the batch's known-class predictions that go to its most predicted class), and the mean
    OOD score of known-class samples and of outliers (NaN where the batch has none)."""
    batch_size = record.spec.stream.batch_size
    rows, offset = [], 0
    for corruption, out in stream_outputs(record, results).items():
        for start in range(0, len(out.label), batch_size):
            label = out.label[start:start + batch_size].astype(np.int64)
            pred = out.prediction[start:start + batch_size].astype(np.int64)
            score = out.ood_score[start:start + batch_size].astype(np.float64)
            known = label >= 0
            counts = np.bincount(pred[known]) if known.any() else np.zeros(1)
            rows.append({
                "corruption": corruption, "batch": offset + start // batch_size,
                "acc": 100.0 * float((pred[known] == label[known]).mean()) if known.any() else math.nan,
                "top_class_share": float(counts.max() / known.sum()) if known.any() else math.nan,
                "score_known": float(score[known].mean()) if known.any() else math.nan,
                "score_outliers": float(score[~known].mean()) if (~known).any() else math.nan,
            })
        offset += -(-len(out.label) // batch_size)
    return pd.DataFrame(rows)


def per_corruption_shares(record: Record, results: str | Path) -> pd.DataFrame:
    """Per corruption of the record, in stream order: ``acc``, ``top_class_share`` over all its
    known-class predictions (the most predicted class's share), and ``outliers_top_share`` (the
    share of its outliers predicted as the outliers' most predicted class; NaN without outliers)."""
    rows = []
    for corruption, out in stream_outputs(record, results).items():
        label, pred = out.label.astype(np.int64), out.prediction.astype(np.int64)
        known = label >= 0
        rows.append({
            "corruption": corruption,
            "acc": 100.0 * float((pred[known] == label[known]).mean()),
            "top_class_share": float(np.bincount(pred[known]).max() / known.sum()),
            "outliers_top_share": (float(np.bincount(pred[~known]).max() / (~known).sum()) if (~known).any()
                                   else math.nan),
        })
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------ seeds


def default_stores(results: str | Path) -> list[tuple[str, ResultsStore]]:
    """The run's store, then the committed quick-run records where the checkout has them."""
    stores = [("this run's results store", ResultsStore(results))]
    root = paths.repo_root()
    committed = root / COMMITTED_QUICK_RUN if root else None
    if committed is not None and committed.is_dir() and committed.resolve() != Path(results).resolve():
        stores.append((f"`{COMMITTED_QUICK_RUN}`", ResultsStore(committed)))
    return stores


@dataclass(frozen=True)
class SeedSpread:
    """One cell's metric over the seeds whose records exist, and where each came from."""

    values: dict[int, float]
    sources: dict[int, str]

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(sorted(self.values))

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.values.values()))) if self.values else math.nan

    @property
    def low(self) -> float:
        return min(self.values.values()) if self.values else math.nan

    @property
    def high(self) -> float:
        return max(self.values.values()) if self.values else math.nan

    @property
    def several(self) -> bool:
        return len(self.values) > 1

    def text(self, digits: int = 1) -> str:
        """``"63.7 (one seed)"`` or ``"65.0 (59.6–71.7 over seeds 0, 1, 2)"``; ``"—"`` with none."""
        if not self.values:
            return "—"
        if not self.several:
            return f"{self.mean:.{digits}f} (one seed)"
        return (f"{self.mean:.{digits}f} ({self.low:.{digits}f}–{self.high:.{digits}f} over seeds "
                f"{', '.join(map(str, self.seeds))})")


def seed_spread(spec: RunSpec, stores: Sequence[tuple[str, ResultsStore]], metric: str = "h",
                seeds: Sequence[int] = SEEDS, corruption: str = "mean") -> SeedSpread:
    """``metric`` of ``spec`` under each of ``seeds`` whose record exists, from the first store
    that has it (``corruption``: ``"mean"`` or one corruption's row)."""
    values, sources = {}, {}
    for seed in seeds:
        other = spec.with_(seed=seed)
        for label, store in stores:
            record = store.get(other)
            if record is None:
                continue
            row = record.mean if corruption == "mean" else record.per_corruption.get(corruption)
            if row is not None and metric in row.scores:
                values[seed], sources[seed] = float(row.scores[metric]), label
                break
    return SeedSpread(values, sources)

