"""Paper-vs-ours tables and the figures of notebooks 02–09, from a plan and its records.

The notebooks stay thin: they call :func:`paper_table`, :func:`save_paper_table` and one plot
function each. A teaching-scale cell is shown next to the paper's number of the cell it stands
in for (``PlannedCell.paper_dataset`` / ``paper_outlier_set``), with the data it actually ran on in the
``ours on`` column, so nobody mistakes one for the other.

On the built-in benchmarks (plan scale ``builtin``: the CIFAR-10 photographs of the quick
profile, the digits of the smoke one) the paper's column is a reference only: its numbers come
from another benchmark (2,000 photographs and a compact network, not 10,000 and a ResNet-18),
so the table has no Δ columns. What can be compared there is the order of the methods:
:func:`rank_agreement` gives Kendall's τ_b between the paper's ranking and ours,
:func:`save_paper_table` writes it and STAMP's place among the paper's methods
(:func:`standing`) under the table, and :func:`plot_method_bars` draws the two rankings
instead of the values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from scipy.stats import kendalltau

from stamplib.evaluation.metrics import METRIC_LABELS, PAPER_METRICS, check_metrics
from stamplib.experiments.plans import Plan
from stamplib.report import seeds
from stamplib.report.frames import SPREAD_SUFFIXES, metric_names, over_seeds, plan_frame
from stamplib.report.palette import method_colours
from stamplib.report.paper import (
    compare,
    dataset_label,
    format_paper_vs_ours,
    method_label,
    method_order,
    outlier_label,
)
from stamplib.report.tables import to_markdown, write_table_files

#: What the built-in CIFAR-10 benchmark is, for the notebooks' description and the tables' footers.
_BUILTIN_CIFAR10 = (
    "the built-in CIFAR-10 benchmark, a compact ResNet (0.3 M parameters, trained on the 50,000 JPEG training "
    "photographs) on a subset of the CIFAR-10 test photographs (1,024 known-class ones per corruption in the "
    "quick profile, from 2,000 shipped), not the paper's ResNet-18 (~94 %) on 10,000 images"
)
_REFERENCE_ONLY = ("the paper column is the cell it stands in for, for reference only (no Δ: the numbers of "
                   "two benchmarks do not compare), and the methods' ranking is compared instead (Kendall's τ_b)")
_SCALE_NOTE = {
    "builtin": f"ours: the built-in digits benchmark (teaching scale), not the paper's data; {_REFERENCE_ONLY}",
    "builtin_cifar10": f"ours: {_BUILTIN_CIFAR10}; {_REFERENCE_ONLY}",
    "real": "ours: JPEG re-encoded CIFAR-10 (shared/data), a short CPU-trained source model and a "
    "subset of the test set; Δ mixes the data, model and size differences",
    "paper": "ours: the paper's protocol (15 corruptions, every sample)",
}


#: Under every table of the built-in CIFAR-10 benchmark: what ran, in plain words.
BUILTIN_CIFAR10_NOTE = f"Ours: {_BUILTIN_CIFAR10}."


def describe(plan: Plan, records: dict[str, Any] | None = None) -> str:
    """One paragraph: what the plan computes, at which scale, and how much is in the store."""
    specs = plan.specs
    done = "" if records is None else f"; {sum(s.key() in records for s in specs)} in the results store"
    datasets = sorted({c.spec.dataset for c in plan.cells})
    outlier_sets = sorted({c.spec.outlier_set for c in plan.cells})
    corruptions = plan.cells[0].spec.corruptions if plan.cells else ()
    note = _SCALE_NOTE[plan.scale]
    if plan.scale == "builtin" and any(d.startswith("cifar10_builtin") for d in datasets):
        note = _SCALE_NOTE["builtin_cifar10"]
    return (f"{plan.notebook}: {len(specs)} cells ({plan.scale} scale{done}); data {', '.join(datasets)}; "
            f"outliers {', '.join(outlier_sets)}; {len(corruptions)} corruption(s): {', '.join(corruptions)}.\n"
            f"{note}.")


def output_name(plan: Plan) -> str:
    """File name of a notebook's table and figure: the notebook's name, with ``_real`` for the
    real-data scale so that it does not overwrite the built-in benchmark's files."""
    return f"{plan.notebook}_real" if plan.scale == "real" else plan.notebook


def _ours(plan: Plan, records: dict[str, Any], per_corruption: bool) -> pd.DataFrame:
    frame = over_seeds(plan_frame(plan, records, per_corruption=per_corruption))
    if frame.empty:
        return frame
    frame["ours on"] = [f"{d} / {o}" for d, o in zip(frame["dataset"], frame["outliers"])]
    frame["dataset"] = frame["paper_dataset"].where(frame["paper_dataset"] != "", frame["dataset"])
    frame["outliers"] = frame["paper_outliers"].where(frame["paper_outliers"] != "", frame["outliers"])
    return frame.drop(columns=["paper_dataset", "paper_outliers"])


def _with_outlier_average(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 1's "Avg" rows: the mean over outlier sets per (data set, method, variant), added
    only where a row has more than one outlier set."""
    keys = ["dataset", "method", "variant", "corruption"]
    groups = frame.groupby(keys, sort=False)
    extra = []
    for key, g in groups:
        if len(g) < 2:
            continue
        row = dict(zip(keys, key))
        row.update({m: g[m].mean() for m in metric_names() if m in g.columns})
        for m in [m for m in metric_names() if f"{m}_seeds" in g.columns]:
            # per seed, the mean over the outlier sets that all have it: the rows pair their seeds
            per_set = list(g[f"{m}_seeds"])
            by_seed = {s: float(np.mean([p[s] for p in per_set])) for s in seeds.paired(*per_set)}
            spread = seeds.Spread.of(by_seed)
            row.update({f"{m}_seeds": by_seed, f"{m}_min": spread.low, f"{m}_max": spread.high})
        row.update({"outliers": "avg", "ours on": "mean of the rows above", "collapsed": bool(g["collapsed"].any()),
                    "n_seeds": int(g["n_seeds"].min())})
        extra.append(row)
    return pd.concat([frame, pd.DataFrame(extra)], ignore_index=True) if extra else frame


def paper_table(plan: Plan, records: dict[str, Any], table: str | None = None,
                per_corruption: bool = False, metrics: Sequence[str] = PAPER_METRICS) -> pd.DataFrame:
    """Our numbers next to the paper's for every cell of the plan: the mean over seeds, with
    ``<M> std``, ``<M> min``, ``<M> max`` and ``<M> seeds`` (each seed's value) beside it.

    ``table`` picks the paper table (default: the plan's first, chosen per data set for
    Tables 1 and 4); ``per_corruption`` gives one row per corruption (Table 4's layout).
    ``metrics``: any names of :data:`stamplib.evaluation.metrics.METRICS` (the paper has numbers
    for ACC, AUROC and H only; the others show ``—`` in its column).

    On the built-in benchmark (``plan.scale == "builtin"``) the table has no ``<M> Δ`` columns:
    the paper column is the cell it stands in for, a reference, not a number to subtract.
    """
    metrics = check_metrics(metrics)
    ours = _ours(plan, records, per_corruption)
    if ours.empty:  # nothing stored yet: the table's columns, no rows
        keys = ["dataset", "outliers", "method", "variant"] + (["corruption"] if per_corruption else [])
        empty = pd.DataFrame(columns=keys + [f"{METRIC_LABELS[m]} {kind}" for m in metrics
                                             for kind in ("ours", "paper", "Δ")])
        return _without_delta(empty) if plan.scale == "builtin" else empty
    for m in metrics:  # asked for, but no record has it (records older than the metric)
        if m not in ours.columns:
            ours[m] = float("nan")
    unused = [c for m in metric_names() if m not in metrics for c in (m, *(m + x for x in SPREAD_SUFFIXES))]
    ours = ours.drop(columns=[c for c in unused if c in ours.columns])
    if plan.experiment.averages_outlier_sets and not per_corruption:
        ours = _with_outlier_average(ours)
    parts = []
    tables = plan.paper_tables or ("",)
    for ds, group in ours.groupby("dataset", sort=False):
        chosen = table or _table_for(tables, ds)
        on = ["dataset", "outliers", "method", "variant"] + (["corruption"] if per_corruption else [])
        if chosen:
            parts.append(compare(group, chosen, on=on, metrics=metrics))
        else:  # a figure the paper gives no numbers for
            parts.append(compare(group, "1a", on=on, metrics=metrics).assign(
                **{f"{METRIC_LABELS[m]} paper": float("nan") for m in metrics}))
    out = pd.concat(parts, ignore_index=True)
    order = {m: i for i, m in enumerate(method_order(tables[0] or "1a"))}
    out["_m"] = out["method"].map(lambda m: order.get(m, len(order)))
    variant_order = {v: i for i, v in enumerate(dict.fromkeys(c.variant for c in plan.cells))}
    out["_v"] = out["variant"].map(lambda v: variant_order.get(v, len(variant_order)))
    # corruptions in the plan's order (the paper's column order), the mean last
    corruption_order = {c: i for i, c in enumerate(plan.cells[0].spec.corruptions)} if plan.cells else {}
    out["_c"] = out["corruption"].map(lambda c: corruption_order.get(c, len(corruption_order)))
    sort = ["dataset", "outliers", "_m", "_v"] + (["_c"] if per_corruption else [])
    out = out.sort_values(sort, kind="stable").drop(columns=["_m", "_v", "_c"])
    drop = [c for c in ("seed", "seconds", "outlier_ratio", "n_seeds") if c in out.columns]
    if not per_corruption:
        drop.append("corruption")
    if (out["variant"] == "").all():
        drop.append("variant")
    out = out.drop(columns=drop).reset_index(drop=True)
    return _without_delta(out) if plan.scale == "builtin" else out


def _without_delta(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=[c for c in table.columns if c.endswith(" Δ")])


def paper_is_reference(table: pd.DataFrame) -> bool:
    """Whether the table's paper column is a reference only: it has paper numbers but no Δ,
    which :func:`paper_table` leaves out on the built-in benchmark. The table itself says so
    (not a scale argument), so the notebooks' calls need no change and a filtered table or one
    read back from its .csv is recognised too."""
    columns = [str(c) for c in table.columns]
    return any(c.endswith(" paper") for c in columns) and not any(c.endswith(" Δ") for c in columns)


def _table_for(tables: Sequence[str], dataset: str) -> str:
    """Table 1a/4a for CIFAR10-C, 1b/4b for CIFAR100-C; single tables as they are."""
    if len(tables) == 2:
        return tables[1] if dataset.startswith("cifar100") else tables[0]
    return tables[0] if tables else ""


def baseline_band(plan: Plan, records: dict[str, Any]) -> pd.DataFrame:
    """The seed spread of an ablation's or a sweep's baseline row (its default: STAMP as the
    headline runs it), from the plan's :attr:`~stamplib.experiments.plans.Plan.band_cells` and
    the same row at the plan's own seeds: one row per baseline (method and data) with each
    metric's mean, ``<m>_min``, ``<m>_max`` and ``<m>_seeds``, where two or more seeds are
    stored; empty otherwise (no band to draw)."""
    band_keys = {c.spec.key() for c in plan.band_cells}
    other_seeds = sorted({c.spec.seed for c in plan.band_cells})
    own = [c for c in plan.cells if other_seeds and c.spec.with_(seed=other_seeds[0]).key() in band_keys]
    cells = tuple({c.spec.key(): c for c in (*own, *plan.band_cells)}.values())
    frame = plan_frame(dataclasses.replace(plan, cells=cells, band_cells=()), records)
    if frame.empty:
        return frame
    frame = frame.assign(variant=[own[0].variant if own else ""] * len(frame))
    band = over_seeds(frame)
    band = band[(band["corruption"] == "mean") & (band["n_seeds"] > 1)]
    return band.reset_index(drop=True)


def band_note(band: pd.DataFrame, digits: int = 1) -> str:
    """Under an ablation's or a sweep's table: its baseline row over the headline's seeds, the
    band its figure draws (empty without a band)."""
    lines = []
    for r in band.itertuples():
        values = ", ".join(
            f"{METRIC_LABELS[m]} {seeds.Spread.of(getattr(r, f'{m}_seeds')).text(digits)}"
            for m in PAPER_METRICS if f"{m}_seeds" in band.columns and seeds.present(getattr(r, f"{m}_seeds")))
        row = short_variant(r.variant) if r.variant else method_label(r.method)
        lines.append(f"The baseline row ({row}) over {seeds.seeds_text(seeds.present(r.h_seeds))}, mean "
                     f"(min–max): {values}; the band in the figure. The table's rows are the plan's seeds alone, "
                     "so a row differs from the baseline beyond the noise only outside that band.")
    return "\n\n".join(lines)


def save_paper_table(df: pd.DataFrame, name: str, directory: str | Path,
                     digits: int = 1, footer: str = "", band: pd.DataFrame | None = None) -> list[Path]:
    """``<name>.csv`` (numbers), ``.md`` and ``.tex`` (formatted paper | ours | Δ, † = collapsed).

    A table whose paper column is a reference only (:func:`paper_is_reference`, the built-in
    benchmark) has paper | ours, a footer line with Kendall's τ_b of the two rankings, and
    ``<name>_ranking.csv`` / ``.md`` with the rankings themselves (:func:`rank_agreement`).
    ``band``: an ablation's or a sweep's :func:`baseline_band`, named under the table.
    """
    if band is not None and not band.empty:
        footer = "\n\n".join(n for n in (band_note(band, digits), footer) if n)
    ranking = _reference_ranking(df)
    if ranking is not None:
        place = standing_text(standing(df, ranking["metric"].iloc[0]))
        footer = "\n\n".join(n for n in (_ranking_footer(ranking, name), place, footer) if n)
    footer = "\n\n".join(n for n in (spread_note(df), footer) if n)
    if "ours on" in df.columns and df["ours on"].astype(str).str.startswith("cifar10_builtin").any():
        footer = "\n\n".join(n for n in (BUILTIN_CIFAR10_NOTE, footer) if n)
    md = to_markdown(format_paper_vs_ours(df, digits))
    notes = []
    if "collapsed" in df.columns and df["collapsed"].astype(bool).any():
        notes.append("† collapsed on at least one corruption (non-finite outputs or a single predicted class); "
                     "its mean is not comparable")
    if footer:
        notes.append(footer)
    md += "".join(f"\n{n}\n" for n in notes)
    tex = format_paper_vs_ours(df, digits, latex=True).to_latex(index=False, escape=False)
    files = write_table_files(directory, name, seed_columns(df), digits + 2, md, tex)
    if ranking is not None:
        files += _save_ranking(ranking, directory, f"{name}_ranking")
    return files


def seed_columns(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each ``<M> seeds`` column (a value per seed) spread into plain columns
    ``<M> seed 0``, ``<M> seed 1``, …, as a CSV file can hold them."""
    out = table.copy()
    for column in [c for c in table.columns if str(c).endswith(" seeds")]:
        prefix = str(column).removesuffix(" seeds")
        found = [v if isinstance(v, dict) else {} for v in table[column]]
        at = list(out.columns).index(column)
        out = out.drop(columns=column)
        for k, seed in enumerate(sorted({s for v in found for s in v})):
            out.insert(at + k, f"{prefix} seed {seed}", [v.get(seed, math.nan) for v in found])
    return out


# ------------------------------------------------------------------------------- rankings


def _ranked_rows(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows that take part in a ranking: headline rows (the mean over corruptions in a
    per-corruption table) with both the paper's number and ours."""
    rows = table[table["corruption"] == "mean"] if "corruption" in table.columns else table
    return rows[rows[f"{metric} paper"].notna() & rows[f"{metric} ours"].notna()]


def _item_labels(rows: pd.DataFrame) -> list[str]:
    """The paper's method names, with the row variant where there is one (Table 5's ablation
    rows and Table 6's ratios rank variants of STAMP)."""
    variants = rows["variant"] if "variant" in rows.columns else pd.Series("", index=rows.index)
    return [method_label(m) + (f" ({short_variant(v)})" if v else "") for m, v in zip(rows["method"], variants)]


def _best_first(values: Sequence[float]) -> list[int]:
    """Row positions from the highest value down; ties keep the table's order (the paper's row
    order), as the sort is stable."""
    return sorted(range(len(values)), key=lambda i: -values[i])


def _ranking_text(labels: Sequence[str], values: Sequence[float]) -> str:
    """``STAMP > CoTTA = Tent > Source``: ``=`` joins tied values."""
    order = _best_first(values)
    text = labels[order[0]] if order else ""
    for prev, i in zip(order, order[1:]):
        text += f" {'=' if values[i] == values[prev] else '>'} {labels[i]}"
    return text


def _tau(paper: Sequence[float], ours: Sequence[float]) -> float:
    if len(paper) < 2:  # no pair to order
        return float("nan")
    # tau-b: ties in either ranking count neither for nor against, and shrink the denominator
    # accordingly; a ranking that is all one tie gives NaN.
    return float(kendalltau(paper, ours, variant="b").statistic)


def rank_agreement(table: pd.DataFrame, metric: str = "H", digits: int = 1) -> pd.DataFrame:
    """How far our ranking of the methods agrees with the paper's, per (data set, outlier set).

    ``table``: a :func:`paper_table` result; ``metric``: a label with ``<metric> paper`` and
    ``<metric> ours`` columns. Only rows with both numbers take part (the newer methods, which
    the paper lacks, do not); a per-corruption table ranks its mean rows. Columns: ``dataset``,
    ``outliers``, ``metric``, ``n_methods``, ``kendall_tau`` (Kendall's τ_b; NaN below two
    methods or when one ranking is a single tie) and ``paper_ranking`` / ``ours_ranking``
    (``STAMP > CoTTA = Tent > …``, best first).

    Ties: both columns are compared at ``digits`` decimals, the paper's printed precision, so
    a difference neither table can show is a tie in both; τ_b counts a tied pair neither as
    concordant nor as discordant and corrects its denominator for ties, so two identical
    rankings with ties still give 1.
    """
    rows = []
    for (ds, o), part in table.groupby(["dataset", "outliers"], sort=False):
        ranked = _ranked_rows(part, metric)
        labels = _item_labels(ranked)
        paper = list(np.round(ranked[f"{metric} paper"].to_numpy(float), digits))
        ours = list(np.round(ranked[f"{metric} ours"].to_numpy(float), digits))
        by_seed = _seed_values(ranked, metric)
        per_seed = seeds.tau_by_seed(by_seed, dict(zip(by_seed, paper)), digits) if by_seed else {}
        rows.append({"dataset": ds, "outliers": o, "metric": metric, "n_methods": len(ranked),
                     "kendall_tau": _tau(paper, ours), "kendall_tau_seeds": per_seed,
                     "paper_ranking": _ranking_text(labels, paper), "ours_ranking": _ranking_text(labels, ours)})
    columns = ["dataset", "outliers", "metric", "n_methods", "kendall_tau", "kendall_tau_seeds", "paper_ranking",
               "ours_ranking"]
    return pd.DataFrame(rows, columns=columns)


def _seed_values(rows: pd.DataFrame, metric: str) -> dict[str, seeds.BySeed]:
    """Each row's ``<metric> seeds`` (value per seed) by its item label, when every row has
    them for two or more paired seeds; else empty (one seed: the means are the seed's values)."""
    column = f"{metric} seeds"
    if column not in rows.columns or not all(isinstance(v, dict) for v in rows[column]):
        return {}
    found = dict(zip(_item_labels(rows), rows[column]))
    return found if len(found) == len(rows) and len(seeds.paired(*found.values())) > 1 else {}


ordinal = seeds.ordinal


def standing(table: pd.DataFrame, metric: str | None = None, method: str = "stamp", digits: int = 1) -> pd.DataFrame:
    """Where ``method`` stands among the methods the paper has numbers for, per (data set,
    outlier set): its rank by ``metric`` (default: H where the table has it, else its first
    metric with both numbers, ACC in Table 4) in the paper and in ours (1 = best; a tie at the
    printed precision shares the better place), the best other method of each (``<src>_best``:
    its registry name; ``<src>_best_other``: its label and value), and how many methods took
    part. Empty when ``method`` has no row with both numbers.

    Over several seeds (the table's ``<metric> seeds``) ours is read seed by seed:
    ``ours_ranks`` is the rank under each seed that every method has, ``ours_rank_text`` their
    range (``2nd–6th``), ``ours_value_text`` and ``ours_best_other`` show the mean with the
    smallest and largest seed's value. Whether ``method`` beats the best other under every seed
    is the ledger's verdict (:mod:`stamplib.evidence.judge`)."""
    metric = metric or _ranking_metric(table)
    rows = []
    for (ds, o), part in table.groupby(["dataset", "outliers"], sort=False) if metric else ():
        ranked = _ranked_rows(part, metric)
        if "variant" in ranked.columns:
            ranked = ranked[ranked["variant"] == ""]
        if method not in set(ranked["method"]):
            continue
        row: dict[str, Any] = {"dataset": ds, "outliers": o, "metric": metric, "n_methods": len(ranked)}
        for src in ("paper", "ours"):
            values = np.round(ranked[f"{metric} {src}"].to_numpy(float), digits)
            own = values[(ranked["method"] == method).to_numpy()][0]
            others = ranked["method"].to_numpy() != method
            best = int(np.argmax(np.where(others, values, -np.inf)))
            row[f"{src}_rank"] = int((values > own).sum()) + 1
            row[f"{src}_value"] = float(own)
            row[f"{src}_best"] = ranked["method"].iloc[best]
            row[f"{src}_best_other"] = f"{method_label(ranked['method'].iloc[best])} {values[best]:.{digits}f}"
        by_seed = _method_seeds(ranked, metric)
        if by_seed:
            row["ours_ranks"] = seeds.ranks(by_seed, method, digits)
            row["ours_value_text"] = seeds.Spread.of(by_seed[method]).text(digits)
            row["ours_best_other"] = (f"{method_label(row['ours_best'])} "
                                      f"{seeds.Spread.of(by_seed[row['ours_best']]).text(digits)}")
        else:
            row["ours_ranks"] = {}
            row["ours_value_text"] = f"{row['ours_value']:.{digits}f}"
        row["ours_rank_text"] = seeds.rank_text(row["ours_ranks"]) if row["ours_ranks"] else ordinal(row["ours_rank"])
        rows.append(row)
    columns = ["dataset", "outliers", "metric", "n_methods", "paper_rank", "paper_value", "paper_best",
               "paper_best_other", "ours_rank", "ours_value", "ours_best", "ours_best_other", "ours_ranks",
               "ours_rank_text", "ours_value_text"]
    return pd.DataFrame(rows, columns=columns)


def _method_seeds(rows: pd.DataFrame, metric: str) -> dict[str, seeds.BySeed]:
    """``<metric> seeds`` by method, when every row has them for two or more paired seeds."""
    column = f"{metric} seeds"
    if column not in rows.columns or not all(isinstance(v, dict) for v in rows[column]):
        return {}
    found = dict(zip(rows["method"], rows[column]))
    return found if len(seeds.paired(*found.values())) > 1 else {}


def standing_text(places: pd.DataFrame, method: str = "stamp") -> str:
    """One sentence per panel of :func:`standing`, e.g. ``STAMP ranks 2nd of the paper's 10
    methods by H (71.3; best other: CoTTA 72.0); in the paper it ranks 1st (80.1; …)``."""
    name = method_label(method)
    sentences = []
    for r in places.itertuples():
        over = ""
        if r.ours_ranks:  # several seeds: the range of the ranks and the mean (min–max); whether STAMP
            over = f" over {seeds.seeds_text(r.ours_ranks)}"  # leads is the ledger's verdict (evidence.judge)
        sentences.append(
            f"{dataset_label(r.dataset)} + {outlier_label(r.outliers)}: {name} ranks {r.ours_rank_text} of the "
            f"paper's {r.n_methods} methods by {r.metric}{over} ({r.ours_value_text}; best other: "
            f"{r.ours_best_other}); in the paper it ranks {ordinal(r.paper_rank)} ({r.paper_value:.1f}; "
            f"best other: {r.paper_best_other}).")
    return " ".join(sentences)


def spread_note(table: pd.DataFrame) -> str:
    """Under a table with rows over several seeds: what its numbers are (empty otherwise)."""
    found = [v for c in table.columns if str(c).endswith(" seeds") for v in table[c] if isinstance(v, dict)]
    several = [v for v in found if len(seeds.present(v)) > 1]
    if not several:
        return ""
    seen = sorted({s for v in several for s in seeds.present(v)})
    return (f"Ours over {seeds.seeds_text(seen)}: the mean, and in brackets the smallest and largest value of a "
            "single seed (min–max).")


def _ranking_metric(table: pd.DataFrame) -> str | None:
    """H where the table has it (the paper's headline), else its first metric with both numbers
    (ACC for Table 4)."""
    both = [c.removesuffix(" ours") for c in table.columns
            if c.endswith(" ours") and f"{c.removesuffix(' ours')} paper" in table.columns]
    return "H" if "H" in both else (both[0] if both else None)


def _reference_ranking(table: pd.DataFrame) -> pd.DataFrame | None:
    """The rank agreement of a reference-only table that has anything to rank, else None (other
    scales keep their Δ; figures the paper prints no numbers for have nothing to rank)."""
    metric = _ranking_metric(table)
    if not paper_is_reference(table) or metric is None:
        return None
    ranking = rank_agreement(table, metric)
    return ranking if (ranking["n_methods"] > 0).any() else None


def _tau_text(tau: float) -> str:
    # a typographic minus, as in the Δ columns of the other scales
    return "—" if np.isnan(tau) else seeds.signed(tau, 2).replace("-", "−")


def _taus_text(per_seed: seeds.BySeed, tau: float) -> str:
    """τ_b per seed with its range (``+0.26 / +0.41 / +0.51 (seeds 0–2; range +0.26 to +0.51)``)
    where the ranking has several seeds, else the one τ_b."""
    found = seeds.present(per_seed) if isinstance(per_seed, dict) else {}
    if len(found) < 2:
        return _tau_text(tau)
    values = list(found.values())
    return (" / ".join(_tau_text(v) for v in values) + f" ({seeds.seeds_text(found)}; range "
            f"{_tau_text(min(values))} to {_tau_text(max(values))})")


def _ranking_footer(ranking: pd.DataFrame, name: str) -> str:
    panels = "; ".join(f"{dataset_label(r.dataset)} + {outlier_label(r.outliers)}: τ_b = "
                       f"{_taus_text(r.kendall_tau_seeds, r.kendall_tau)} over {r.n_methods} methods"
                       for r in ranking.itertuples())
    return (f"The paper column is the cell ours stands in for, on other data: its numbers are a reference, "
            f"not a target, so there is no Δ. Compared instead: the methods' ranking by "
            f"{ranking['metric'].iloc[0]}, Kendall's τ_b between the paper's and ours (1 = same order, "
            f"−1 = reversed; `{name}_ranking.md` lists both): {panels}.")


def _save_ranking(ranking: pd.DataFrame, directory: str | Path, name: str) -> list[Path]:
    numbers = seed_columns(ranking.rename(columns={"kendall_tau_seeds": "kendall_tau seeds"}))
    shown = ranking.assign(dataset=ranking["dataset"].map(dataset_label),
                           outliers=ranking["outliers"].map(outlier_label),
                           kendall_tau=[_taus_text(per, tau) for per, tau in
                                        zip(ranking["kendall_tau_seeds"], ranking["kendall_tau"])]
                           ).drop(columns="kendall_tau_seeds")
    shown = shown.rename(columns={"kendall_tau": "Kendall's τ_b", "paper_ranking": "paper's ranking",
                                  "ours_ranking": "our ranking", "n_methods": "methods"})
    return write_table_files(directory, name, numbers, 4, to_markdown(shown))


# ------------------------------------------------------------------------------- figures


def labelled_title(title: str, table: pd.DataFrame) -> str:
    """``title`` with the data our numbers ran on when it is not the paper's: every figure of
    the built-in benchmark says so (its panels carry the paper's data set labels)."""
    ran_on = set(table["ours on"]) if "ours on" in table.columns else set()
    if any(str(v).startswith("cifar10_builtin") for v in ran_on):
        return (f"{title}\nours: the built-in CIFAR-10 benchmark (2,000 photographs, a compact ResNet), "
                "not the paper's data")
    if any(str(v).startswith("digits") for v in ran_on):
        return f"{title}\nours: the built-in digits benchmark, not the paper's data"
    if any(str(v).startswith("cifar10_jpeg") for v in ran_on):
        return f"{title}\nours: JPEG CIFAR-10 with our CIFAR-10-C and a CPU-trained source model"
    return title


def _label_rows(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["Method"] = df["method"].map(method_label)
    df["Outlier set"] = df["outliers"].map(outlier_label)
    df["Data set"] = df["dataset"].map(dataset_label)
    return df


def _no_results_figure(title: str) -> plt.Figure:
    """What a figure shows while the results store holds none of its cells (a notebook rendered
    with ``compute_missing`` off, e.g. the reference tables before their records are committed)."""
    fig, ax = plt.subplots(figsize=(6.0, 2.0))
    ax.axis("off")
    ax.text(0.5, 0.5, "no results in the store yet\n(compute them, or render with compute_missing on)",
            ha="center", va="center")
    ax.set_title(title)
    return fig


def plot_method_bars(table: pd.DataFrame, title: str, metric: str = "H") -> plt.Figure:
    """Ours vs the paper per method (bars), one panel per (data set, outlier set).

    A table whose paper column is a reference only (the built-in benchmark) gets
    :func:`plot_rank_slopes` instead: bars side by side would invite comparing numbers of two
    different benchmarks.
    """
    if table.empty:
        return _no_results_figure(title)
    if f"{metric} ours" not in table.columns:  # the table shows other metrics: plot its first
        metric = next(c.removesuffix(" ours") for c in table.columns if c.endswith(" ours"))
    if paper_is_reference(table):
        return plot_rank_slopes(table, title, metric)
    df = _label_rows(table)
    # A fresh index: rows without a paper number (newer methods) are dropped by seaborn, which
    # then re-indexes and fails on the duplicate labels that concatenating two copies leaves.
    long = pd.concat([
        df.assign(source="paper", value=df[f"{metric} paper"]),
        df.assign(source="ours", value=df[f"{metric} ours"]),
    ], ignore_index=True)
    panels = list(dict.fromkeys(zip(df["Data set"], df["Outlier set"])))
    width = max(5.5, 0.45 * df["Method"].nunique() + 1.0)  # room for the newer methods' rows
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), 3.6), squeeze=False, sharey=True)
    for i, (ax, (ds, o)) in enumerate(zip(axes[0], panels)):
        part = long[(long["Data set"] == ds) & (long["Outlier set"] == o)]
        sns.barplot(part, x="Method", y="value", hue="source", ax=ax, hue_order=["paper", "ours"])
        ax.set(title=f"{ds} + {o}", xlabel="", ylabel=f"{metric} (%)")
        ax.tick_params(axis="x", rotation=45)
        if i < len(panels) - 1:
            ax.get_legend().remove()
        else:  # one legend, outside the bars
            sns.move_legend(ax, "upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle(labelled_title(title, table))
    fig.tight_layout()
    return fig


def plot_rank_slopes(table: pd.DataFrame, title: str, metric: str = "H") -> plt.Figure:
    """The paper's ranking of the methods by ``metric`` (left) against ours (right), a line per
    method, one panel per (data set, outlier set) with Kendall's τ_b in its title. Only methods
    with both numbers are drawn (see :func:`rank_agreement`); each label carries its value."""
    if table.empty:
        return _no_results_figure(title)
    agreement = rank_agreement(table, metric)
    most = max(1, int(agreement["n_methods"].max()))
    fig, axes = plt.subplots(1, len(agreement), figsize=(5.0 * len(agreement), 0.4 * most + 1.8), squeeze=False)
    for ax, panel in zip(axes[0], agreement.itertuples()):
        part = table[(table["dataset"] == panel.dataset) & (table["outliers"] == panel.outliers)]
        _draw_slopes(ax, _ranked_rows(part, metric), metric, most)
        ax.set_title(f"{dataset_label(panel.dataset)} + {outlier_label(panel.outliers)}\n"
                     f"Kendall's $\\tau_b$ = {_taus_text(panel.kendall_tau_seeds, panel.kendall_tau)} over "
                     f"{panel.n_methods} methods", fontsize=10)
    fig.suptitle(labelled_title(f"{title}\nranks by {metric}: the paper's numbers come from another benchmark", table))
    fig.tight_layout()
    return fig


def _draw_slopes(ax: plt.Axes, rows: pd.DataFrame, metric: str, most: int, digits: int = 1) -> None:
    labels = _item_labels(rows)
    sides = [np.round(rows[f"{metric} {src}"].to_numpy(float), digits) for src in ("paper", "ours")]
    # Rank 1 at the top; tied values get neighbouring places in the paper's row order, and the
    # printed values next to the names show the tie.
    places = [{i: rank + 1 for rank, i in enumerate(_best_first(list(v)))} for v in sides]
    methods = list(rows["method"])
    if len(set(methods)) == len(methods):  # one line per method: each in its own colour, STAMP red
        by_method = method_colours(methods)
        colors = [by_method[m] for m in methods]
    else:  # variants of one method (ablation rows, ratios): told apart by a palette of their own
        colors = list(sns.color_palette("colorblind", max(1, len(labels))))
    # Over several seeds: the places are those of the means, and each label adds the range of
    # the item's ranks over the seeds (``4th–9th``), each seed ranked on its own.
    by_seed = _seed_values(rows, metric)
    intervals = {label: seeds.rank_text(seeds.ranks(by_seed, label, digits)) for label in by_seed}
    for i, label in enumerate(labels):
        left, right = places[0][i], places[1][i]
        ax.plot([0, 1], [left, right], marker="o", color=colors[i % len(colors)])
        ax.text(-0.06, left, f"{label}  {sides[0][i]:.{digits}f}", ha="right", va="center", fontsize=9)
        interval = f"  ({intervals[label]})" if label in intervals else ""
        ax.text(1.06, right, f"{sides[1][i]:.{digits}f}  {label}{interval}", ha="left", va="center", fontsize=9)
    if not labels:
        ax.text(0.5, (most + 1) / 2, "no method with both numbers", ha="center", va="center")
    ax.set_xlim(-0.9, 1.9)
    ax.set_ylim(most + 0.5, 0.5)  # inverted: rank 1 at the top
    over = f"our rank\n(mean over {seeds.seeds_text(seeds.paired(*by_seed.values()))})" if by_seed else "our rank"
    ax.set_xticks([0, 1], ["paper's rank", over])
    ax.set_yticks(range(1, most + 1))
    ax.set_ylabel(f"rank by {metric} (1 = best)")
    ax.grid(axis="x", visible=False)


_ABLATION_NAMES = {"sam": "S.A.", "lr_decay": "D.S.", "memory": "RBM", "weighting": "S.W."}


def short_variant(label: str) -> str:
    """A compact axis label: ablation rows as the paper's column names of the components that
    are on (``S.A.+D.S.+RBM+S.W.``; ``entropy min.`` when none is), ``weighting=static`` as
    ``static``; other labels unchanged."""
    parts = dict(p.split("=", 1) for p in label.split(",") if "=" in p)
    if set(parts) == set(_ABLATION_NAMES):
        on = [name for key, name in _ABLATION_NAMES.items() if parts[key] not in ("0", "none")]
        return "+".join(on) or "entropy min."
    if set(parts) == {"weighting"}:
        return parts["weighting"]
    return label


def _draw_band(ax: plt.Axes, band: pd.DataFrame | None, metric: str, colour: Any, label: str) -> None:
    """The baseline row's min–max over seeds of ``metric`` (a label: ACC, AUROC, H) as a band."""
    if band is None or band.empty:
        return
    key = {v: k for k, v in METRIC_LABELS.items()}[metric]
    for r in band.itertuples():
        low, high = getattr(r, f"{key}_min"), getattr(r, f"{key}_max")
        if not (math.isnan(low) or math.isnan(high)):
            ax.axhspan(low, high, color=colour, alpha=0.18, lw=0, zorder=0, label=label)


def _band_label(band: pd.DataFrame | None) -> str:
    if band is None or band.empty:
        return ""
    r = band.iloc[0]
    row = short_variant(r["variant"]) if r["variant"] else method_label(r["method"])
    return f"band: {row} over {seeds.seeds_text(seeds.present(r['h_seeds']))}, min–max"


def plot_variant_bars(table: pd.DataFrame, title: str, metrics: Sequence[str] = ("ACC", "AUROC", "H"),
                      with_paper: bool = True, band: pd.DataFrame | None = None) -> plt.Figure:
    """ACC / AUROC / H per row variant (ablation rows, weight strategies, K views); ``band``
    (:func:`baseline_band`): the baseline row's spread over seeds, a band per metric behind
    our bars."""
    df = table.copy()
    sources = ["ours", "paper"] if with_paper else ["ours"]
    rows = []
    for _, r in df.iterrows():
        for m in metrics:
            for src in sources:
                v = r.get(f"{m} {src}")
                if v is not None and pd.notna(v):
                    rows.append({"variant": short_variant(r["variant"]), "metric": m, "source": src, "value": v})
    long = pd.DataFrame(rows)
    fig, axes = plt.subplots(1, len(sources), figsize=(6.5 * len(sources), 3.8), squeeze=False, sharey=True)
    for ax, src in zip(axes[0], sources):
        part = long[long["source"] == src] if not long.empty else long
        if part.empty:
            ax.set_axis_off()
            continue
        shown = [m for m in metrics if m in set(part["metric"])]
        colours = dict(zip(shown, sns.color_palette(n_colors=max(1, len(shown)))))
        sns.barplot(part, x="variant", y="value", hue="metric", ax=ax, hue_order=shown, palette=colours)
        if src == "ours":
            for k, m in enumerate(shown):
                _draw_band(ax, band, m, colours[m], _band_label(band) if k == 0 else "_nolegend_")
        ax.set(title=src, xlabel="", ylabel="%", ylim=(0, 100))
        ax.tick_params(axis="x", rotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
        ax.legend(loc="upper left", ncols=4, fontsize=8)
    fig.suptitle(labelled_title(title, table))
    fig.tight_layout()
    return fig


def plot_ratio_lines(table: pd.DataFrame, title: str, band: pd.DataFrame | None = None) -> plt.Figure:
    """H-score against the outlier proportion, ours and the paper's, per outlier set; ``band``
    (:func:`baseline_band`): the default proportion's spread over seeds, a grey band."""
    df = _label_rows(table)
    df["proportion (%)"] = [100 * float(v.split("=")[1]) for v in df["variant"]]
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    _draw_band(ax, band, "H", "grey", _band_label(band))
    for (o, d), g in df.groupby(["Outlier set", "ours on"], sort=False):
        ax.plot(g["proportion (%)"], g["H ours"], marker="o", label=f"ours ({d})")
        if g["H paper"].notna().any():
            ax.plot(g["proportion (%)"], g["H paper"], marker="s", linestyle="--", label=f"paper ({o})")
    ax.set(xlabel="outliers / (ID + outliers) (%)", ylabel="H-score (%)", title=labelled_title(title, table))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_corruption_heatmap(table: pd.DataFrame, title: str) -> plt.Figure:
    """Closed-set accuracy per method and corruption: ours, and ours − paper."""
    if table.empty:
        return _no_results_figure(title)
    df = _label_rows(table)
    ours = df.pivot_table(index="Method", columns="corruption", values="ACC ours", sort=False)
    panels = [("ours: accuracy (%)", ours, "viridis", None)]
    if "ACC Δ" in df.columns:  # none on the built-in benchmark: the paper's numbers are a reference there
        delta = df.pivot_table(index="Method", columns="corruption", values="ACC Δ", sort=False)
        if delta.notna().any().any():
            panels.append(("ours − paper (points)", delta, "RdBu", 0.0))
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 0.45 * len(ours) + 2), squeeze=False)
    for ax, (name, values, cmap, center) in zip(axes[0], panels):
        sns.heatmap(values, annot=True, fmt=".0f", cmap=cmap, center=center, ax=ax, cbar=False)
        ax.set(title=name, xlabel="", ylabel="")
        ax.tick_params(axis="x", rotation=45)
    fig.suptitle(labelled_title(title, table))
    fig.tight_layout()
    return fig
