"""Notebook 13: the methods on harder streams than the paper's, from a plan of them
(:func:`stamplib.experiments.plans.plan_stress_streams`) and its records.

Three axes, each against the paper's stream (batch 64, i.i.d. labels, one corruption at a
time): the batch size, a label shift (long-tailed classes, a class-sorted order) and mixed
domains. :func:`stress_table` holds every method's ACC, AUROC and H on each, with its rank by
H among the methods that have that stream; :func:`ranking_changes` says in numbers which
rankings change; :func:`plot_axes` draws H along each axis.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from scipy.stats import kendalltau

from stamplib.evaluation.record import Record
from stamplib.experiments.plans import BATCH_AXIS, PAPER_STREAM, Plan
from stamplib.report import seeds
from stamplib.report.frames import over_seeds, plan_frame
from stamplib.report.palette import method_colours
from stamplib.report.paper import method_label

COLUMNS = ["method", "axis", "stream", "ACC", "AUROC", "H", "rank"]


def stress_table(plan: Plan, records: Mapping[str, Record]) -> pd.DataFrame:
    """One row per (method, axis, stream) with a record: ACC, AUROC and H (mean over seeds and
    corruptions; for mixed domains, the mean of the per-corruption numbers, as for the paper's
    stream) and the method's rank by H among the methods on that stream (1 = best). Methods
    and streams in the plan's order."""
    frame = plan_frame(plan, records)
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    means = over_seeds(frame)
    means = means[means["corruption"] == "mean"].copy()
    means[["axis", "stream"]] = means["variant"].str.split("=", n=1, expand=True)
    means = means.rename(columns={"acc": "ACC", "auroc": "AUROC", "h": "H"})
    means["rank"] = means.groupby(["dataset", "outliers", "axis", "stream"], sort=False)["H"].rank(
        ascending=False, method="min").astype("Int64")
    order = {m: i for i, m in enumerate(dict.fromkeys(c.spec.method for c in plan.cells))}
    means = means.sort_values("method", key=lambda s: s.map(order), kind="stable")
    means["method"] = means["method"].map(method_label)
    return means[COLUMNS].reset_index(drop=True)


def paper_stream_spread(plan: Plan, records: Mapping[str, Record]) -> pd.DataFrame:
    """Each method's H on the paper's stream of each axis over the headline's seeds: the plan's
    paper-stream cells (its own seeds) and the same cells over its band's seeds (notebook 02's),
    read on the same corruptions. One row per (method, axis) with two or more seeds: ``H`` (the
    mean), ``H min``, ``H max`` and ``seeds``; empty without a band."""
    band_seeds = sorted({c.spec.seed for c in plan.band_cells})
    cells = []
    for cell in plan.cells if band_seeds else ():
        axis, _, value = cell.variant.partition("=")
        if PAPER_STREAM.get(axis) == value:
            cells += [cell, *(dataclasses.replace(cell, spec=cell.spec.with_(seed=s)) for s in band_seeds)]
    frame = plan_frame(dataclasses.replace(plan, cells=tuple(cells), band_cells=()),
                       records) if cells else pd.DataFrame()
    columns = ["method", "axis", "H", "H min", "H max", "seeds"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    means = over_seeds(frame)
    means = means[(means["corruption"] == "mean") & (means["n_seeds"] > 1)]
    out = pd.DataFrame({"method": means["method"].map(method_label), "axis": means["variant"].str.split("=").str[0],
                        "H": means["h"], "H min": means["h_min"], "H max": means["h_max"],
                        "seeds": [tuple(seeds.present(v)) for v in means["h_seeds"]]})
    return out.reset_index(drop=True)


def spread_note(spread: pd.DataFrame) -> str:
    """One line per axis: each method's H on the paper's stream over the headline's seeds, the
    bars the figure draws there; empty without a spread."""
    lines = []
    for axis, rows in spread.groupby("axis", sort=False):
        values = ", ".join(f"{r['method']} {r['H']:.1f} ({r['H min']:.1f}–{r['H max']:.1f})" for _,
                           r in rows.iterrows())
        lines.append(f"{axis}={PAPER_STREAM[axis]} (the paper's stream) over "
                     f"{seeds.seeds_text(rows['seeds'].iloc[0])}, "
                     f"H mean (min–max): {values}.")
    if lines:
        lines.append("The table's columns are one seed each (seed 0): a change from the paper's stream is beyond the "
                     "noise only where it leaves that range.")
    return "\n\n".join(lines)


def wide(table: pd.DataFrame, metric: str = "H") -> pd.DataFrame:
    """``metric`` per method (rows) and stream (columns ``axis=value``, in the plan's order)."""
    if table.empty:
        return pd.DataFrame()
    keyed = table.assign(column=table["axis"] + "=" + table["stream"])
    out = keyed.pivot_table(index="method", columns="column", values=metric, sort=False)
    return out.reindex(index=list(dict.fromkeys(table["method"])), columns=list(dict.fromkeys(keyed["column"])))


def ranking_changes(table: pd.DataFrame) -> str:
    """For every harder stream: the best method there and on the paper's stream, Kendall's τ_b
    between the two rankings by H (over the methods that have both), and every method whose rank
    moves by two places or more. Computed from ``table``: nothing typed by hand."""
    if table.empty:
        return "No records yet: compute the cells first."
    paragraphs = []
    for axis, rows in table.groupby("axis", sort=False):
        paper = rows[rows["stream"] == PAPER_STREAM[axis]].set_index("method")["H"]
        for stream, other in rows.groupby("stream", sort=False):
            if stream == PAPER_STREAM[axis]:
                continue
            h = other.set_index("method")["H"]
            both = paper.index.intersection(h.index)
            if len(both) < 2:
                continue
            before = paper[both].rank(ascending=False, method="min")
            after = h[both].rank(ascending=False, method="min")
            tau = kendalltau(paper[both], h[both]).statistic
            moved = (before - after).abs().sort_values(ascending=False, kind="stable")
            moved = moved[moved >= 2]
            text = (f"{axis} {stream} (against {PAPER_STREAM[axis]}): best H {h[both].idxmax()} "
                    f"({h[both].max():.1f}; on the paper's stream {paper[both].idxmax()}, {paper[both].max():.1f}); "
                    f"Kendall's τ_b {tau:+.2f} over {len(both)} methods; ")
            if moved.empty:
                text += "no method moves by two places or more."
            else:
                text += f"{len(moved)} move by two places or more: " + "; ".join(
                    f"{m} {int(before[m])} → {int(after[m])} (H {paper[m]:.1f} → "
                    f"{h[m]:.1f})" for m in moved.index) + "."
            paragraphs.append(text)
    return "\n\n".join(paragraphs) if paragraphs else "No harder stream has records of two methods yet."


def plot_axes(table: pd.DataFrame, title: str = "H-score on harder streams",
              spread: pd.DataFrame | None = None) -> plt.Figure:
    """One panel per axis: H of each method along the batch sizes (log axis), and on each label
    shift and domain stream beside the paper's; ``spread`` (:func:`paper_stream_spread`): each
    method's range over the headline's seeds on the paper's stream, a bar in its colour there."""
    axes_names = list(dict.fromkeys(table["axis"])) if not table.empty else []
    fig, axes = plt.subplots(1, max(len(axes_names), 1), figsize=(6.0 * max(len(axes_names), 1), 4.8), squeeze=False)
    if not axes_names:
        axes[0, 0].text(0.5, 0.5, "no records yet", ha="center", va="center")
        axes[0, 0].set_axis_off()
        return fig
    methods = list(dict.fromkeys(table["method"]))
    colours = method_colours(methods)  # STAMP in the headline's red, no other method in a red or pink
    for ax, axis in zip(axes[0], axes_names):
        rows = table[table["axis"] == axis]
        streams = list(dict.fromkeys(rows["stream"]))
        for method, mine in rows.groupby("method", sort=False):
            if axis == BATCH_AXIS:
                mine = mine.assign(x=mine["stream"].astype(int)).sort_values("x")
                ax.plot(mine["x"], mine["H"], marker="o", color=colours[method], label=method)
            else:
                ax.plot([streams.index(s) for s in mine["stream"]], mine["H"], marker="o", color=colours[method],
                        label=method)
        _draw_spread(ax, spread, axis, streams, colours)
        if axis == BATCH_AXIS:
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(rows["stream"].astype(int).unique()))
            ax.get_xaxis().set_major_formatter(plt.ScalarFormatter())
        else:
            ax.set_xticks(range(len(streams)), streams)
        ax.set_xlabel(axis)
        ax.set_ylabel("H-score")
        ax.set_title(axis)
    axes[0, -1].legend(fontsize=9, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _draw_spread(ax: plt.Axes, spread: pd.DataFrame | None, axis: str, streams: list[str],
                 colours: Mapping[str, Any]) -> None:
    """Each method's min–max over seeds on the paper's stream of ``axis``: thin bars side by side
    around the paper's stream, in the methods' colours."""
    rows = spread[spread["axis"] == axis] if spread is not None and not spread.empty else pd.DataFrame()
    paper = PAPER_STREAM[axis]
    if rows.empty or (axis != BATCH_AXIS and paper not in streams):
        return
    for k, (_, r) in enumerate(rows.iterrows()):
        offset = (k - (len(rows) - 1) / 2) * 0.012
        x = float(paper) * 2 ** offset if axis == BATCH_AXIS else streams.index(paper) + offset * 4
        ax.vlines(x, r["H min"], r["H max"], color=colours.get(r["method"], "0.5"), lw=1.5, alpha=0.7)
