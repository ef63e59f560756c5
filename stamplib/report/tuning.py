"""The table of a tuning job (:mod:`stamplib.experiments.tune`) as ``python -m stamplib tune``
prints it, its CSV and Markdown files, and a heatmap of a two-dimensional grid.

Files are named after the job (:meth:`~stamplib.experiments.tune.TuneJob.file_stem`:
``tune__<method>__<dataset>__<outliers>__<hyperparameter set>__<profile>``), go to ``figures/tune`` unless
the command line names another folder, and are each written to a temporary file and renamed."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from stamplib import paths
from stamplib.evaluation.metrics import METRIC_LABELS, higher_is_better
from stamplib.experiments.tune import TuneResult, format_value
from stamplib.report.figures import plt, sns
from stamplib.report.tables import to_markdown, write_table_files


def _values(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in values.items())


def summary(result: TuneResult) -> list[str]:
    """Lines naming the protocol, the chosen values, and the config's values beside them."""
    job = result.job
    label = METRIC_LABELS.get(job.criterion, job.criterion)
    direction = "highest" if higher_is_better(job.criterion) else "lowest"
    lines = [
        f"{job.method} on {job.dataset} + {job.outlier_set} outliers, corruption {job.corruption}, profile "
        f"{job.profile}, seed {job.seed}, hyperparameter set {job.resolved_hyperparameter_set()}: "
        f"{len(result.table)} cells, {direction} {label} chosen (ties: the first in grid order)",
        f"chosen:      {_values(result.chosen)}  ({label} {result.value:.2f})",
    ]
    row = result.current_row
    today = f"({label} {float(result.table.loc[row, job.criterion]):.2f})" if row is not None else "(not in this grid)"
    lines.append(f"config uses: {_values(result.current)}  {today}")
    if result.missing:
        lines.append(f"missing: {len(result.missing)} cell(s) not computed; the choice is among the others")
    return lines


def display_table(result: TuneResult) -> pd.DataFrame:
    """The table as printed: grid values formatted, a last column marking the chosen row and the
    config's (``<- chosen``, ``config``), no record keys."""
    df = result.table.drop(columns=["key", "current", "chosen"]).copy()
    for name in result.job.names:
        df[name] = [format_value(v) for v in df[name]]
    df[""] = [", ".join(mark for mark, flag in (("<- chosen", chosen), ("config", current)) if flag)
              for chosen, current in zip(result.table["chosen"], result.table["current"])]
    return df


def format_result(result: TuneResult) -> str:
    """What ``python -m stamplib tune`` prints: :func:`summary` and the Markdown table."""
    return "\n".join(summary(result)) + "\n\n" + to_markdown(display_table(result), digits=1)


def heatmap(result: TuneResult) -> plt.Figure:
    """The criterion over a two-dimensional grid (rows: its first name, columns: its second),
    the chosen cell framed in red."""
    job = result.job
    if len(job.names) != 2:
        raise ValueError(f"a heatmap needs a grid of two dimensions, this one has {len(job.names)}")
    rows_name, cols_name = job.names
    row_values, col_values = (dict(job.grid)[n] for n in job.names)
    scores = list(result.table[job.criterion])  # grid order: row-major over (rows_name, cols_name)
    values = pd.DataFrame([scores[i * len(col_values):(i + 1) * len(col_values)] for i in range(len(row_values))],
                          index=[format_value(v) for v in row_values], columns=[format_value(v) for v in col_values])
    label = METRIC_LABELS.get(job.criterion, job.criterion)
    fig, ax = plt.subplots(figsize=(0.65 * len(col_values) + 3.0, 0.45 * len(row_values) + 1.8))
    sns.heatmap(values, annot=True, fmt=".1f", cmap="viridis" if higher_is_better(job.criterion) else "viridis_r",
                ax=ax, cbar_kws={"label": f"{label} (%)"})
    r, c = divmod(result.best, len(col_values))
    ax.add_patch(plt.Rectangle((c, r), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    ax.set(xlabel=cols_name, ylabel=rows_name,
           title=f"{job.method}: {label} on {job.dataset} + {job.outlier_set}, {job.corruption} ({job.profile})")
    fig.tight_layout()
    return fig


def write_outputs(result: TuneResult, out: str | Path) -> list[Path]:
    """``<stem>.csv`` (every column, the record keys included), ``<stem>.md`` (:func:`summary`
    and the table) and, for a two-dimensional grid, ``<stem>.png`` (:func:`heatmap`), in
    ``out`` (the command line's ``--out``, else ``figures/tune`` of its context)."""
    folder = Path(out)
    stem = result.job.file_stem()
    table = result.table.copy()
    for name in result.job.names:  # the values exactly (float_format would print 5e-05 as 0.0001)
        table[name] = [str(v) for v in table[name]]
    md = (f"# Tuning {result.job.method}\n\n" + "\n".join(f"{line}  " for line in summary(result)) + "\n\n"
          + to_markdown(display_table(result), digits=1))
    written = write_table_files(folder, stem, table.rename(columns=METRIC_LABELS), 4, md)
    if len(result.job.names) == 2:
        fig = heatmap(result)
        try:
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", metadata={"Software": None}, bbox_inches="tight")
            png = folder / f"{stem}.png"
            paths.atomic_write_bytes(png, buffer.getvalue())
            written.append(png)
        finally:
            plt.close(fig)
    return written
