"""Result tables: a frame (:mod:`stamplib.report.frames`) → CSV, Markdown and LaTeX files.
:func:`write_table_files` is the one writer of a table's files (this module's :func:`save_table`,
the paper-vs-ours tables of :mod:`stamplib.report.reproduce`, the tuning tables of
:mod:`stamplib.report.tuning`).

A collapsed run (non-finite outputs, or one predicted class for a whole stream; see
``stamplib.evaluation.runner.collapse_reason``) keeps its numbers — hiding them would flatter
the method — but is never silent: the frame has a boolean ``collapsed`` column (kept in CSV),
and Markdown/LaTeX put a dagger † after each of that row's metrics, explained by a footnote.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from stamplib import paths
from stamplib.evaluation.metrics import METRIC_LABELS
from stamplib.report.frames import is_collapsed

DAGGER = "†"
LATEX_DAGGER = "$^\\dagger$"
FOOTNOTE = (
    f"{DAGGER} collapsed: non-finite outputs or a single predicted class for a whole stream; the "
    "number is kept (a mean includes the collapsed corruptions) but cannot be trusted."
)


def _flagged(df: pd.DataFrame, digits: int, dagger: str, nan: str) -> tuple[pd.DataFrame, bool]:
    """``df`` without its ``collapsed`` column, metric cells as strings with ``dagger`` in
    collapsed rows; and whether any dagger was placed."""
    df = df.rename(columns=METRIC_LABELS)
    metric_columns = set(METRIC_LABELS.values())  # read now: register_metric may have added one
    if "collapsed" not in df.columns or not any(c in metric_columns for c in df.columns):
        return df, False  # nothing to put a dagger on: keep the column itself
    mask = [is_collapsed(v) for v in df["collapsed"]]
    out = df.drop(columns="collapsed")
    for col in out.columns:
        if col in metric_columns:
            out[col] = [
                (nan if isinstance(v, float) and math.isnan(v)
                 else f"{v:.{digits}f}" if isinstance(v, float) else str(v))
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


def write_table_files(directory: str | Path, name: str, numbers: pd.DataFrame, csv_digits: int, markdown: str,
                      latex: str | None = None) -> list[Path]:
    """Write one table's files into ``directory``: ``<name>.csv`` (``numbers``, floats with
    ``csv_digits`` decimals), ``<name>.md`` (``markdown``) and, where given, ``<name>.tex``
    (``latex``), each atomically; returns them in that order."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    contents = {out / f"{name}.csv": numbers.to_csv(index=False, float_format=f"%.{csv_digits}f"),
                out / f"{name}.md": markdown}
    if latex is not None:
        contents[out / f"{name}.tex"] = latex
    for path, text in contents.items():
        paths.atomic_write_bytes(path, text.encode())
    return list(contents)


def save_table(df: pd.DataFrame, name: str, directory: str | Path, digits: int = 1) -> list[Path]:
    """Write ``<name>.csv`` (with the boolean ``collapsed`` column), ``.md`` and ``.tex`` (with
    daggers on collapsed rows) into ``directory`` (a notebook's ``context.figures``). Metric
    columns are printed with their labels (``acc`` → ``ACC``)."""
    return write_table_files(directory, name, df.rename(columns=METRIC_LABELS), digits + 2, to_markdown(df, digits),
                             to_latex(df, digits))
