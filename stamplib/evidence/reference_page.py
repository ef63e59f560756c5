"""The reference run on real images, as ``docs/reference_run.md`` shows it: three tables (paper |
ours | Δ), the paper's claims checked one by one, STAMP's seed spread, every table of every
setting, and the headline figure — all computed from the committed records of
``results/reference``, so the page can be regenerated (:mod:`stamplib.evidence.pages`) and a
test can check that it equals the records.

The three settings are those of :mod:`stamplib.experiments.reference`: (a) Table 1's CIFAR-10-C
with Noise outliers, (b) Table 3's 8:2 class split, (c) Table 4's closed set. The paper averages
15 corruptions of the official CIFAR-10-C; ours are three corruptions of our CIFAR-10-C made
from the JPEG test images, so Δ mixes data, model and size differences. For the closed set the
paper prints every corruption, so its column there is the mean over the same three.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from stamplib.evaluation.record import Mean, Record
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import judge as claims_page
from stamplib.experiments import plans, reference
from stamplib.methods import PAPER_ORDER, TABLE_ORDER
from stamplib.report import realistic, seeds
from stamplib.report.paper import method_label
from stamplib.report.reproduce import paper_table, short_variant
from stamplib.report.tables import to_markdown

#: The settings, keyed by the letter the README and the issue use.
SETTINGS = reference.SETTING_EXPERIMENTS
SETTING_TITLES = {
    "a": "(a) CIFAR-10-C + Noise outliers (Table 1a, Noise column)",
    "b": "(b) CIFAR-10-C, classes 8–9 as outliers (Table 3, 8:2)",
    "c": "(c) closed set, no outliers (Table 4a)",
}
FIGURE = "reference_run"  # figures/reference_run.png, committed beside the page
PAGE = Path("docs") / "reference_run.md"


def _records(store: ResultsStore) -> dict[str, Record]:
    return store.records_by_key()


#: The seeds a reference cell may have: seed 0 for every cell, 1 and 2 for setting (a)'s
#: optional cells (``reference compute --cells seeds``) as they are computed.
SEEDS = ",".join(map(str, reference.SPREAD_SEEDS))
#: Per metric: the paper's, ours (the mean over the seeds stored), Δ, and the spread over seeds.
_KINDS = ("paper", "ours", "Δ", "min", "max", "seeds")


def tables(store: ResultsStore) -> dict[str, pd.DataFrame]:
    """One table per setting: a row per method with a record, columns ``<M> paper``, ``<M> ours``
    (the mean over the seeds stored: seed 0, and 1 and 2 where computed), ``<M> Δ`` and the
    spread over seeds (``<M> min``, ``<M> max``, ``<M> seeds``) for ACC, AUROC, H (ACC only for
    the closed set)."""
    records = _records(store)
    out = {}
    for letter, experiment in SETTINGS.items():
        plan = reference.plan(experiment, seeds=SEEDS)
        if letter == "c":
            out[letter] = closed_set(paper_table(plan, records, per_corruption=True))
        else:
            table = paper_table(plan, records)
            out[letter] = table[["method"] + [f"{m} {k}" for m in ("ACC", "AUROC", "H")
                                              for k in _KINDS if f"{m} {k}" in table.columns]].reset_index(drop=True)
    return out


def closed_set(per_corruption: pd.DataFrame) -> pd.DataFrame:
    """Mean ACC over our corruptions, and the paper's mean over the same corruptions; the spread
    over seeds of our mean (``ACC min``, ``ACC max``, ``ACC seeds``) where the table has it."""
    rows = per_corruption[per_corruption["corruption"] != "mean"]
    if rows.empty:
        return pd.DataFrame(columns=["method", "ACC paper", "ACC ours", "ACC Δ"])
    mean = rows.groupby("method", sort=False)[["ACC paper", "ACC ours"]].mean()
    # A paper mean needs every one of our corruptions (the newer methods have none).
    complete = rows.groupby("method", sort=False)["ACC paper"].apply(lambda s: s.notna().all())
    mean.loc[~complete, "ACC paper"] = math.nan
    mean["ACC Δ"] = mean["ACC ours"] - mean["ACC paper"]
    spread = [c for c in ("ACC min", "ACC max", "ACC seeds") if c in per_corruption.columns]
    if spread:  # of the mean over the corruptions: the table's mean rows
        means = per_corruption[per_corruption["corruption"] == "mean"].set_index("method")[spread]
        mean = mean.join(means)
    return mean.reset_index()


# ------------------------------------------------------------------------------- STAMP's variants in (a)


def _stamp_h(records: Mapping[str, Record], spec: Any) -> float | None:
    record = records.get(spec.key())
    return None if record is None else float(record.mean.h)


def _weight_specs() -> dict[str, Any]:
    plan = reference.plan(plans.WEIGHTS)
    return {c.variant.removeprefix("weighting="): c.spec for c in plan.cells}


def _ratio_specs(methods: str) -> dict[str, dict[float, Any]]:
    """Table 6's cells in (a) per method and outlier share."""
    plan = reference.plan(plans.RATIOS, methods=methods)
    out: dict[str, dict[float, Any]] = {}
    for cell in plan.cells:
        out.setdefault(cell.spec.method, {})[cell.spec.outlier_ratio] = cell.spec
    return out


def _share(ratio: float) -> str:
    return f"{100 * ratio:.0f} %"


# ------------------------------------------------------------------------------- the README block


def _hours(store: ResultsStore) -> dict[str, float]:
    """Compute time per setting (sum of the records' seconds, STAMP's extra seeds in (a))."""
    by_notebook: dict[str, float] = {}
    records = _records(store)
    for letter, experiment in SETTINGS.items():
        specs = reference.experiment_cells(experiment)
        if letter == "a":
            specs += reference.experiment_cells(experiment, methods=reference.SPREAD_METHOD, seeds="1,2")
        by_notebook[letter] = sum(records[s.key()].seconds for s in specs if s.key() in records) / 3600
    return by_notebook


def machines_line(records: list[Record]) -> str:
    """Where a group of records was computed: each kind of device (``cuda:1`` counts as
    ``cuda``: a worker's index is not a machine) and torch version with its number of cells and
    hours (the records' own ``device``, ``versions`` and ``seconds``)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for record in records:
        device = str(record.device or "?").split(":")[0]
        where = (device, str((record.versions or {}).get("torch", "?")))
        groups.setdefault(where, []).append(float(record.seconds or 0.0))
    parts = [f"{device} with torch {torch} ({len(s)} cell{'s' if len(s) != 1 else ''}, {sum(s) / 3600:.2f} h)"
             for (device, torch), s in sorted(groups.items())]
    return "Computed on " + "; ".join(parts) + "."


def _stamp_seeds(store: ResultsStore) -> list[Mean]:
    specs = reference.experiment_cells(SETTINGS["a"], methods=reference.SPREAD_METHOD,
                                       seeds=",".join(map(str, reference.SPREAD_SEEDS)))
    found = [store.get(s) for s in specs]
    return [r.mean for r in found if r is not None]


_SPREAD_KINDS = (" min", " max", " seeds")


def _format(table: pd.DataFrame) -> pd.DataFrame:
    """Strings for a Markdown table: ours as the mean over its seeds with min–max where it has
    several (from the table's ``seeds`` columns, which are not shown themselves), Δ signed."""
    out = pd.DataFrame({"method": [method_label(m) for m in table["method"]]})
    for column in table.columns[1:]:
        if str(column).endswith(_SPREAD_KINDS):
            continue
        signed = column.endswith("Δ")
        by_seed = table.get(column.removesuffix(" ours") + " seeds") if column.endswith(" ours") else None
        if by_seed is not None:
            out[column] = [("—" if pd.isna(v) else (seeds.Spread.of(per).text() if isinstance(per, dict) else f"{v:.1f}"))
                           for v, per in zip(table[column], by_seed)]
            continue
        out[column] = [("—" if pd.isna(v) else (f"{v:+.1f}" if signed else f"{v:.1f}")) for v in table[column]]
    return out


def _model_line(store: ResultsStore) -> str:
    shas = {}
    for record in store.records():
        checkpoint = record.provenance.checkpoint if record.provenance is not None else None
        shas[checkpoint.name if checkpoint else None] = (checkpoint.sha256 if checkpoint else None) or ""
    parts = [f"`{name}` {acc:.1f} % clean accuracy (SHA-256 `{shas.get(name, '')[:16]}…`)"
             for name, acc in _clean_accuracies(store).items()]
    return "; ".join(parts) if parts else "no record yet"


def _headline(found: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per method: H in (a) and (b), closed-set ACC in (c), each as paper | ours | Δ."""
    parts = []
    for letter, metric in (("a", "H"), ("b", "H"), ("c", "ACC")):
        table = found[letter]
        columns = {f"{metric} {k}": f"({letter}) {metric} {k}" for k in ("paper", "ours", "Δ", "seeds")
                   if table.empty or f"{metric} {k}" in table.columns}
        part = (table[["method", *columns]] if not table.empty
                else pd.DataFrame(columns=["method", *columns])).rename(columns=columns)
        parts.append(part.set_index("method"))
    merged = pd.concat(parts, axis=1)
    order = [m for m in TABLE_ORDER if m in merged.index]
    return merged.loc[order].reset_index()


def _intro(store: ResultsStore) -> str:
    cells = reference.specs()
    done = len(store.status(cells).done)
    return (f"Records: `results/reference/`, **{done} of {len(cells)} cells** (`python -m stamplib reference "
            f"status`). Source models: {_model_line(store)}; the paper's ResNet-18 has about 94 %. Streams: our "
            "CIFAR-10-C of the JPEG test images at severity 5, gaussian noise, defocus blur and contrast, 2,000 "
            "known-class images per corruption (+ 500 outliers in (a) and (b)), batch 64, seed 0. The paper: 15 "
            "corruptions of the official CIFAR-10-C, 10,000 images each. Δ = ours − paper, so it mixes data, "
            "model and size.")


def _seeds_line(found: Mapping[str, pd.DataFrame]) -> list[str]:
    """How many of the paper's ten have seeds 1 and 2 in (a), and what that does to the numbers."""
    values = seeds.table_values(found["a"], "H", PAPER_ORDER)
    complete = [m for m, v in values.items() if set(reference.SPREAD_SEEDS) <= set(v)]
    if len(complete) < 2:
        return []
    missing = [method_label(m) for m in PAPER_ORDER if m not in complete]
    how_many = "all ten of the paper's methods" if not missing else f"{len(complete)} of the paper's ten methods"
    return [f"Seeds: in (a) {how_many} have {seeds.seeds_text(reference.SPREAD_SEEDS)} "
            f"(`python -m stamplib reference compute --cells seeds`)"
            + (f"; {', '.join(missing)} seed 0 only so far" if missing else "")
            + ". Ours is the mean over the seeds stored, with the smallest and largest seed's value in brackets "
            "(min–max). A seed fixes the stream and every random draw, so the claims below compare methods seed by "
            "seed, on the seeds that every cell compared has.", ""]


def _seed_line(store: ResultsStore) -> list[str]:
    found = _stamp_seeds(store)
    if len(found) < 2:
        return []
    spread = reference.seed_spread(store)
    values = ", ".join(f"{m.acc:.1f} / {m.auroc:.1f} / {m.h:.1f}" for m in found)
    return [f"STAMP over seeds {', '.join(map(str, reference.SPREAD_SEEDS[:len(found)]))} in (a), ACC / AUROC / H: "
            f"{values}" + ("" if spread is None else
                           f"; largest spread of a corruption's ACC or AUROC {spread:.2f} pt") + ".", ""]


def _rank_line(found: Mapping[str, pd.DataFrame]) -> list[str]:
    """Kendall's τ_b between the paper's order of its ten methods and ours, per setting, once
    every one of them has a record there."""
    parts = []
    for letter, metric in (("a", "H"), ("b", "H"), ("c", "ACC")):
        table = found[letter]
        values = seeds.table_values(table, metric, PAPER_ORDER)
        if len(values) < len(PAPER_ORDER):
            continue
        paper = dict(zip(table["method"], table[f"{metric} paper"].astype(float)))
        per_seed = seeds.tau_by_seed(values, {m: paper[m] for m in PAPER_ORDER})
        if per_seed:
            parts.append(f"({letter}) {seeds.tau_text(per_seed)} over {metric} ({seeds.seeds_text(per_seed)})")
    if not parts:
        return []
    return ["The paper's order of its ten methods against ours, Kendall's τ_b (1 = the same order; per seed that "
            "all ten have, with its range): " + ", ".join(parts) + ".", ""]


def _missing_cells_sentence(verdicts: Sequence[claims_page.Verdict]) -> str:
    """How to compute the claims' missing cells, only while some claim has any (once every claim is
    decided the README should not point at work that is not there)."""
    if not any(v.missing for v in verdicts):
        return ""
    return (" The missing cells: `python -m stamplib claims compute --benchmark reference --design NAME`, the "
            "claim cheapest to complete first.")


def _headline_lines(store: ResultsStore, found: Mapping[str, pd.DataFrame],
                    verdicts: Sequence[claims_page.Verdict]) -> list[str]:
    """The page's first part: the headline figure and table, the paper's claims and STAMP's
    seed spread."""
    lines = [_intro(store), ""]
    lines += [f"![The reference run: paper vs ours on real images](../figures/{FIGURE}.png)", ""]
    lines += ["H-score in (a) and (b), accuracy in (c); every metric of every setting below:", ""]
    lines += [to_markdown(_format(_headline(found))), ""]
    lines += _seeds_line(found)
    lines += _rank_line(found)
    lines += ["**The paper's claims, checked on real images** (the ledger's claims that CIFAR-10 can test; how a "
              "verdict is reached, both benchmarks side by side and the claims that need other data: "
              "[`docs/claims.md`](claims.md#how-a-verdict-is-reached))." + _missing_cells_sentence(verdicts), ""]
    lines += [_claims_table(verdicts), ""]
    return lines + _seed_line(store)


def _claims_table(verdicts: Sequence[claims_page.Verdict]) -> str:
    rows = [{"claim": claims_page.claim_text(v.claim), "paper": v.claim.where, "decided on": v.evidence(),
             "verdict": f"**{v.label}**", "ours": claims_page.ours_text(v)} for v in verdicts if not v.needs_data]
    return to_markdown(pd.DataFrame(rows, columns=["claim", "paper", "decided on", "verdict", "ours"]))


def page(store: ResultsStore, verdicts: Sequence[claims_page.Verdict]) -> str:
    """``docs/reference_run.md``: the headline, the claims and every table of the reference run,
    from the records."""
    found = tables(store)
    lines = ["# The reference run on real images", "",
             "Generated by `python -m stamplib claims render` from `results/reference/`; do not edit. The paper's ten "
             "methods and four newer ones on real CIFAR-10 photographs (the JPEG CIFAR-10 of `shared/data`), with "
             "ResNet-18 source models trained by this project, in the paper's three CIFAR-10 settings.", ""]
    lines += _headline_lines(store, found, verdicts)
    for letter, table in found.items():
        lines += [f"## {SETTING_TITLES[letter]}", ""]
        lines += [to_markdown(_format(table)) if not table.empty else "(no record yet)", ""]
    hours = _hours(store)
    lines += ["Compute, summed over the records (one CPU core each): "
              + ", ".join(f"({k}) {v:.1f} h" for k, v in hours.items()) + ".", ""]
    records = _records(store)
    core = [records[s.key()] for s in reference.specs() if s.key() in records]
    if core:
        lines += [machines_line(core), ""]
    lines += _optional_sections(store)
    return "\n".join(lines)


def _optional_sections(store: ResultsStore) -> list[str]:
    """The cells computed after the 44 (``reference compute --extras``), where any is stored."""
    records = _records(store)
    extra = reference.extra_specs()
    done = sum(s.key() in records for s in extra)
    lines = [f"## Optional cells (`reference compute --extras`): {done} of {len(extra)} stored", ""]
    if not done:
        return lines
    lines += [machines_line([records[s.key()] for s in extra if s.key() in records]), ""]
    full = reference.plan(SETTINGS["a"], methods=reference.EXTRA_METHODS_ALL_CORRUPTIONS, corruptions="all")
    table = paper_table(full, records)
    if not table.empty:
        lines += ["*(a) over all 15 corruptions* (the paper's corruptions; still our data, model and 2,000 "
                  "images per corruption):", ""]
        columns = ["method"] + [f"{m} {k}" for m in ("ACC", "AUROC", "H") for k in ("paper", "ours", "Δ")]
        lines += [to_markdown(_format(table[columns])), ""]
    for experiment, title in ((plans.AUGMENTATION, "*STAMP with K = 16 views vs K = 1 (Fig. 4; the paper prints no "
                                                   "numbers), (a):*"),
                              (plans.ABLATION, "*The ablation (Table 5) in (a); the paper's rows are on "
                                               "CIFAR100-C + SVHN-C, so they are shown, not subtracted:*")):
        plan = reference.plan(experiment)
        if not any(c.spec.key() in records for c in plan.cells):
            continue
        rows = paper_table(plan, records)
        keep = ["variant"] + [f"{m} {k}" for m in ("ACC", "AUROC", "H") for k in ("paper", "ours")
                              if f"{m} {k}" in rows.columns and (k == "ours" or rows[f"{m} {k}"].notna().any())]
        shown = rows[keep].rename(columns={"variant": "method"})
        lines += [title, "", to_markdown(_format_variants(shown)), ""]
    lines += _variant_and_stream_sections(records)
    both = reference.plan(plans.REALISTIC)
    if any(c.spec.key() in records for c in both.cells if c.variant == plans.REALISTIC_PROTOCOL):
        table = realistic.protocol_table(both, records)
        lines += ["*The realistic online protocol in (a) (notebook 12; C(g) measured in each run on the machine "
                  "of its record's provenance; — where a realistic record is missing):*", "",
                  to_markdown(_dashed(table.drop(columns=["dataset", "outliers"]))), "",
                  realistic.ranking_changes(table), ""]
    return lines


def _variant_and_stream_sections(records: Mapping[str, Record]) -> list[str]:
    """Fig. 3's weights, Table 6's outlier shares and notebook 13's streams in (a), as stored."""
    lines = []
    weights = {name: records.get(spec.key()) for name, spec in _weight_specs().items()}
    if any(r is not None and name != "adaptive" for name, r in weights.items()):
        rows = [{"weight": name, **({"ACC": r.mean.acc, "AUROC": r.mean.auroc, "H": r.mean.h}
                                    if r is not None else {"ACC": math.nan, "AUROC": math.nan, "H": math.nan})}
                for name, r in weights.items()]
        lines += ["*STAMP's weights (Fig. 3; the paper prints no values) in (a):*", "",
                  to_markdown(_dashed(pd.DataFrame(rows).round(1))), ""]
    cells = _ratio_specs(reference.RATIO_BASELINES + ",stamp")
    table = pd.DataFrame({method_label(m): {_share(r): _stamp_h(records, spec) for r, spec in sorted(by_ratio.items())}
                          for m, by_ratio in cells.items()}).T
    if table.notna().sum().sum() > len(cells):  # more than the 20 % column, which (a) already shows
        lines += ["*H-score against the outlier share (Table 6 prints STAMP's on CIFAR100-C; ours in (a), with "
                  "the cheap baselines):*", "", to_markdown(_dashed(table.round(1)).reset_index(names="method")), ""]
    stream_plan = reference.plan(plans.STRESS, methods=",".join((*PAPER_ORDER, "unient")), **reference.STRESS_STREAMS)
    harder = [c for c in stream_plan.cells if c.variant not in {plans.stress_variant(a, v)
                                                                 for a, v in plans.PAPER_STREAM.items()}]
    if any(c.spec.key() in records for c in harder):
        from stamplib.report import stress

        table = stress.stress_table(stream_plan, records)
        shown = stress.wide(table, "H").round(1)
        lines += ["*Harder streams (notebook 13) in (a), H-score; — where a record is missing:*", "",
                  to_markdown(_dashed(shown).reset_index()), "", stress.ranking_changes(table), ""]
    return lines


def _dashed(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every missing value shown as — (a method without one of its records)."""
    shown = table.astype(object)
    return shown.where(table.notna(), "—")


def _format_variants(table: pd.DataFrame) -> pd.DataFrame:
    out = _format(table.assign(method="stamp"))
    out["method"] = [short_variant(v) for v in table["method"]]
    return out.rename(columns={"method": "STAMP"})


# ------------------------------------------------------------------------------- the figure


def _clean_accuracies(store: ResultsStore) -> dict[str, float]:
    """Clean test accuracy (%) of each source model the records name, from their provenance."""
    found = {}
    for record in store.records():
        checkpoint = record.provenance.checkpoint if record.provenance is not None else None
        if checkpoint is not None and checkpoint.clean_test_accuracy is not None:
            found[checkpoint.name] = 100 * float(checkpoint.clean_test_accuracy)
    return dict(sorted(found.items()))


def headline_figure(found: Mapping[str, pd.DataFrame], clean_accuracy: Mapping[str, float]) -> plt.Figure:
    """H per method in (a) and (b), closed-set accuracy in (c): the paper's bar beside ours (the
    mean over the seeds stored, with an error bar from the smallest to the largest seed's value
    where a method has several). ``clean_accuracy``: our source models' clean accuracy (%) by
    checkpoint name, for the title."""
    accuracy = ", ".join(f"{v:.1f} %" for v in clean_accuracy.values()) or "clean accuracy unknown"
    panels = [("a", "H"), ("b", "H"), ("c", "ACC")]
    colours = dict(zip(("paper", "ours"), sns.color_palette(n_colors=2)))
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.2), sharey=True)
    for ax, (letter, metric) in zip(axes, panels):
        table = found[letter]
        if table.empty or not table[f"{metric} ours"].notna().any():
            ax.set_xticks([])
            ax.text(0.5, 0.5, "records pending", ha="center", va="center", transform=ax.transAxes)
        else:
            x = np.arange(len(table))
            ax.bar(x - 0.2, table[f"{metric} paper"], width=0.4, color=colours["paper"], label="paper")
            spread = [seeds.Spread.of(v) if isinstance(v, dict) else None
                      for v in table.get(f"{metric} seeds", [None] * len(table))]
            several = [s is not None and len(s.seeds) > 1 for s in spread]
            mean = table[f"{metric} ours"].to_numpy(float)
            bars = np.vstack([[m - s.low if k else np.nan for m, s, k in zip(mean, spread, several)],
                              [s.high - m if k else np.nan for m, s, k in zip(mean, spread, several)]])
            ax.bar(x + 0.2, mean, width=0.4, color=colours["ours"], label="ours (mean over seeds, min–max)",
                   yerr=bars if any(several) else None, error_kw={"ecolor": "0.2", "elinewidth": 1, "capsize": 2})
            ax.set_xticks(x, [method_label(m) for m in table["method"]], rotation=60)
        ax.set(title=SETTING_TITLES[letter].split(" (Table")[0], xlabel="",
               ylabel=f"{'H-score' if metric == 'H' else 'accuracy'} (%)", ylim=(0, 100))
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle("Reference run on real images. Paper: official CIFAR-10-C, 15 corruptions, ~94 % ResNet-18.\n"
                 f"Ours: JPEG CIFAR-10, our CIFAR-10-C (3 corruptions), CPU-trained ResNet-18 ({accuracy}).")
    fig.tight_layout()
    return fig


def write_figure(store: ResultsStore, directory: str | Path) -> list[Path]:
    """The headline figure of ``store``'s records, as ``<directory>/reference_run.png`` and ``.svg``."""
    from stamplib.report.figures import save_figure, set_theme

    set_theme()
    return save_figure(headline_figure(tables(store), _clean_accuracies(store)), FIGURE, directory)
