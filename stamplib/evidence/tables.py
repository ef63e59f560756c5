"""A benchmark's records as the tables and figure of its page (:func:`stamplib.evidence.pages.benchmark_block`):
the same code for every benchmark, so the built-in benchmark and the reference run are shown alike.

Three settings, the paper's CIFAR-10 ones: (a) Table 1a with Noise outliers, (b) Table 3's 8:2
class split, (c) Table 4a's closed set. A table keeps, per method and metric, ours (the mean over
the seeds stored, with each seed's value) beside the paper's; where the benchmark is another than
the paper's (the built-in one) no difference is subtracted (:func:`stamplib.report.reproduce.paper_table`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from stamplib.evaluation.record import Record
from stamplib.evidence.benchmarks import Benchmark, Design
from stamplib.experiments import plans
from stamplib.methods import PAPER_ORDER, TABLE_ORDER
from stamplib.report import seeds
from stamplib.report.palette import NEWER_METHODS_BAR, PAPER_METHODS_BAR, STAMP
from stamplib.report.paper import method_label
from stamplib.report.reproduce import paper_table, short_variant
from stamplib.report.tables import to_markdown

SETTINGS = {"a": (plans.TABLE1, "H"), "b": (plans.CLASS_SPLIT, "H"), "c": (plans.CLOSED_SET, "ACC")}
TITLES = {"a": "(a) CIFAR-10-C + Noise outliers (Table 1a, Noise column)",
          "b": "(b) CIFAR-10-C, classes 8–9 as outliers (Table 3, 8:2)",
          "c": "(c) closed set, no outliers (Table 4a)"}
#: Per metric: ours, the paper's, Δ (where subtracted) and the spread over seeds.
_KINDS = ("paper", "ours", "Δ", "min", "max", "seeds")
_SPREAD = (" min", " max", " seeds")


def plan(benchmark: Benchmark, experiment: plans.Experiment, **params: Any) -> plans.Plan:
    """``experiment``'s plan at ``benchmark``'s profile and scale over its table seeds."""
    params.setdefault("seeds", ",".join(map(str, benchmark.table_seeds)))
    return experiment.plan(profile=benchmark.profile, scale=benchmark.scale, **params)


def closed_set(per_corruption: pd.DataFrame) -> pd.DataFrame:
    """Mean ACC over our corruptions beside the paper's mean over the same corruptions (Table 4a
    prints every corruption), with the spread over seeds of our mean."""
    rows = per_corruption[per_corruption["corruption"] != "mean"]
    if rows.empty:
        return pd.DataFrame(columns=["method", "ACC paper", "ACC ours", "ACC Δ"])
    mean = rows.groupby("method", sort=False)[["ACC paper", "ACC ours"]].mean()
    complete = rows.groupby("method", sort=False)["ACC paper"].apply(lambda s: s.notna().all())
    mean.loc[~complete, "ACC paper"] = math.nan  # a paper mean needs every one of our corruptions
    mean["ACC Δ"] = mean["ACC ours"] - mean["ACC paper"]
    spread = [c for c in ("ACC min", "ACC max", "ACC seeds") if c in per_corruption.columns]
    if spread:
        mean = mean.join(per_corruption[per_corruption["corruption"] == "mean"].set_index("method")[spread])
    return mean.reset_index()


def setting_tables(benchmark: Benchmark, records: Mapping[str, Record]) -> dict[str, pd.DataFrame]:
    """One table per setting: a row per method with a record, ``<M> paper``, ``<M> ours`` (the mean
    over the seeds stored), ``<M> Δ`` where the benchmark subtracts, and the spread over seeds."""
    out = {}
    for letter, (experiment, _) in SETTINGS.items():
        found = plan(benchmark, experiment)
        if letter == "c":
            table = closed_set(paper_table(found, dict(records), per_corruption=True, metrics=("acc",)))
            if not benchmark.subtracts:
                table = table.drop(columns="ACC Δ")
        else:
            table = paper_table(found, dict(records))
            table = table[["method"] + [f"{m} {k}" for m in ("ACC", "AUROC", "H") for k in _KINDS
                                        if f"{m} {k}" in table.columns]]
        out[letter] = table.reset_index(drop=True)
    return out


def corruption_table(benchmark: Benchmark, records: Mapping[str, Record]) -> pd.DataFrame:
    """Every method's H per corruption in (a) and (b) and ACC per corruption in (c): the mean over
    seeds with the smallest and largest seed's value."""
    columns: dict[str, tuple[pd.DataFrame, str, str]] = {}
    for letter, (experiment, metric) in SETTINGS.items():
        table = paper_table(plan(benchmark, experiment), dict(records), per_corruption=True,
                            metrics=(metric.lower(),))
        table = table[table["corruption"] != "mean"] if not table.empty else table
        for corruption in dict.fromkeys(table["corruption"]) if not table.empty else ():
            columns[f"({letter}) {metric} {corruption.replace('_', ' ')}"] = (table, metric, corruption)
    methods = [m for m in TABLE_ORDER if any(m in set(t["method"]) for t, _, _ in columns.values())]
    rows = []
    for method in methods:
        row = {"method": method_label(method)}
        for name, (table, metric, corruption) in columns.items():
            hit = table[(table["method"] == method) & (table["corruption"] == corruption)]
            row[name] = "—" if hit.empty else seeds.Spread.of(hit[f"{metric} seeds"].iloc[0]).text()
        rows.append(row)
    return pd.DataFrame(rows)


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """Strings for a Markdown table: ours as the mean with min–max where it has several seeds, Δ
    signed, — where a value is missing."""
    out = pd.DataFrame({"method": [method_label(m) for m in table["method"]]})
    for column in table.columns[1:]:
        if str(column).endswith(_SPREAD):
            continue
        by_seed = table.get(column.removesuffix(" ours") + " seeds") if column.endswith(" ours") else None
        if by_seed is not None:
            out[column] = ["—" if pd.isna(v) else (seeds.Spread.of(per).text() if isinstance(per, dict)
                                                   else f"{v:.1f}") for v, per in zip(table[column], by_seed)]
        else:
            signed = column.endswith("Δ")
            out[column] = ["—" if pd.isna(v) else (f"{v:+.1f}" if signed else f"{v:.1f}") for v in table[column]]
    return out


def values_by_seed(table: pd.DataFrame, metric: str,
                   methods: Sequence[str] = PAPER_ORDER) -> dict[str, dict[int, float]]:
    return seeds.table_values(table, metric, methods)


def standing_line(tables: Mapping[str, pd.DataFrame], other: Mapping[str, pd.DataFrame] | None,
                  other_title: str) -> list[str]:
    """Per setting: STAMP's rank among the paper's ten under each seed (its range), its rank in
    the paper, and Kendall's τ_b of the ten against the paper (and against the other benchmark,
    its mean over seeds), per seed."""
    rows = []
    for letter, (_, metric) in SETTINGS.items():
        table = tables[letter]
        values = values_by_seed(table, metric)
        common = seeds.paired(*values.values()) if len(values) == len(PAPER_ORDER) else ()
        if not common:
            continue
        values = {m: {s: v[s] for s in common} for m, v in values.items()}
        paper = dict(zip(table["method"], table[f"{metric} paper"].astype(float)))
        paper_rank = int(sum(round(paper[m], 1) > round(paper["stamp"], 1) for m in PAPER_ORDER)) + 1
        row = {"setting": TITLES[letter].split(" (Table")[0], "metric": metric,
               "STAMP's rank, ours": f"{seeds.rank_text(seeds.ranks(values, 'stamp'))} ({seeds.seeds_text(common)})",
               "STAMP's rank, paper": str(paper_rank),
               "τ_b vs the paper": seeds.tau_text(seeds.tau_by_seed(values, {m: paper[m] for m in PAPER_ORDER}))}
        if other is not None and not other[letter].empty:
            theirs = dict(zip(other[letter]["method"], other[letter][f"{metric} ours"].astype(float)))
            row[f"τ_b vs the {other_title}"] = seeds.tau_text(seeds.tau_by_seed(values, theirs))
        rows.append(row)
    if not rows:
        return []
    return ["STAMP's place among the paper's ten methods and the order of the ten (Kendall's τ_b per seed that all "
            "ten have, 1 = the same order):", "", to_markdown(pd.DataFrame(rows)), ""]


# ------------------------------------------------------------------------------- variants and streams


def _variant_table(found: plans.Plan, records: Mapping[str, Record]) -> pd.DataFrame:
    rows = paper_table(found, dict(records))
    keep = ["variant"] + [f"{m} {k}" for m in ("ACC", "AUROC", "H") for k in ("paper", "ours")
                          if f"{m} {k}" in rows.columns and (k == "ours" or rows[f"{m} {k}"].notna().any())]
    table = rows[keep].rename(columns={"variant": "method"})
    out = shown(table.assign(method="stamp"))
    out["method"] = [short_variant(v) for v in table["method"]]
    return out.rename(columns={"method": "STAMP"})


def _dashed(table: pd.DataFrame) -> pd.DataFrame:
    return table.astype(object).where(table.notna(), "—")


def variant_sections(benchmark: Benchmark, records: Mapping[str, Record]) -> list[str]:
    """STAMP's variants and the harder streams in setting (a), seed 0, where any is stored: the
    fifteen corruptions, K = 16 vs 1 (Fig. 4), the ablation (Table 5), the weights (Fig. 3), the
    outlier share (Table 6), notebook 13's streams and the realistic protocol (notebook 12)."""
    lines: list[str] = []
    first = {"seeds": "0"}
    fifteen = plan(benchmark, plans.TABLE1, methods="source,bn_stats,tent,stamp", corruptions="all", **first)
    table = paper_table(fifteen, dict(records))
    if not table.empty and benchmark.scale != "builtin":
        columns = ["method"] + [f"{m} {k}" for m in ("ACC", "AUROC", "H") for k in ("paper", "ours", "Δ")
                                if f"{m} {k}" in table.columns]
        lines += ["*(a) over all 15 corruptions, seed 0:*", "", to_markdown(shown(table[columns])), ""]
    for experiment, title in ((plans.AUGMENTATION, "*STAMP with K = 16 views vs K = 1 (Fig. 4; the paper prints no "
                                                   "numbers), (a), seed 0:*"),
                              (plans.ABLATION, "*The ablation (Table 5) in (a), seed 0; the paper's rows are on "
                                               "CIFAR100-C + SVHN-C, so they are shown, not subtracted:*"),
                              (plans.WEIGHTS,
                               "*STAMP's weights (Fig. 3; the paper prints no values) in (a), seed 0:*")):
        found = plan(benchmark, experiment, **first)
        if sum(c.spec.key() in records for c in found.cells) > 1:
            lines += [title, "", to_markdown(_variant_table(found, records)), ""]
    ratios = plan(benchmark, plans.RATIOS, methods="source,bn_stats,tent,eata,stamp", **first)
    by_method: dict[str, dict[str, float]] = {}
    for cell in ratios.cells:
        record = records.get(cell.spec.key())
        if record is not None:
            by_method.setdefault(method_label(cell.spec.method), {})[f"{100 * cell.spec.outlier_ratio:.0f} %"] = \
                round(float(record.mean.h), 1)
    if sum(len(v) for v in by_method.values()) > len(by_method):
        table = pd.DataFrame(by_method).T
        lines += ["*H-score against the outlier share (Table 6 prints STAMP's on CIFAR100-C; ours in (a), seed 0):*",
                  "", to_markdown(_dashed(table).reset_index(names="method")), ""]
    lines += _stream_sections(benchmark, records)
    return lines


def _stream_sections(benchmark: Benchmark, records: Mapping[str, Record]) -> list[str]:
    from stamplib.experiments import reference
    from stamplib.report import realistic, stress

    lines = []
    streams = plan(benchmark, plans.STRESS, methods=",".join((*PAPER_ORDER, "unient")), seeds="0",
                   **reference.STRESS_STREAMS)
    harder = [c for c in streams.cells if c.variant not in {plans.stress_variant(a, v)
                                                             for a, v in plans.PAPER_STREAM.items()}]
    if any(c.spec.key() in records for c in harder):
        table = stress.stress_table(streams, dict(records))
        lines += ["*Harder streams (notebook 13) in (a), H-score, seed 0; — where a record is missing:*", "",
                  to_markdown(_dashed(stress.wide(table, "H").round(1)).reset_index()), "",
                  stress.ranking_changes(table), ""]
    both = plan(benchmark, plans.REALISTIC, seeds="0")
    if any(c.spec.key() in records for c in both.cells if c.variant == plans.REALISTIC_PROTOCOL):
        table = realistic.protocol_table(both, dict(records))
        lines += ["*The realistic online protocol in (a) (notebook 12; C(g) measured in each run on the machine of "
                  "its record's provenance; — where a realistic record is missing):*", "",
                  to_markdown(_dashed(table.drop(columns=["dataset", "outliers"]))), "",
                  realistic.ranking_changes(table), ""]
    return lines


def machines_line(records: Sequence[Record]) -> str:
    """Where records were computed: each kind of device and torch version with its number of cells
    and hours (the records' own ``device``, ``versions`` and ``seconds``)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for record in records:
        where = (str(record.device or "?").split(":")[0], str((record.versions or {}).get("torch", "?")))
        groups.setdefault(where, []).append(float(record.seconds or 0.0))
    return "; ".join(f"{device} with torch {torch} ({len(s)} cell{'s' if len(s) != 1 else ''}, {sum(s) / 3600:.2f} h)"
                     for (device, torch), s in sorted(groups.items()))


# ------------------------------------------------------------------------------- the figure


def _error_bars(table: pd.DataFrame, order: Sequence[str], metric: str) -> np.ndarray | None:
    """Asymmetric error bars from each method's smallest and largest seed's value; None when no
    method has two seeds."""
    if f"{metric} seeds" not in table.columns:
        return None
    rows = table.set_index("method").reindex(order)
    several = [isinstance(v, dict) and len(seeds.present(v)) > 1 for v in rows[f"{metric} seeds"]]
    if not any(several):
        return None
    mean = rows[f"{metric} ours"].to_numpy(float)
    low = np.array([seeds.Spread.of(v).low if k else np.nan for v, k in zip(rows[f"{metric} seeds"], several)])
    high = np.array([seeds.Spread.of(v).high if k else np.nan for v, k in zip(rows[f"{metric} seeds"], several)])
    return np.vstack([mean - low, high - mean])


def networks_a(benchmark: Benchmark, records: Mapping[str, Record]) -> tuple[Design,
                                                                             dict[str, dict[int, float]]] | None:
    """Setting (a)'s H of the paper's ten methods per source network (its mean over the corruptions),
    on the first design of ``benchmark`` that varies networks and has every one of their cells; None
    where none has."""
    from stamplib.evidence import benchmarks as designs
    from stamplib.evidence.ledger import Arm

    for design in (d for d in benchmark.designs if d.varies_networks):
        values: dict[str, dict[int, float]] = {}
        for method in PAPER_ORDER:
            for replicate in design.replicates:
                spec = designs.spec(Arm(plans.TABLE1.notebook, method), design, replicate)
                record = records.get(spec.key()) if spec is not None else None
                if record is not None:
                    values.setdefault(method, {})[replicate.network] = float(record.mean.scores["h"])
        if len(values) == len(PAPER_ORDER) and all(len(v) == len(design.replicates) for v in values.values()):
            return design, values
    return None


def headline_figure(benchmark: Benchmark, ours: Mapping[str, pd.DataFrame],
                    other: Mapping[str, pd.DataFrame] | None = None, other_title: str = "",
                    examples: Sequence[tuple[str, Any, Any]] = (),
                    per_network: tuple[Design, dict[str, dict[int, float]]] | None = None) -> plt.Figure:
    """H of every method in (a) and (b) and accuracy in (c): bars for this benchmark (the mean over
    its seeds, min–max error bars; STAMP red), dots for ``other`` (another benchmark), crosses for
    the paper; above them, where given, a strip of the stream's photographs (outliers framed red).
    With ``per_network`` (:func:`networks_a`), panel (a)'s bars are the paper's ten methods' mean
    over the source networks, with one small dot per network."""
    from stamplib import data
    from stamplib.report.walkthrough import draw_stream_image

    strip = sum(len(images) for _, images, _ in examples)
    fig = plt.figure(figsize=(17, 6.6 if strip else 4.8))
    grid = fig.add_gridspec(2 if strip else 1, 3, height_ratios=(1.0, 3.4) if strip else None)
    if strip:
        groups = grid[0, :].subgridspec(1, len(examples), wspace=0.12)
        names = data.dataset("cifar10_builtin").class_names
        for g, (corruption, images, labels) in enumerate(examples):
            holder = fig.add_subplot(groups[0, g])
            holder.axis("off")
            holder.set_title(corruption.replace("_", " "), fontsize=10)
            cells = groups[0, g].subgridspec(1, len(images), wspace=0.06)
            for k, (image, label) in enumerate(zip(images, labels)):
                ax = fig.add_subplot(cells[0, k])
                ax.set_xlabel(draw_stream_image(ax, image, label, names, frame_width=2.5), fontsize=8)
    axes = [fig.add_subplot(grid[-1, i]) for i in range(3)]
    for ax, (letter, (_, metric)) in zip(axes, SETTINGS.items()):
        table = ours[letter]
        if table.empty or not table[f"{metric} ours"].notna().any():
            ax.text(0.5, 0.5, "no records yet", ha="center", va="center", transform=ax.transAxes)
            continue
        networks = per_network if letter == "a" else None
        order = [m for m in TABLE_ORDER if m in set(table["method"]) and (networks is None or m in networks[1])]
        values = table.set_index("method").reindex(order)
        x = np.arange(len(order))
        colours = [STAMP if m == "stamp" else (PAPER_METHODS_BAR if m in PAPER_ORDER else NEWER_METHODS_BAR)
                   for m in order]
        if networks is not None:
            design, by_method = networks
            ax.bar(x, [np.mean(list(by_method[m].values())) for m in order], color=colours, alpha=0.85,
                   label=f"{benchmark.title}: (a) the mean over {len(design.replicates)} source networks, one dot "
                         "each; (b), (c) network 0, the mean over seeds, min–max")
            for i, m in enumerate(order):
                ax.plot(np.full(len(by_method[m]), x[i]) + 0.18, list(by_method[m].values()), "o", color="0.35",
                        markersize=3, markerfacecolor="white")
        else:
            ax.bar(x, values[f"{metric} ours"], color=colours, alpha=0.85,
                   label=f"{benchmark.title} (mean over seeds, min–max)", yerr=_error_bars(table, order, metric),
                   error_kw={"ecolor": "0.2", "elinewidth": 1.2, "capsize": 3})
        theirs = (other or {}).get(letter, pd.DataFrame())
        if not theirs.empty:
            r = theirs.set_index("method").reindex(order)
            ax.errorbar(x, r[f"{metric} ours"], yerr=_error_bars(theirs, order, metric), fmt="D", color="black",
                        markersize=4, elinewidth=1, capsize=2, label=f"{other_title} (network 0)")
        ax.plot(x, values[f"{metric} paper"], "x", color="tab:orange", markersize=8, mew=2, label="paper")
        ax.set_xticks(x, [method_label(m) for m in order], rotation=60, ha="right")
        ax.set(title=TITLES[letter].split(" (Table")[0], ylabel=f"{'H-score' if metric == 'H' else 'accuracy'} (%)",
               ylim=(0, 100))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.02), ncols=3, frameon=False)
    over = (f"\n(a): the paper's ten methods, the mean over {len(per_network[0].replicates)} source networks "
            f"({per_network[0].corruptions_text()}), a white dot per network; (b), (c): network 0"
            if per_network is not None else "")
    fig.suptitle(f"{benchmark.title[0].upper()}{benchmark.title[1:]}: {benchmark.figure_caption}{over}\n"
                 "bars: STAMP red, the paper's other methods blue, newer methods grey; crosses: the paper")
    fig.tight_layout()
    return fig


def stream_examples(benchmark: Benchmark, per_corruption: int = 4) -> list[tuple[str, Any, Any]]:
    """The first ``per_corruption`` images of setting (a)'s stream per corruption of the benchmark's
    profile, one of them an outlier (only where the benchmark's data ship with the package)."""
    import torch

    from stamplib.evaluation.assembly import build_stream

    if benchmark.scale != "builtin":
        return []
    spec = plan(benchmark, plans.TABLE1, methods="stamp", seeds="0").cells[0].spec
    out = []
    for corruption in spec.corruptions:
        stream = build_stream(spec, corruption)
        first = torch.cat([torch.nonzero(~stream.is_outlier)[: per_corruption - 1, 0],
                           torch.nonzero(stream.is_outlier)[:1, 0]])
        out.append((corruption, stream.images[first], stream.labels[first]))
    return out


def write_figure(benchmark: Benchmark, ours: Mapping[str, pd.DataFrame], directory: Path,
                 other: Mapping[str, pd.DataFrame] | None = None, other_title: str = "",
                 records: Mapping[str, Record] | None = None) -> list[Path]:
    """The headline figure as ``<directory>/<benchmark.figure>.png`` and ``.svg`` (``records``: the
    benchmark's, for panel (a) over its source networks, :func:`networks_a`)."""
    from stamplib.report.figures import save_figure, set_theme

    set_theme()
    figure = headline_figure(benchmark, ours, other, other_title, stream_examples(benchmark),
                             networks_a(benchmark, records) if records is not None else None)
    return save_figure(figure, benchmark.figure, directory)


# ------------------------------------------------------------------------------- STAMP's outlier handling


def traced_design(benchmark: Benchmark) -> Design | None:
    """The design whose networks STAMP's traces are shown over: the first that varies networks."""
    return next((d for d in benchmark.designs if d.varies_networks), None)


def trace_table(benchmark: Benchmark, records: Mapping[str, Record], arms: Sequence[Any] = (),
                fallback: Mapping[str, Sequence[Record]] | None = None) -> pd.DataFrame:
    """Per network of :func:`traced_design`: STAMP's shares in setting (a) pooled over its stream
    (:func:`stamplib.evidence.factors.trace_shares`), BN Stats' accuracy from its trace, and each
    counterfactual arm's lead in H (``arms``: their verdicts). ``fallback``: the same cells'
    records from another CPU kind, for the columns a committed trace predates (``borrowed``)."""
    from stamplib.evidence import factors

    design = traced_design(benchmark)
    if design is None:
        return pd.DataFrame()
    stamp = factors.network_shares(design, records, fallback=fallback)
    bn = factors.network_shares(design, records, factors.BN_STATS_A, fallback=fallback)
    rows = []
    for replicate, shares in stamp.items():
        row = {"network": replicate.network, "borrowed": shares.borrowed,
               "Noise among what STAMP adapts on": 100 * shares.adapted,
               "Noise in its memory": 100 * shares.memory, "filter precision on Noise": 100 * shares.precision,
               "filter recall on Noise": 100 * shares.recall, "STAMP ACC": 100 * shares.accuracy,
               "BN Stats ACC": 100 * bn[replicate].accuracy if replicate in bn else math.nan}
        for verdict in arms:
            label = verdict.claim.words.removeprefix("STAMP with ").split(" has the best")[0].split(" (")[0]
            row[f"lead in H, {label}"] = verdict.margins.get(replicate, math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def trace_figure(benchmark: Benchmark, records: Mapping[str, Record], other: Benchmark | None = None,
                 other_records: Mapping[str, Record] | None = None,
                 fallback: Mapping[str, Sequence[Record]] | None = None) -> plt.Figure | None:
    """STAMP in setting (a) over the stream, one line per network of :func:`traced_design` (pooled
    over the corruptions at each batch; the x axis the share of a corruption's stream seen), the
    ``other`` benchmark's networks dashed: left, the share of Noise images among its memory's
    items; right, its accuracy on the known classes minus BN Stats' (where the traces have it;
    ``fallback``: the same cells' records from another CPU kind). None without traces."""
    from stamplib.evidence import factors

    memory, accuracy = [], []
    for bench, found_records, style in ((benchmark, records, "-"), (other, other_records, "--")):
        design = traced_design(bench) if bench is not None else None
        if design is None or found_records is None:
            continue
        extra = fallback if bench is benchmark else None
        for replicate, curve in factors.network_curves(design, found_records).items():
            memory.append((bench, replicate, curve, style))
        stamp = factors.network_curves(design, found_records, part="n_correct", whole="n_known", fallback=extra)
        bn = factors.network_curves(design, found_records, factors.BN_STATS_A, "n_correct", "n_known", extra)
        for replicate in stamp.keys() & bn.keys():
            if len(stamp[replicate]) == len(bn[replicate]):
                accuracy.append((bench, replicate, stamp[replicate] - bn[replicate], style))
    if not memory:
        return None
    fig, axes = plt.subplots(1, 2 if accuracy else 1, figsize=(13.0 if accuracy else 7.5, 4.2), squeeze=False)
    panels = [(axes[0, 0], memory, "Noise images in STAMP's memory (%)", "its memory")]
    if accuracy:
        panels.append((axes[0, 1], accuracy, "STAMP's accuracy − BN Stats' (points)", "its accuracy beside BN Stats'"))
    # One colour per network across both panels: a panel that lacks a network's line (no accuracy columns
    # in its trace) would otherwise shift every later line to the next colour of the cycle.
    networks = sorted({(style, replicate) for _, replicate, _, style in memory + accuracy})
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {network: cycle[i % len(cycle)] for i, network in enumerate(networks)}
    for ax, lines, label, what in panels:
        for bench, replicate, curve, style in sorted(lines, key=lambda item: (item[3], item[1])):
            x = (np.arange(len(curve)) + 1) / len(curve)
            ax.plot(x, 100 * curve, style, lw=1.6, color=colour[style, replicate],
                    label=f"{bench.title}, network {replicate.network}")
        ax.set(xlabel="share of the corruption's stream seen", ylabel=label, xlim=(0, 1),
               title=f"STAMP, setting (a): {what}, the mean over the 15 corruptions")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7, ncols=2, frameon=False)
    axes[0, 0].set_ylim(bottom=0)
    if accuracy:
        axes[0, 1].axhline(0.0, color="0.4", lw=0.8)
    fig.tight_layout()
    return fig
