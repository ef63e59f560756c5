"""The built-in CIFAR-10 benchmark's quick run against the paper and the ResNet-18 reference run:
the generated block of ``docs/builtin_benchmark.md`` and the README's first figure,
``figures/builtin_benchmark.png``, both from the quick run's records in a results store
(:mod:`stamplib.evidence.pages` writes them).

Three settings, as in the reference run (:mod:`stamplib.evidence.reference_page`): (a) Table 1's
CIFAR-10-C with Noise outliers (notebook 02), (b) Table 3's 8:2 class split (notebook 04), (c)
Table 4's closed set (notebook 05). The built-in benchmark is another benchmark than the paper's
(2,000 photographs, a compact network), so what is compared is the order of the paper's ten
methods (Kendall's τ_b) and STAMP's place, never a difference of numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from stamplib import data
from stamplib.evaluation.assembly import build_stream
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import reference_page
from stamplib.evidence.judge import Verdict, ours_text
from stamplib.evidence.reference_page import closed_set
from stamplib.experiments import plans
from stamplib.methods import PAPER_ORDER, TABLE_ORDER
from stamplib.report import seeds
from stamplib.report.palette import NEWER_METHODS_BAR, PAPER_METHODS_BAR, STAMP
from stamplib.report.paper import method_label
from stamplib.report.reproduce import paper_table
from stamplib.report.tables import to_markdown
from stamplib.report.walkthrough import draw_stream_image

SETTINGS = {"a": (plans.TABLE1, "H"), "b": (plans.CLASS_SPLIT, "H"), "c": (plans.CLOSED_SET, "ACC")}
TITLES = {"a": "(a) + Noise outliers", "b": "(b) class split, ship and truck as outliers", "c": "(c) closed set"}
#: The generated block of :data:`PAGE` (the page's analysis around it is written by hand).
BLOCK = "builtin-benchmark"
FIGURE = "builtin_benchmark"  # figures/builtin_benchmark.png, committed as the README's first figure
PAGE = Path("docs") / "builtin_benchmark.md"
#: The benchmark's two source models, whose cards the page shows.
SOURCE_MODELS = ("cifar10_builtin", "cifar10_builtin_8_2")


def model_cards() -> list[dict[str, Any]]:
    """The cards of :data:`SOURCE_MODELS` (shipped with the package)."""
    from stamplib.models import source_model_cards

    return list(source_model_cards(SOURCE_MODELS))


#: The columns a setting's table keeps per metric: ours (the mean over seeds), the paper's, and
#: the spread over seeds (min, max, and the value under each seed).
_KINDS = ("ours", "paper", "min", "max", "seeds")


def tables(store: ResultsStore, profile: str = "quick") -> dict[str, pd.DataFrame]:
    """One table per setting from ``store``'s quick-profile records on the built-in benchmark:
    a row per method that has a record, ``<M> ours`` (the mean over the seeds stored),
    ``<M> paper`` and the spread over seeds (``<M> min``, ``<M> max``, ``<M> seeds``: each
    seed's value). ACC only in (c), the mean over the profile's corruptions beside the paper's
    mean over the same corruptions."""
    records = store.records_by_key()
    out = {}
    for letter, (experiment, _) in SETTINGS.items():
        plan = experiment.plan(profile=profile)
        if letter == "c":
            per = paper_table(plan, records, per_corruption=True, metrics=("acc",))
            # Another benchmark: the paper's mean is a reference, no difference is shown.
            table = closed_set(per).drop(columns="ACC Δ")
        else:
            table = paper_table(plan, records)
            keep = ["method"] + [f"{m} {k}" for m in ("ACC", "AUROC", "H") for k in _KINDS]
            table = table[[c for c in keep if c in table.columns]]
        out[letter] = table.reset_index(drop=True)
    return out


def corruption_tables(store: ResultsStore, profile: str = "quick") -> dict[str, pd.DataFrame]:
    """Per setting, the setting's metric (H in (a) and (b), ACC in (c)) per method and corruption:
    :func:`~stamplib.report.reproduce.paper_table` rows per corruption, mean over seeds with
    the spread."""
    records = store.records_by_key()
    out = {}
    for letter, (experiment, metric) in SETTINGS.items():
        plan = experiment.plan(profile=profile)
        table = paper_table(plan, records, per_corruption=True, metrics=(metric.lower(),))
        out[letter] = table[table["corruption"] != "mean"].reset_index(drop=True) if not table.empty else table
    return out


def by_seed(table: pd.DataFrame, metric: str, methods: Sequence[str] = PAPER_ORDER) -> dict[str, dict[int, float]]:
    """``metric``'s value under each seed of each of ``methods`` that has a row
    (:func:`stamplib.report.seeds.table_values`)."""
    return seeds.table_values(table, metric, methods)


def spread(table: pd.DataFrame, method: str, metric: str, over: Sequence[int] | None = None) -> seeds.Spread:
    """``method``'s ``metric`` over the seeds stored (or those of ``over``)."""
    found = by_seed(table, metric, (method,)).get(method, {})
    return seeds.Spread.of({s: v for s, v in found.items() if over is None or s in over})


@dataclass(frozen=True)
class Standing:
    """Where STAMP stands among the paper's ten in one setting, seed by seed (paired): its rank
    under each seed that all ten have, whether it beats the best other method under every one
    of them (:func:`stamplib.report.seeds.leads`), and the numbers behind it."""

    letter: str
    metric: str
    seeds: tuple[int, ...]  # the paired seeds: every one of the ten has a record under each
    ranks: dict[int, int]
    decision: seeds.Decision
    best_other: str  # the best other method by its mean over the paired seeds
    best_by_seed: dict[int, tuple[str, float]]
    paper_rank: int | None

    @property
    def rank_text(self) -> str:
        return seeds.rank_text(self.ranks)


def standing(ours: Mapping[str, pd.DataFrame], letter: str, method: str = "stamp") -> Standing | None:
    """STAMP's :class:`Standing` in setting ``letter``; None until all ten have a record under
    one common seed."""
    _, metric = SETTINGS[letter]
    table = ours[letter]
    values = by_seed(table, metric)
    paired = seeds.paired(*values.values())
    if len(values) < len(PAPER_ORDER) or not paired:
        return None
    values = {m: {s: v[s] for s in paired} for m, v in values.items()}
    return Standing(letter, metric, paired, seeds.ranks(values, method), seeds.leads(values, method),
                    seeds.best_by_mean(values, method),
                    seeds.best_other(values, method), _paper_rank(table, metric, method))


def _paper_rank(table: pd.DataFrame, metric: str, method: str) -> int | None:
    rows = table[table["method"].isin(PAPER_ORDER)].set_index("method")[f"{metric} paper"].dropna()
    if method not in rows.index:
        return None
    values = rows.round(1)
    return int((values > values[method]).sum()) + 1


def _tau(ours: pd.DataFrame, other: Mapping[str, float], metric: str) -> tuple[dict[int, float], int]:
    """Kendall's τ_b between ``other``'s order of the paper's ten methods (one number each) and
    ours under each seed, over the methods both have; and how many took part."""
    mine = by_seed(ours, metric)
    both = {m: float(v) for m, v in other.items() if m in mine and m in PAPER_ORDER and not np.isnan(float(v))}
    if len(both) < 2:
        return {}, len(both)
    return seeds.tau_by_seed(mine, both), len(both)


def _reference_values(ref: pd.DataFrame, metric: str) -> dict[str, float]:
    """The reference run's number per method as its tables show it (the mean over its seeds)."""
    if ref.empty:
        return {}
    return dict(zip(ref["method"], ref[f"{metric} ours"].astype(float)))


def _rank_with_seeds(place: Standing | None) -> str:
    return "—" if place is None else f"{place.rank_text} ({seeds.seeds_text(place.seeds)})"


def agreement(ours: Mapping[str, pd.DataFrame], reference_tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per setting: Kendall's τ_b of the paper's ten methods under each of our seeds, against the
    paper and against the ResNet-18 reference run, and STAMP's rank in each of the three (ours
    and the reference run's as the range over their paired seeds)."""
    rows = []
    for letter, (_, metric) in SETTINGS.items():
        table, ref = ours[letter], reference_tables.get(letter, pd.DataFrame())
        if table.empty:
            continue
        paper = dict(zip(table["method"], table[f"{metric} paper"].astype(float)))
        tau_paper, n_paper = _tau(table, paper, metric)
        tau_ref, n_ref = _tau(table, _reference_values(ref, metric), metric)
        own, theirs = standing(ours, letter), (standing(reference_tables, letter) if not ref.empty else None)
        rows.append({
            "setting": TITLES[letter], "metric": metric, "methods": n_paper,
            "τ_b vs paper": seeds.tau_text(tau_paper), "τ_b vs reference run": seeds.tau_text(tau_ref),
            "methods (reference)": n_ref, "STAMP: ours": _rank_with_seeds(own),
            "STAMP: paper": "—" if own is None or own.paper_rank is None else str(own.paper_rank),
            "STAMP: reference run": _rank_with_seeds(theirs),
        })
    return pd.DataFrame(rows)


def _seeds_of(ours: Mapping[str, pd.DataFrame]) -> list[int]:
    """Every seed any record of the three settings has."""
    found: set[int] = set()
    for letter, (_, metric) in SETTINGS.items():
        for values in by_seed(ours[letter], metric, TABLE_ORDER).values():
            found |= set(values)
    return sorted(found)


def method_table(ours: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """All methods: ACC, AUROC and H in (a) and (b), ACC in (c), ours on the built-in benchmark,
    each the mean over seeds with the smallest and largest seed's value."""
    out = []
    for method in [m for m in TABLE_ORDER if any(m in set(t["method"]) for t in ours.values() if not t.empty)]:
        row = {"method": method_label(method)}
        for letter, metrics in (("a", ("ACC", "AUROC", "H")), ("b", ("ACC", "AUROC", "H")), ("c", ("ACC",))):
            for metric in metrics:
                row[f"({letter}) {metric}"] = spread(ours[letter], method, metric).text()
        out.append(row)
    return pd.DataFrame(out)


def corruption_table(per_corruption: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Every method's H per corruption in (a) and (b) and ACC per corruption in (c): the mean over
    seeds with the smallest and largest seed's value."""
    columns: dict[str, tuple[str, str, str]] = {}
    for letter, (_, metric) in SETTINGS.items():
        table = per_corruption[letter]
        for corruption in dict.fromkeys(table["corruption"]) if not table.empty else ():
            columns[f"({letter}) {metric} {corruption.replace('_', ' ')}"] = (letter, metric, corruption)
    methods = [m for m in TABLE_ORDER if any(m in set(t["method"]) for t in per_corruption.values() if not t.empty)]
    out = []
    for method in methods:
        row = {"method": method_label(method)}
        for name, (letter, metric, corruption) in columns.items():
            table = per_corruption[letter]
            hit = table[(table["method"] == method) & (table["corruption"] == corruption)]
            row[name] = "—" if hit.empty else seeds.Spread.of(hit[f"{metric} seeds"].iloc[0]).text()
        out.append(row)
    return pd.DataFrame(out)


#: The ledger's claims that STAMP leads the paper's ten in (a), (b) and (c) (docs/claims.md).
LEADS = {"a": "a_best_h", "b": "b_best_h", "c": "c_best_acc"}


def lead_verdicts(verdicts: Sequence[Verdict]) -> dict[str, Verdict]:
    """Of the built-in benchmark's verdicts, STAMP's leads per setting (those with a reading)."""
    by_key = {v.claim.key: v for v in verdicts}
    return {letter: by_key[key] for letter, key in LEADS.items() if key in by_key and by_key[key].margins}


def verdicts(ours: Mapping[str, pd.DataFrame], leads: Mapping[str, Verdict]) -> list[str]:
    """Per setting, the ledger's verdict that STAMP leads the paper's ten methods (decided on
    paired seeds over the benchmark's seeds), with its numbers, and STAMP's rank under the
    headline seeds the tables show."""
    lines = []
    for letter, (_, metric) in SETTINGS.items():
        verdict = leads.get(letter)
        if verdict is None:
            continue
        place = standing(ours, letter)
        rank = f" STAMP ranks {place.rank_text} by {metric} over {seeds.seeds_text(place.seeds)}." if place else ""
        lines.append(f"- {TITLES[letter]}, *{verdict.claim.words}* ({verdict.evidence()}): **{verdict.label}**. "
                     f"{ours_text(verdict)}.{rank}")
    return lines


def _models_line(cards: Sequence[Mapping[str, Any]]) -> str:
    """``cards``: :func:`stamplib.models.source_model_card` of each source network."""
    if not cards:
        return ""
    return " Source models: " + "; ".join(
        f"`{c['checkpoint']}` ({c['parameters'] / 1e6:.2f} M parameters) {c['clean test accuracy (%)']:.1f} % on "
        f"{c['test images']:,} JPEG test photographs, {c['epochs']} epochs in {c['training seconds'] / 60:.0f} min "
        f"on 2 CPU cores" for c in cards) + "."


def block(store: ResultsStore, reference_store: ResultsStore, judged: Sequence[Verdict] = (),
          model_cards: Sequence[Mapping[str, Any]] = ()) -> str:
    """The generated part of ``docs/builtin_benchmark.md`` from the quick run's ``store`` and the
    reference run's ``reference_store`` (``judged``: the ledger's verdicts on the built-in
    benchmark; ``model_cards``: the source networks' :func:`stamplib.models.source_model_card`,
    named in its first paragraph)."""
    ours = tables(store)
    ref = reference_page.tables(reference_store)
    found = sum(len(seeds.present(v)) for letter, (_, metric) in SETTINGS.items()
                for v in by_seed(ours[letter], metric, TABLE_ORDER).values())
    seen = _seeds_of(ours)
    if not found:
        return "\nNo quick-run records yet: `./run_all.sh` computes them.\n"
    leading = lead_verdicts(judged)
    lines = ["", summary(ours, leading), "", f"From the quick run's records ({found} records over {seeds.seeds_text(seen)}; "
             "`./run_all.sh`): mean over gaussian noise, defocus blur and contrast at severity 5, 1,024 known-class "
             "photographs + 256 outliers per corruption." + _models_line(model_cards), ""]
    if len(seen) > 1:
        lines += [f"Every number of ours is the mean over {seeds.seeds_text(seen)} with, in brackets, the smallest "
                  "and the largest value of a single seed (min–max). A seed fixes the stream's order, the "
                  "corruption draws and every random choice of the methods, so under one seed all methods saw the "
                  "same stream: the comparisons below are made seed by seed.", ""]
    lines += ["ACC, AUROC and H in (a) and (b), ACC in (c):", "", to_markdown(method_table(ours)), ""]
    lines += ["Per corruption, H in (a) and (b) and ACC in (c):", "",
              to_markdown(corruption_table(corruption_tables(store))), ""]
    agree = agreement(ours, ref)
    if not agree.empty:
        lines += ["The order of the paper's ten methods (Kendall's τ_b per seed of ours and its range, 1 = the same "
                  "order) and STAMP's rank among them (1 = best; ours and the reference run's: the range over their "
                  "seeds that all ten have): on the built-in benchmark, in the paper, and in the ResNet-18 reference "
                  "run on the JPEG CIFAR-10 (`results/reference`, its numbers the mean over its seeds):", "",
                  to_markdown(agree), ""]
    leads = verdicts(ours, leading)
    if leads:
        lines += ["Does STAMP lead the paper's ten? The ledger's verdicts (how a verdict is reached, and every other "
                  "claim: [`docs/claims.md`](claims.md#how-a-verdict-is-reached)):", ""] + leads
    lines += [""]
    return "\n".join(lines)


_SUMMARY_WHAT = {"a": "by H with Noise outliers", "b": "by H in the class split", "c": "by closed-set accuracy"}


def summary(ours: Mapping[str, pd.DataFrame], leads: Mapping[str, Verdict]) -> str:
    """The page's sentences on STAMP's place among the paper's ten in (a), (b) and (c): its
    rank over the headline seeds, its number and the best other's (mean, min–max), and the
    ledger's verdict over the benchmark's seeds."""
    parts, answers = [], []
    for letter, (_, metric) in SETTINGS.items():
        place = standing(ours, letter)
        if place is None:
            continue
        table = ours[letter]
        own, other = spread(table, "stamp", metric, place.seeds), spread(table, place.best_other, metric, place.seeds)
        parts.append(f"{place.rank_text} {_SUMMARY_WHAT[letter]} ({own.text()}; best other "
                     f"{method_label(place.best_other)} {other.text()})")
        if letter in leads:
            answers.append(f"{_SUMMARY_WHAT[letter].removeprefix('by ')} *{leads[letter].label}* "
                           f"({leads[letter].design.title})")
    if not parts:
        return "No quick-run records yet."
    seen = sorted({s for letter in SETTINGS if (p := standing(ours, letter)) is not None for s in p.seeds})
    listed = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    over = (f" over {seeds.seeds_text(seen)} (mean, with the smallest and largest seed's value)"
            if len(seen) > 1 else f" ({seeds.seeds_text(seen)})")
    text = f"Among the paper's ten methods, STAMP ranks {listed}{over}."
    if answers:
        text += (" Does it beat the best other method? The ledger's verdicts ([`docs/claims.md`](claims.md)): by "
                 + ", by ".join(answers) + ".")
    return text


def stream_examples(per_corruption: int = 4, profile: str = "quick") -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """The first ``per_corruption`` images of setting (a)'s stream per corruption of the
    profile, with their labels (−1 = outlier): what the methods saw."""
    spec = SETTINGS["a"][0].plan(profile=profile, methods="stamp").cells[0].spec
    out = []
    for corruption in spec.corruptions:
        stream = build_stream(spec, corruption)
        # Show one Noise outlier among the photographs, as the stream mixes them.
        first = torch.cat([torch.nonzero(~stream.is_outlier)[: per_corruption - 1, 0],
                           torch.nonzero(stream.is_outlier)[:1, 0]])
        out.append((corruption, stream.images[first], stream.labels[first]))
    return out


def _error_bars(table: pd.DataFrame, order: Sequence[str], metric: str) -> np.ndarray | None:
    """Asymmetric error bars (below, above the mean) from each method's smallest and largest
    seed's value; None when no method has two seeds."""
    if f"{metric} min" not in table.columns:
        return None
    rows = table.set_index("method").reindex(order)
    several = [len(seeds.present(v)) > 1 if isinstance(v, dict) else False for v in rows[f"{metric} seeds"]]
    if not any(several):
        return None
    mean = rows[f"{metric} ours"].to_numpy(float)
    below = np.where(several, mean - rows[f"{metric} min"].to_numpy(float), np.nan)
    above = np.where(several, rows[f"{metric} max"].to_numpy(float) - mean, np.nan)
    return np.vstack([below, above])


def headline_figure(ours: Mapping[str, pd.DataFrame], ref: Mapping[str, pd.DataFrame],
                    examples: Sequence[tuple[str, torch.Tensor, torch.Tensor]] = ()) -> plt.Figure:
    """A strip of the stream's photographs (``examples``, from :func:`stream_examples`; outliers
    framed in red), then H of every method in (a) and (b): bars for the built-in benchmark (the
    mean over its seeds, error bars from the smallest to the largest seed's value; STAMP in
    red), dots for the ResNet-18 reference run (with its seeds' range where it has several),
    crosses for the paper."""
    strip = sum(len(images) for _, images, _ in examples)
    fig = plt.figure(figsize=(13, 6.4 if strip else 4.6))
    grid = fig.add_gridspec(2 if strip else 1, 2, height_ratios=(1.0, 3.4) if strip else None)
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
    axes = [fig.add_subplot(grid[-1, i]) for i in range(2)]
    axes[1].sharey(axes[0])
    seen = _seeds_of(ours)
    over = f"mean over {seeds.seeds_text(seen)}, min–max" if len(seen) > 1 else seeds.seeds_text(seen)
    for ax, letter in zip(axes, ("a", "b")):
        table = ours[letter]
        if table.empty:
            ax.text(0.5, 0.5, "no records yet", ha="center", va="center", transform=ax.transAxes)
            continue
        order = [m for m in TABLE_ORDER if m in set(table["method"])]
        values = table.set_index("method").reindex(order)
        x = np.arange(len(order))
        colors = [STAMP if m == "stamp" else (PAPER_METHODS_BAR if m in PAPER_ORDER else NEWER_METHODS_BAR)
                  for m in order]
        ax.bar(x, values["H ours"], color=colors, alpha=0.85, label=f"built-in benchmark (quick run; {over})",
               yerr=_error_bars(table, order, "H"), error_kw={"ecolor": "0.2", "elinewidth": 1.2, "capsize": 3})
        other = ref.get(letter, pd.DataFrame())
        if not other.empty:
            r = other.set_index("method").reindex(order)
            ax.errorbar(x, r["H ours"], yerr=_error_bars(other, order, "H"), fmt="o", color="black", elinewidth=1,
                        capsize=2, label="ResNet-18 reference run (JPEG CIFAR-10)")
        ax.plot(x, values["H paper"], "x", color="tab:orange", markersize=8, mew=2, label="paper")
        ax.set_xticks(x, [method_label(m) for m in order], rotation=60, ha="right")
        ax.set(title=TITLES[letter], ylabel="H-score (%)", ylim=(0, 100))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.02), ncols=3, frameon=False)
    fig.suptitle("Built-in CIFAR-10 benchmark, quick profile: 1,024 real photographs per corruption (3 corruptions, "
                 "severity 5),\na compact ResNet (0.3 M parameters); bars: STAMP red, the paper's other methods blue, "
                 "newer methods grey")
    fig.tight_layout()
    return fig


def write_figure(store: ResultsStore, reference_store: ResultsStore, directory: str | Path, examples: bool = True
                 ) -> list[Path]:
    """The headline figure of ``store``'s quick-run records beside the reference run's, as
    ``<directory>/builtin_benchmark.png`` and ``.svg`` (with a strip of the stream's photographs
    unless ``examples`` is off)."""
    from stamplib.report.figures import save_figure, set_theme

    set_theme()
    figure = headline_figure(tables(store), reference_page.tables(reference_store),
                             stream_examples() if examples else ())
    return save_figure(figure, FIGURE, directory)
