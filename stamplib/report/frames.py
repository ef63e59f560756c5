"""Records → tidy DataFrames: the one builder every table and figure of ours starts from.

One row per (record, corruption) with ``per_corruption``, and always one ``mean`` row per record
(``corruption == "mean"``: the paper's per-metric means over corruptions). Columns: the spec's
coordinates (``dataset``, ``outliers``: its ``outlier_set``, as the paper's numbers name the column,
``method``, ``seed``, ``outlier_ratio``), the row's
``corruption``, the metrics ``acc``, ``auroc``, ``h`` and every other metric of
:data:`stamplib.evaluation.metrics.METRICS` that the records have (percent; a record that
predates a metric is re-scored from its outputs by :func:`stamplib.evaluation.outputs.rescore`),
``collapsed`` (bool; a mean row
is collapsed when one of its corruptions is, named in ``collapsed_corruptions``) and
``seconds``; a plan's cells add their row label (``variant``) and the paper's coordinates.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from stamplib.evaluation import metrics as _metrics
from stamplib.evaluation.record import Mean, Record
from stamplib.experiments.plans import Plan


def metric_names() -> tuple[str, ...]:
    """Every metric a frame has a column for (read at call time: metrics can be registered)."""
    return tuple(_metrics.METRICS)


def _values(m: Mapping[str, Any]) -> dict[str, float]:
    # The paper's three always; newer metrics only where the record has them, so a frame of
    # older records keeps its columns (a table that asks for a newer metric shows NaN).
    return {k: float(m.get(k, math.nan)) for k in metric_names() if k in _metrics.PAPER_METRICS or k in m}


def is_collapsed(value: object) -> bool:
    """A frame's ``collapsed`` cell as a bool: a bool, or an older frame's comma-joined names;
    NaN/None/"" (no information) count as not collapsed."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    return bool(value)


def _part(record: Record, corruptions: tuple[str, ...]) -> Record:
    """``record`` read on ``corruptions`` alone: its rows of those, and their mean as the
    record's mean is made (each metric's mean over the corruptions)."""
    per = {c: record.per_corruption[c] for c in corruptions}
    names = [k for k in metric_names() if all(k in row.scores for row in per.values())]
    collapsed = tuple(c for c, row in per.items() if row.collapsed)
    mean = Mean({k: sum(float(row.scores[k]) for row in per.values()) / len(per) for k in names}, collapsed)
    return dataclasses.replace(record, per_corruption=per, mean=mean, collapsed=collapsed,
                               seconds=sum(float(math.nan if row.seconds is None else row.seconds)
                                           for row in per.values()))


def _rows(record: Record, coordinates: Mapping[str, Any], per_corruption: bool,
          corruptions: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The frame rows of ``record``; ``corruptions``: read those alone (empty: all)."""
    if corruptions and tuple(corruptions) != tuple(record.per_corruption):
        record = _part(record, corruptions)
    spec = record.spec
    base = {"dataset": spec.dataset, "outliers": spec.outlier_set, "method": spec.method,
            **coordinates, "seed": spec.seed, "outlier_ratio": spec.outlier_ratio}
    rows = []
    if per_corruption:
        for corruption, row in record.per_corruption.items():
            rows.append({**base, "corruption": corruption, **_values(row.scores),
                         "collapsed": bool(row.collapsed), "seconds": math.nan if row.seconds is None else row.seconds})
    # Records written before the mean carried its own flag have it at the top level.
    names = list(record.mean.collapsed if record.mean.collapsed is not None else record.collapsed or ())
    rows.append({**base, "corruption": "mean", **_values(record.mean.scores), "collapsed": bool(names),
                 "collapsed_corruptions": ",".join(names),
                 "seconds": math.nan if record.seconds is None else record.seconds})
    return rows


def results_frame(records: Iterable[Record], per_corruption: bool = False) -> pd.DataFrame:
    """The frame of any records (the results store's, or ``stamplib.run``'s)."""
    return pd.DataFrame([row for r in records for row in _rows(r, {}, per_corruption)])


def plan_frame(plan: Plan, records: Mapping[str, Record], per_corruption: bool = False) -> pd.DataFrame:
    """The frame of a plan's cells that have a record (``records`` by spec key), with each
    cell's ``variant``, ``paper_dataset`` and ``paper_outliers`` (its ``paper_outlier_set``); a
    cell that names its ``corruptions`` reads its record on those alone."""
    rows = []
    for cell in plan.cells:
        record = records.get(cell.spec.key())
        if record is not None:
            coordinates = {"variant": cell.variant, "paper_dataset": cell.paper_dataset,
                           "paper_outliers": cell.paper_outlier_set}
            rows += _rows(record, coordinates, per_corruption, cell.corruptions)
    return pd.DataFrame(rows)


def over_seeds(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds, with per metric ``*_std`` (NaN for a single seed), ``*_min`` and
    ``*_max`` (the smallest and largest value over the seeds) and ``*_seeds`` (the value under
    each seed, ``{seed: value}``: comparisons between rows pair their seeds), and ``n_seeds``."""
    keys = ["dataset", "outliers", "method", "variant", "paper_dataset", "paper_outliers", "corruption"]
    if frame.empty:
        return frame
    grouped = frame.groupby(keys, sort=False, dropna=False)
    names = [m for m in metric_names() if m in frame.columns]
    out = grouped[names].mean()
    std = grouped[names].std(ddof=0).add_suffix("_std")
    out = out.join(std)
    out = out.join(grouped[names].min().add_suffix("_min")).join(grouped[names].max().add_suffix("_max"))
    for m in names:
        out[f"{m}_seeds"] = grouped[["seed", m]].apply(lambda g, m=m: dict(zip(g["seed"].astype(int), g[m])))
    out["collapsed"] = grouped["collapsed"].any()
    out["n_seeds"] = grouped["seed"].nunique()
    single = out["n_seeds"] < 2
    out.loc[single, [f"{m}_std" for m in names]] = math.nan
    return out.reset_index()


#: The columns :func:`over_seeds` adds per metric beside its mean.
SPREAD_SUFFIXES = ("_std", "_min", "_max", "_seeds")
