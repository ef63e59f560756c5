"""Result tables: records → a tidy DataFrame → CSV, Markdown and LaTeX files.

A collapsed run (non-finite outputs, or one predicted class for a whole stream; see
``stamplib.evaluation.runner.collapse_reason``) keeps its numbers — hiding them would flatter
the method — but is never silent: the frame has a boolean ``collapsed`` column (kept in CSV),
and Markdown/LaTeX put a dagger † after each of that row's metrics, explained by a footnote.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from stamplib import paths

#: Columns that hold a metric of ours (a dagger marks them in collapsed rows).
METRIC_COLUMNS = ("ACC", "AUROC", "H", "acc", "auroc", "h")

DAGGER = "†"
LATEX_DAGGER = "$^\\dagger$"
FOOTNOTE = (
    f"{DAGGER} collapsed: non-finite outputs or a single predicted class for a whole stream; the "
    "number is kept (a mean includes the collapsed corruptions) but cannot be trusted."
)


def results_frame(records: Iterable[dict[str, Any]], per_corruption: bool = False) -> pd.DataFrame:
    """One row per record (mean over corruptions), or per (record, corruption).

    ``collapsed`` is a bool: the corruption collapsed, or (mean rows) at least one did — those
    are named in ``collapsed_corruptions``."""
    rows = []
    for r in records:
        spec = r["spec"]
        base = {"method": spec["method"], "dataset": spec["dataset"], "outliers": spec["outliers"],
                "seed": spec["seed"]}
        if per_corruption:
            for corruption, m in r["per_corruption"].items():
                rows.append({**base, "corruption": corruption, "ACC": m["acc"], "AUROC": m["auroc"],
                             "H": m["h"], "collapsed": bool(m["collapsed"])})
        else:
            # Records written before the mean carried its own flag have it at the top level.
            names = list(r["mean"].get("collapsed", r.get("collapsed", [])))
            rows.append({**base, "ACC": r["mean"]["acc"], "AUROC": r["mean"]["auroc"], "H": r["mean"]["h"],
                         "collapsed": bool(names), "collapsed_corruptions": ",".join(names)})
    return pd.DataFrame(rows)


def _is_collapsed(v: object) -> bool:
    # A bool, or an older frame's comma-joined names; NaN/None/"" mean no collapse.
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    return bool(v)


def _flagged(df: pd.DataFrame, digits: int, dagger: str, nan: str) -> tuple[pd.DataFrame, bool]:
    """``df`` without its ``collapsed`` column, metric cells as strings with ``dagger`` in
    collapsed rows; and whether any dagger was placed."""
    if "collapsed" not in df.columns or not any(c in METRIC_COLUMNS for c in df.columns):
        return df, False  # nothing to put a dagger on: keep the column itself
    mask = [_is_collapsed(v) for v in df["collapsed"]]
    out = df.drop(columns="collapsed")
    for col in out.columns:
        if col in METRIC_COLUMNS:
            out[col] = [
                (nan if isinstance(v, float) and math.isnan(v) else f"{v:.{digits}f}" if isinstance(v, float) else str(v))
                + (dagger if flag else "")
                for v, flag in zip(out[col], mask)
            ]
    return out, any(mask)


def to_markdown(df: pd.DataFrame, digits: int = 1) -> str:
    """A Markdown table; collapsed rows get † after each metric and a footnote explains it."""
    out, any_flag = _flagged(df, digits, DAGGER, "nan")

    def fmt(v: Any) -> str:
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(map(str, out.columns)) + " |", "|" + " --- |" * len(out.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in out.itertuples(index=False)]
    if any_flag:
        lines += ["", FOOTNOTE]
    return "\n".join(lines) + "\n"


def to_latex(df: pd.DataFrame, digits: int = 1) -> str:
    """A LaTeX tabular; collapsed rows get a dagger after each metric (explained in a comment)."""
    out, any_flag = _flagged(df, digits, LATEX_DAGGER, "NaN")
    text = out.to_latex(index=False, float_format=f"%.{digits}f")
    if any_flag:
        text += f"% {LATEX_DAGGER} {FOOTNOTE.removeprefix(DAGGER).strip()}\n"
    return text


def save_table(df: pd.DataFrame, name: str, directory: str | Path | None = None, digits: int = 1) -> list[Path]:
    """Write ``<name>.csv`` (with the boolean ``collapsed`` column), ``.md`` and ``.tex`` (with
    daggers on collapsed rows) — by default into the figures folder."""
    out = Path(directory) if directory else paths.figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    written = [out / f"{name}.csv", out / f"{name}.md", out / f"{name}.tex"]
    paths.atomic_write_bytes(written[0], df.to_csv(index=False, float_format=f"%.{digits + 2}f").encode())
    paths.atomic_write_bytes(written[1], to_markdown(df, digits).encode())
    paths.atomic_write_bytes(written[2], to_latex(df, digits).encode())
    return written
