"""The paper's numbers as data, and paper-vs-ours comparison tables.

``paper_numbers.csv`` (next to this module) holds every number of the paper's Tables 1a, 1b,
2, 3, 4a, 4b, 5 and 6 exactly as printed (transcribed in ``docs/spec/paper_numbers.md``), one
number per row, keyed by our registry names:

* ``table``: ``1a``, ``1b``, ``2``, ``3``, ``4a``, ``4b``, ``5``, ``6``;
* ``dataset``, ``outliers``, ``method``: registry names; ``outliers`` is ``heldout_classes``
  for Table 3, ``none`` for Table 4 and ``avg`` for Table 1's "Avg" columns;
* ``variant``: empty except Table 5 (``sam=1,lr_decay=1,memory=0,weighting=adaptive``) and
  Table 6 (``ratio=0.05`` … ``ratio=0.5``);
* ``corruption``: ``mean`` (average over the 15 corruptions) or a corruption (Table 4);
* ``metric``: ``acc``, ``auroc``, ``h``; ``value``: percent as printed; ``bold``: 0/1;
  ``note``: remarks on the print (e.g. ``printed "39"``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources

import pandas as pd

from stamplib import data
from stamplib.evaluation.metrics import METRIC_LABELS, PAPER_METRICS
from stamplib.methods import PAPER_ORDER
from stamplib.report.frames import is_collapsed

#: Key columns of ``paper_numbers.csv``: together with ``table`` they identify one number.
KEY_COLUMNS = ("dataset", "outliers", "method", "variant", "corruption")


METHOD_LABELS = {
    "source": "Source",
    "bn_stats": "BN Stats",
    "tent": "Tent",
    "eata": "EATA",
    "sar": "SAR",
    "cotta": "CoTTA",
    "rotta": "RoTTA",
    "sotta": "SoTTA",
    "owttt": "OWTTT",
    "stamp": "STAMP",
    # Newer open-set methods: rows of our tables only, the paper has no numbers for them.
    "unient": "UniEnt",
    "unient_plus": "UniEnt+",
    "ostta": "OSTTA",
    "tent_come": "Tent+COME",
}

#: Row order of Table 4, which puts CoTTA before EATA.
TABLE4_METHOD_ORDER = ("source", "bn_stats", "tent", "cotta", "eata", "sar", "rotta", "sotta",
                       "owttt", "stamp")

OUTLIER_LABELS = {
    "noise": "Noise",
    "svhn": "SVHN-C",
    "lsun": "LSUN-C",
    "tiny": "TinyImageNet-C",
    "places365": "Places365-C",
    "textures": "Textures-C",
    "heldout_classes": "held-out classes",
    "avg": "Avg",
    "none": "none",
}

DATASET_LABELS = {
    "cifar10_c": "CIFAR10-C",
    "cifar100_c": "CIFAR100-C",
    "imagenet_c": "ImageNet-C",
    "cifar10_c_8_2": "CIFAR10-C (8:2)",
    "cifar100_c_80_20": "CIFAR100-C (80:20)",
}

def paper_dataset(name: str) -> str:
    """The paper's data set whose numbers apply to our data set ``name`` (its registry entry's
    ``paper_name``: e.g. ``cifar10``, corrupted on the fly, is compared with ``cifar10_c``);
    names the registry does not know come back unchanged."""
    entry = data.DATASETS.get(name)
    return entry.paper_name if entry is not None and entry.paper_name else name


def method_label(name: str) -> str:
    """The paper's row name of a registry method; any other method (one added since, an outside
    one) is shown by its registry name, so a new method needs no label here."""
    return METHOD_LABELS.get(name, name)


def outlier_label(name: str) -> str:
    return OUTLIER_LABELS.get(name, name)


def dataset_label(name: str) -> str:
    return DATASET_LABELS.get(name, name)


def method_order(table: str) -> tuple[str, ...]:
    """The paper's row order of ``table`` (Table 4 differs from Tables 1–3)."""
    return TABLE4_METHOD_ORDER if str(table).startswith("4") else PAPER_ORDER


@lru_cache(maxsize=1)
def _load() -> pd.DataFrame:
    # importlib.resources finds the file both in the source tree (editable install) and in an
    # installed wheel, where it ships as package data.
    with resources.files("stamplib.report").joinpath("paper_numbers.csv").open("r") as f:
        # keep_default_na=False: empty variants/notes stay "" (not NaN), and "none" stays a string.
        df = pd.read_csv(f, dtype=str, keep_default_na=False)
    df["value"] = df["value"].astype(float)
    df["bold"] = df["bold"].astype(int)
    return df


def paper_numbers() -> pd.DataFrame:
    """Every number of the paper's tables, one per row (a fresh copy: callers may mutate it)."""
    return _load().copy()


def paper_value(table: str, dataset: str, outliers: str, method: str, metric: str,
                corruption: str = "mean", variant: str = "") -> float | None:
    """One printed number, or None where the paper has none."""
    df = _load()
    hit = df[(df["table"] == str(table)) & (df["dataset"] == dataset) & (df["outliers"] == outliers)
             & (df["method"] == method) & (df["metric"] == metric)
             & (df["corruption"] == corruption) & (df["variant"] == variant)]
    if hit.empty:
        return None
    # The key is unique in the CSV (a test checks it), so there is exactly one hit.
    return float(hit["value"].iloc[0])


def _paper_lookup(table: str, on: Sequence[str]) -> pd.DataFrame:
    """The paper's rows of ``table`` narrowed to one row per ``on`` key and metric."""
    df = _load()
    sub = df[df["table"] == str(table)]
    if sub.empty:
        raise ValueError(f"unknown paper table {table!r}; tables: {sorted(df['table'].unique())}")
    # Key columns the caller does not join on default to the paper's headline numbers: the mean
    # over corruptions and the unablated method.
    for col, default in (("corruption", "mean"), ("variant", "")):
        if col not in on and (sub[col] == default).any():
            sub = sub[sub[col] == default]
    keys = [*on, "metric"]
    if sub.duplicated(keys).any():
        free = [c for c in KEY_COLUMNS if c not in on and sub[c].nunique() > 1]
        raise ValueError(f"table {table}: joining on {list(on)} is ambiguous; also join on {free}")
    return sub.set_index(keys)["value"]


def compare(ours: pd.DataFrame, table: str, on: list[str],
            metrics: Sequence[str] = PAPER_METRICS) -> pd.DataFrame:
    """Put our numbers next to the paper's ``table``, one row per row of ``ours``.

    ``on`` names the key columns that identify a paper number (among ``dataset``, ``outliers``,
    ``method``, ``variant``, ``corruption``); ``corruption`` and ``variant`` default to ``mean``
    and ``""`` when not joined on. Per metric present in ``ours`` the result has ``<M> paper``,
    ``<M> ours``, ``<M> std`` (when ``ours`` has ``<metric>_std``), ``<M> min``, ``<M> max`` and
    ``<M> seeds`` (when ``ours`` has them: :func:`stamplib.report.frames.over_seeds`) and
    ``<M> Δ`` = ours − paper, with ``<M>`` in ACC/AUROC/H. Rows the paper lacks stay, with NaN paper and Δ, so results
    on
    other datasets still show. Other columns of ``ours`` (seed, collapsed, …) are kept.
    """
    bad = [c for c in on if c not in KEY_COLUMNS]
    if not on or bad:
        raise ValueError(f"cannot join on {bad}; key columns are {list(KEY_COLUMNS)}")
    missing = [c for c in on if c not in ours.columns]
    if missing:
        raise ValueError(f"ours lacks the key columns {missing}")
    cols = {m: m for m in metrics if m in ours.columns}
    if not cols:
        raise ValueError(f"ours has none of the metric columns {list(metrics)}")
    paper = _paper_lookup(table, on)

    std_cols = {m: f"{m}_std" if f"{m}_std" in ours.columns else None for m in cols}
    # The spread over seeds (frames.over_seeds) travels beside each metric: <M> min, max, seeds.
    spread_cols = {m: [(f"{m}_{kind}", kind) for kind in ("min", "max", "seeds") if f"{m}_{kind}" in ours.columns]
                   for m in cols}
    metric_like = (set(cols.values()) | {s for s in std_cols.values() if s}
                   | {c for found in spread_cols.values() for c, _ in found})
    out = ours[[c for c in ours.columns if c not in metric_like]].reset_index(drop=True).copy()
    if "collapsed" in out.columns:
        out["collapsed"] = [is_collapsed(v) for v in out["collapsed"]]

    keys = ours[on].astype(str).reset_index(drop=True)
    if "dataset" in on:
        keys["dataset"] = keys["dataset"].map(paper_dataset)
    for metric, col in cols.items():
        label = METRIC_LABELS[metric]
        ref = [paper.get((*row, metric), math.nan) for row in keys.itertuples(index=False)]
        mine = ours[col].astype(float).reset_index(drop=True)
        out[f"{label} paper"] = pd.Series(ref, dtype=float)
        out[f"{label} ours"] = mine
        if std_cols[metric]:
            out[f"{label} std"] = ours[std_cols[metric]].astype(float).reset_index(drop=True)
        for column, kind in spread_cols[metric]:
            values = ours[column].reset_index(drop=True)
            out[f"{label} {kind}"] = values if kind == "seeds" else values.astype(float)
        out[f"{label} Δ"] = mine - out[f"{label} paper"]
    return out


def _num(v: float, digits: int, latex: bool, signed: bool = False) -> str:
    if v is None or math.isnan(v):
        return "--" if latex else "—"
    # Round first so that a difference of -1e-15 prints as +0.0, not −0.0.
    v = round(v, digits) + 0.0
    s = f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"
    if s.startswith("-"):
        # A typographic minus: a hyphen looks too short next to "+" in a Δ column.
        s = ("$-$" if latex else "−") + s[1:]
    return s


def format_paper_vs_ours(df: pd.DataFrame, digits: int = 1, latex: bool = False) -> pd.DataFrame:
    """Strings for a Markdown (default) or LaTeX table from a :func:`compare` result.

    Three columns per metric — ``<M> paper``, ``<M> ours`` and ``<M> Δ`` (``−1.8``, ``+0.3``) —
    since separate columns align in both formats. Over several seeds ``<M> ours`` is the mean
    with the smallest and largest seed's value (``79.2 (78.8–79.6)``, from ``<M> min`` and
    ``<M> max``), or ``79.2 ± 0.4`` where only a std column is given. Each
    column follows one of ``df``: a table without Δ columns (the built-in benchmark's, see
    :func:`stamplib.report.reproduce.paper_table`) gets none. Missing numbers show as ``—``; a collapsed run gets ``†``
    on its own numbers. Registry names of
    method, dataset and outliers are replaced by the paper's labels. ``latex=True`` writes
    LaTeX markup instead of Unicode (for ``to_latex(escape=False)``).
    """
    pm = "$\\pm$" if latex else "±"
    dagger = "$^\\dagger$" if latex else "†"
    collapsed = (df["collapsed"].map(is_collapsed) if "collapsed" in df.columns
                 else pd.Series(False, index=df.index))
    out = pd.DataFrame(index=df.index)
    for col in df.columns:
        if col == "collapsed":
            continue
        prefix, _, kind = col.rpartition(" ")
        if prefix in METRIC_LABELS.values() and kind in ("paper", "ours", "std", "min", "max", "seeds", "Δ"):
            if kind in ("std", "min", "max", "seeds"):
                continue  # folded into the ours column
            head = f"{prefix} $\\Delta$" if (latex and kind == "Δ") else col
            if kind == "paper":
                out[head] = [_num(v, digits, latex) for v in df[col]]
            elif kind == "Δ":
                out[head] = [_num(v, digits, latex, signed=True) for v in df[col]]
            else:
                std = df.get(f"{prefix} std")
                low, high = df.get(f"{prefix} min"), df.get(f"{prefix} max")
                seeds = df.get(f"{prefix} seeds")
                cells = []
                for i, v in zip(df.index, df[col]):
                    s = _num(v, digits, latex)
                    several = seeds is not None and isinstance(seeds[i], dict) and len(
                        [x for x in seeds[i].values() if not math.isnan(x)]) > 1
                    if several and low is not None and high is not None and not math.isnan(v):
                        dash = "--" if latex else "–"
                        s += f" ({_num(low[i], digits, latex)}{dash}{_num(high[i], digits, latex)})"
                    elif std is not None and not math.isnan(std[i]) and not math.isnan(v):
                        s += f" {pm} {std[i]:.{digits}f}"
                    if collapsed[i]:
                        s += dagger
                    cells.append(s)
                out[head] = cells
        elif col == "method":
            out[col] = df[col].map(method_label)
        elif col == "dataset":
            out[col] = df[col].map(dataset_label)
        elif col == "outliers":
            out[col] = df[col].map(outlier_label)
        else:
            out[col] = df[col]
    return out.reset_index(drop=True)
