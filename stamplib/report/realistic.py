"""Notebook 12: the paper's protocol against the realistic online one, from a plan of both
(:func:`stamplib.experiments.plans.plan_realistic_stream`) and its records.

Under the paper's protocol every batch waits until the method has adapted on it. Under the
realistic one (Alfarra et al., ICML 2024) the stream arrives at the speed of a plain forward,
so a method whose step costs C(g) forwards adapts on every C(g)-th batch only and predicts the
others with its latest model. :func:`protocol_table` puts the two side by side with C(g),
:func:`ranking_changes` says in words which methods move in the ranking by H, and
:func:`plot_h_against_speed` draws H against C(g).
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd
from scipy.stats import kendalltau

from stamplib.evaluation.record import Record
from stamplib.experiments.plans import PAPER_PROTOCOL, REALISTIC_PROTOCOL, Plan
from stamplib.report.frames import over_seeds, plan_frame
from stamplib.report.palette import method_colours
from stamplib.report.paper import method_label, outlier_label

_METRICS = (("acc", "ACC"), ("auroc", "AUROC"), ("h", "H"))


def _speeds(plan: Plan, records: Mapping[str, Record]) -> pd.DataFrame:
    """C(g) and the share of adapted batches of every realistic record (median over seeds)."""
    rows = []
    for cell in plan.cells:
        record = records.get(cell.spec.key())
        realistic = record.realistic if record is not None else None  # the record says how it was fed
        if realistic is not None:
            rows.append({"dataset": cell.spec.dataset, "outliers": cell.spec.outlier_set, "method": cell.spec.method,
                         "C(g)": realistic.speed.value,
                         "adapted %": 100.0 * realistic.adapted_batches / max(realistic.batches, 1)})
    if not rows:
        return pd.DataFrame(columns=["dataset", "outliers", "method", "C(g)", "adapted %"])
    return pd.DataFrame(rows).groupby(["dataset", "outliers", "method"], sort=False).median().reset_index()


def protocol_table(plan: Plan, records: Mapping[str, Record]) -> pd.DataFrame:
    """One row per (data set, outlier set, method) in the plan's order: ACC, AUROC and H under the
    paper's protocol and the realistic one (mean over seeds and corruptions), ΔH = realistic −
    paper, C(g), the share of batches adapted on, and each protocol's rank by H (1 = best) among
    the methods with records under both protocols (none for the others)."""
    frame = plan_frame(plan, records)
    keys = ["dataset", "outliers", "method"]
    columns = [*keys, *(f"{label} ({p})" for p in ("paper", "realistic") for _, label in _METRICS),
               "ΔH", "C(g)", "adapted %", "rank (paper)", "rank (realistic)"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    means = over_seeds(frame)
    means = means[means["corruption"] == "mean"]
    sides = []
    for variant, suffix in ((PAPER_PROTOCOL, "paper"), (REALISTIC_PROTOCOL, "realistic")):
        side = means[means["variant"] == variant].set_index(keys)[[name for name, _ in _METRICS]]
        sides.append(side.rename(columns={name: f"{label} ({suffix})" for name, label in _METRICS}))
    table = sides[0].join(sides[1], how="outer").reset_index()
    table = table.merge(_speeds(plan, records), on=keys, how="left")
    table["ΔH"] = table["H (realistic)"] - table["H (paper)"]
    # Both ranks over the same methods, those with a record under each protocol: a method still
    # missing on one side would otherwise shift every rank below it on the other and read as a change.
    both = table[["H (paper)", "H (realistic)"]].notna().all(axis=1)
    for suffix in ("paper", "realistic"):
        table[f"rank ({suffix})"] = (table[f"H ({suffix})"].where(both)
                                     .groupby([table["dataset"], table["outliers"]], sort=False)
                                     .rank(ascending=False, method="min"))
    table[["rank (paper)", "rank (realistic)"]] = table[["rank (paper)", "rank (realistic)"]].astype("Int64")
    if table["C(g)"].dropna().mod(1).eq(0).all():
        table["C(g)"] = table["C(g)"].astype("Int64")
    order = {m: i for i, m in enumerate(dict.fromkeys(c.spec.method for c in plan.cells))}
    table = table.sort_values(["dataset", "outliers", "method"],
                              key=lambda s: s.map(order) if s.name == "method" else s,
                              kind="stable")
    table["method"] = table["method"].map(method_label)
    table["outliers"] = table["outliers"].map(outlier_label)
    return table[columns].reset_index(drop=True)


def _ordinal(rank: float) -> str:
    if pd.isna(rank):
        return "—"
    n = int(rank)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def ranking_changes(table: pd.DataFrame) -> str:
    """In words and numbers, per (data set, outlier set): the best method under each protocol,
    Kendall's τ_b between the two rankings by H, and every method whose rank changes."""
    if table.empty:
        return "No records yet: compute the cells first."
    paragraphs = []
    for (dataset, outliers), rows in table.groupby(["dataset", "outliers"], sort=False):
        rows = rows.dropna(subset=["H (paper)", "H (realistic)"])
        if rows.empty:
            continue
        best = {p: rows.loc[rows[f"H ({p})"].idxmax()] for p in ("paper", "realistic")}
        tau = kendalltau(rows["H (paper)"], rows["H (realistic)"]).statistic if len(rows) > 1 else float("nan")
        moved = rows[rows["rank (paper)"] != rows["rank (realistic)"]]
        lines = [f"{dataset} + {outliers}: best H under the paper's protocol {best['paper']['method']} "
                 f"({best['paper']['H (paper)']:.1f}), under the realistic one {best['realistic']['method']} "
                 f"({best['realistic']['H (realistic)']:.1f}); Kendall's τ_b between the two rankings by H "
                 f"{tau:+.2f} over {len(rows)} methods."]
        if moved.empty:
            lines.append("No method changes rank.")
        else:
            moved = moved.assign(shift=(moved["rank (paper)"] - moved["rank (realistic)"]).abs())
            moved = moved.sort_values("shift", ascending=False, kind="stable")
            lines.append(f"{len(moved)} methods change rank: " + "; ".join(
                f"{r['method']} {_ordinal(r['rank (paper)'])} → {_ordinal(r['rank (realistic)'])} "
                f"(H {r['H (paper)']:.1f} → {r['H (realistic)']:.1f}, C(g) = {r['C(g)']:g})"
                for _, r in moved.iterrows()) + ".")
        paragraphs.append(" ".join(lines))
    return "\n\n".join(paragraphs) if paragraphs else "No method has records under both protocols yet."


def _dodged_labels(rows: pd.DataFrame, gap: float = 2.0) -> list[tuple[float, float, str]]:
    """(x, y, method) of each method's label beside its realistic H, moved down where methods of
    the same C(g) would overlap (at least ``gap`` H points apart)."""
    placed = []
    for x, group in rows.groupby(rows["C(g)"].astype(float), sort=False):
        below = float("inf")
        for _, r in group.sort_values("H (realistic)", ascending=False).iterrows():
            below = min(float(r["H (realistic)"]), below - gap)
            placed.append((float(x), below, r["method"]))
    return placed


def plot_h_against_speed(table: pd.DataFrame, title: str = "H-score against the relative cost C(g)") -> plt.Figure:
    """One panel per (data set, outlier set): each method at its C(g) (log axis), an open marker at
    its H under the paper's protocol and a filled one, joined by an arrow, under the realistic one."""
    groups = [(key, rows.dropna(subset=["C(g)"])) for key, rows in table.groupby(["dataset", "outliers"], sort=False)]
    groups = [(key, rows) for key, rows in groups if not rows.empty]
    fig, axes = plt.subplots(1, max(len(groups), 1), figsize=(7.5 * max(len(groups), 1), 5), squeeze=False)
    if not groups:
        axes[0, 0].text(0.5, 0.5, "no records under both protocols yet", ha="center", va="center")
        axes[0, 0].set_axis_off()
        return fig
    for ax, ((dataset, outliers), rows) in zip(axes[0], groups):
        colours = method_colours(rows["method"])  # STAMP in the headline's red
        for _, r in rows.iterrows():
            colour = colours[r["method"]]
            x = float(r["C(g)"])
            ax.scatter([x], [r["H (paper)"]], facecolors="none", edgecolors=[colour], s=50)
            ax.scatter([x], [r["H (realistic)"]], color=colour, s=50, label=r["method"])
            ax.annotate("", xy=(x, r["H (realistic)"]), xytext=(x, r["H (paper)"]),
                        arrowprops={"arrowstyle": "->", "color": colour, "lw": 1})
        for x, y, label in _dodged_labels(rows):
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(6, 0), fontsize=8, va="center")
        ax.set_xscale("log")
        ax.set_xlabel("C(g): the step's cost in source forwards (log scale)")
        ax.set_ylabel("H-score (open: paper protocol, filled: realistic)")
        ax.set_title(f"{dataset} + {outliers}")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
