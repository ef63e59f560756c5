"""Notebook 10: inside the stream — per-batch traces (filter precision, memory purity and fill)
and the methods under harder streams (continual, non-i.i.d. labels, outlier bursts)."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from stamplib.evaluation.record import Record
from stamplib.experiments.plans import Plan
from stamplib.report.palette import method_colours
from stamplib.report.paper import method_label
from stamplib.report.reproduce import labelled_title


def trace_frame(plan: Plan, records: Mapping[str, Record]) -> pd.DataFrame:
    """One row per (cell, corruption, batch) of every traced record: ``method``, ``stream`` (the
    cell's variant), ``seed``, ``corruption``, ``batch``, the trace's columns, and
    ``filter_precision`` / ``memory_purity`` (shares of known-class samples; NaN where nothing
    passed or the memory is empty)."""
    rows = []
    for cell in plan.cells:
        record = records.get(cell.spec.key())
        if record is None or not record.trace:
            continue
        for corruption, trace in record.trace.items():
            columns = trace.columns()
            for i in range(len(trace.seconds)):
                row = {"method": cell.spec.method, "stream": cell.variant, "seed": cell.spec.seed,
                       "corruption": corruption, "batch": i}
                row.update({k: v[i] for k, v in columns.items() if k != "memory_counts"})
                if trace.memory_counts is not None:
                    row["memory_classes"] = sum(c > 0 for c in trace.memory_counts[i])
                rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    if "n_passed" in frame:
        passed = frame["n_passed"].astype(float)
        frame["filter_precision"] = (1.0 - frame["passed_outliers"] / passed).where(passed > 0)
    if "memory_size" in frame:
        size = frame["memory_size"].astype(float)
        frame["memory_purity"] = (1.0 - frame["memory_outliers"] / size).where(size > 0)
    frame["Method"] = frame["method"].map(method_label)
    return frame


def plot_trace(frame: pd.DataFrame, column: str, ylabel: str, title: str, stream: str = "iid") -> plt.Figure:
    """``column`` over the batches of the ``stream`` cells, one panel per corruption, one line
    per method (methods without the column are left out)."""
    part = frame[(frame["stream"] == stream)] if not frame.empty else frame
    part = part.dropna(subset=[column]) if column in part else part.iloc[0:0]
    corruptions = list(dict.fromkeys(part["corruption"])) if not part.empty else []
    fig, axes = plt.subplots(1, max(1, len(corruptions)), figsize=(4.6 * max(1, len(corruptions)), 3.4),
                             squeeze=False, sharey=True)
    if part.empty:
        axes[0][0].text(0.5, 0.5, "no traced records", ha="center", va="center")
        axes[0][0].set_axis_off()
    order = list(dict.fromkeys(part["Method"])) if not part.empty else []
    palette = method_colours(order)  # STAMP in the headline's red
    for ax, corruption in zip(axes[0], corruptions):
        sns.lineplot(part[part["corruption"] == corruption], x="batch", y=column, hue="Method", ax=ax,
                     errorbar=None, marker="o", markersize=3, hue_order=order, palette=palette, legend=False)
        ax.set(title=corruption.replace("_", " "), xlabel="batch", ylabel=ylabel)
    if order:  # one legend for every method, whichever panels it has points in
        handles = [plt.Line2D([], [], color=palette[m], marker="o", markersize=3) for m in order]
        fig.legend(handles, order, loc="upper left", bbox_to_anchor=(1.0, 0.9), frameon=False, title="Method")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def trace_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per method and stream kind: mean filter precision, samples through the filter per batch,
    final memory purity and size, seconds per batch, peak memory."""
    if frame.empty:
        return frame
    agg: dict[str, tuple[str, str]] = {"seconds per batch": ("seconds", "mean"), "peak MB": ("peak_memory_mb", "max")}
    if "n_passed" in frame:
        agg["passed per batch"] = ("n_passed", "mean")
        agg["filter precision"] = ("filter_precision", "mean")
    if "memory_purity" in frame:
        agg["memory purity"] = ("memory_purity", "mean")
        agg["memory size"] = ("memory_size", "mean")
    out = frame.groupby(["Method", "stream"], sort=False).agg(**agg).reset_index()
    for col in ("filter precision", "memory purity"):
        if col in out:
            out[col] = 100.0 * out[col]
    return out


def plot_stream_kinds(table: pd.DataFrame, title: str, metric: str = "H") -> plt.Figure:
    """Our ``metric`` per method, one bar per stream kind (the table's ``variant``)."""
    if table.empty:
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no results yet", ha="center", va="center")
        return fig
    df = table.assign(Method=table["method"].map(method_label), stream=table["variant"])
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * df["Method"].nunique() + 2), 3.6))
    sns.barplot(df, x="Method", y=f"{metric} ours", hue="stream", ax=ax)
    ax.set(xlabel="", ylabel=f"{metric} (%)", title=labelled_title(title, table), ylim=(0, 100))
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, title="stream")
    fig.tight_layout()
    return fig
