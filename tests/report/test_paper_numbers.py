"""The paper's numbers (stamplib/report/paper_numbers.csv) and the paper-vs-ours tables.

The spot checks type values from docs/spec/paper_numbers.md by hand, independently of the CSV, and
the consistency checks are those the transcription lists (Avg columns, cross-table equalities).
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

from stamplib.data.corruptions import CORRUPTIONS
from stamplib.methods import PAPER_ORDER
from stamplib.report.paper import (
    DATASET_LABELS,
    KEY_COLUMNS,
    OUTLIER_LABELS,
    TABLE4_METHOD_ORDER,
    compare,
    format_paper_vs_ours,
    method_label,
    paper_numbers,
    paper_value,
)

METHODS = ["source", "bn_stats", "tent", "eata", "sar", "cotta", "rotta", "sotta", "owttt", "stamp"]
SETS_1 = ["noise", "svhn", "lsun", "tiny"]


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    return paper_numbers()


def _pivot(df: pd.DataFrame, tables: list[str], columns: str) -> pd.DataFrame:
    sub = df[df["table"].isin(tables)]
    return sub.pivot_table(index=["table", "method", "metric"], columns=columns, values="value")


# ---------------------------------------------------------------------------- layout


def test_columns_and_vocabulary(df):
    assert list(df.columns) == ["table", "dataset", "outliers", "method", "variant", "corruption",
                                "metric", "value", "bold", "note"]
    assert set(df["table"]) == {"1a", "1b", "2", "3", "4a", "4b", "5", "6"}
    assert set(df["dataset"]) == {"cifar10_c", "cifar100_c", "imagenet_c", "cifar10_c_8_2",
                                  "cifar100_c_80_20"}
    assert set(df["outliers"]) == {"noise", "svhn", "lsun", "tiny", "places365", "textures",
                                   "heldout_classes", "none", "avg"}
    assert set(df["method"]) == set(METHODS)
    assert set(df["metric"]) == {"acc", "auroc", "h"}
    assert set(df["corruption"]) == {*CORRUPTIONS, "mean"}
    assert set(df["bold"]) == {0, 1}
    assert df["value"].between(0, 100).all()
    # One number per key: paper_value relies on it.
    assert not df.duplicated(["table", *KEY_COLUMNS, "metric"]).any()


@pytest.mark.parametrize(("table", "count"), [
    ("1a", 10 * 5 * 3),  # 10 methods × (4 outlier sets + Avg) × ACC/AUC/H
    ("1b", 10 * 5 * 3),
    ("2", 10 * 2 * 3),  # Places365-C, Textures-C
    ("3", 10 * 2 * 3),  # CIFAR10-C (8:2), CIFAR100-C (80:20)
    ("4a", 10 * 16),  # 15 corruptions + Avg., accuracy only
    ("4b", 10 * 16),
    ("5", 7 * 3),  # 7 ablation rows × ACC/AUC/H
    ("6", 5 * 3),  # 5 proportions × 3 outlier sets, H only
])
def test_row_counts(df, table, count):
    assert (df["table"] == table).sum() == count


def test_per_table_keys(df):
    t4 = df[df["table"].isin(["4a", "4b"])]
    assert set(t4["outliers"]) == {"none"} and set(t4["metric"]) == {"acc"}
    assert set(df[df["table"] == "3"]["outliers"]) == {"heldout_classes"}
    assert set(df[df["table"] == "6"]["metric"]) == {"h"}
    assert set(df[df["table"] == "6"]["variant"]) == {
        "ratio=0.05", "ratio=0.1", "ratio=0.2", "ratio=0.3333", "ratio=0.5"}
    t56 = df[df["table"].isin(["5", "6"])]
    assert set(t56["method"]) == {"stamp"} and set(t56["dataset"]) == {"cifar100_c"}
    assert set(df[~df["table"].isin(["5", "6"])]["variant"]) == {""}
    # Table 5 variants: the four flags in a fixed order and format.
    for v in df[df["table"] == "5"]["variant"].unique():
        parts = [p.split("=") for p in v.split(",")]
        assert [k for k, _ in parts] == ["sam", "lr_decay", "memory", "weighting"]
        assert all(x in ("0", "1") for _, x in parts[:3]) and parts[3][1] in ("adaptive", "none")
    assert df[df["table"] == "5"]["variant"].nunique() == 7


def test_the_only_note_is_the_printed_39(df):
    noted = df[df["note"] != ""]
    assert len(noted) == 1
    row = noted.iloc[0]
    assert (row["table"], row["outliers"], row["method"], row["metric"]) == ("2", "textures", "tent", "acc")
    assert row["value"] == 39.0 and row["note"] == 'printed "39"'


# ---------------------------------------------------------------------------- spot checks

# Typed from docs/spec/paper_numbers.md, not read from the CSV.
SPOT = [
    ("1a", "cifar10_c", "noise", "source", "auroc", "mean", "", 70.4),
    ("1a", "cifar10_c", "tiny", "owttt", "h", "mean", "", 56.2),
    ("1a", "cifar10_c", "avg", "tent", "acc", "mean", "", 80.1),
    ("1b", "cifar100_c", "noise", "sar", "auroc", "mean", "", 88.6),
    ("1b", "cifar100_c", "avg", "stamp", "auroc", "mean", "", 84.7),
    ("2", "imagenet_c", "places365", "eata", "acc", "mean", "", 46.4),
    ("2", "imagenet_c", "textures", "owttt", "acc", "mean", "", 9.4),
    ("3", "cifar100_c_80_20", "heldout_classes", "stamp", "h", "mean", "", 68.5),
    ("3", "cifar10_c_8_2", "heldout_classes", "rotta", "auroc", "mean", "", 62.4),
    ("4a", "cifar10_c", "none", "sotta", "acc", "brightness", "", 92.4),
    ("4a", "cifar10_c", "none", "rotta", "acc", "contrast", "", 73.5),
    ("4b", "cifar100_c", "none", "sar", "acc", "gaussian_noise", "", 55.1),
    ("4b", "cifar100_c", "none", "cotta", "acc", "mean", "", 54.8),
    ("4b", "cifar100_c", "none", "owttt", "acc", "elastic_transform", "", 60.1),
    ("5", "cifar100_c", "svhn", "stamp", "auroc", "mean", "sam=1,lr_decay=1,memory=0,weighting=adaptive", 77.7),
    ("5", "cifar100_c", "svhn", "stamp", "acc", "mean", "sam=0,lr_decay=1,memory=0,weighting=none", 58.9),
    ("5", "cifar100_c", "svhn", "stamp", "acc", "mean", "sam=1,lr_decay=1,memory=1,weighting=none", 61.5),
    ("6", "cifar100_c", "lsun", "stamp", "h", "mean", "ratio=0.5", 69.5),
    ("6", "cifar100_c", "tiny", "stamp", "h", "mean", "ratio=0.3333", 68.5),
    ("6", "cifar100_c", "svhn", "stamp", "h", "mean", "ratio=0.05", 69.2),
]


@pytest.mark.parametrize(("table", "dataset", "outliers", "method", "metric", "corruption", "variant",
                          "value"), SPOT)
def test_spot_values(table, dataset, outliers, method, metric, corruption, variant, value):
    assert paper_value(table, dataset, outliers, method, metric, corruption=corruption,
                       variant=variant) == value


def test_paper_value_absent_is_none():
    assert paper_value("4a", "cifar10_c", "none", "stamp", "auroc") is None  # Table 4: ACC only
    assert paper_value("1a", "digits", "noise", "stamp", "h") is None
    assert paper_value("6", "cifar100_c", "svhn", "stamp", "h") is None  # needs a ratio variant


# ---------------------------------------------------------------------------- consistency


def test_table1_avg_is_mean_of_the_four_sets(df):
    p = _pivot(df, ["1a", "1b"], "outliers")
    dev = (p["avg"] - p[SETS_1].mean(axis=1)).abs()
    # The one documented deviation: Table 1b STAMP Avg H 71.3 vs mean 71.4.
    documented = ("1b", "stamp", "h")
    assert dev[documented] == pytest.approx(0.1, abs=1e-9)
    assert (dev.drop(documented) <= 0.05 + 1e-9).all(), dev[dev > 0.05 + 1e-9]


def test_table4_avg_is_mean_of_the_15_corruptions(df):
    sub = df[df["table"].isin(["4a", "4b"])]
    p = sub.pivot_table(index=["table", "method"], columns="corruption", values="value")
    assert list(p.columns.drop("mean").sort_values()) == sorted(CORRUPTIONS)
    dev = (p["mean"] - p[list(CORRUPTIONS)].mean(axis=1)).abs()
    assert (dev <= 0.1).all(), dev[dev > 0.1]


def _rows(df, table, **kw) -> dict[str, float]:
    sub = df[df["table"] == table]
    for k, v in kw.items():
        sub = sub[sub[k] == v]
    return dict(zip(sub["metric"], sub["value"]))


def test_table5_ends_equal_table1b(df):
    full = _rows(df, "5", variant="sam=1,lr_decay=1,memory=1,weighting=adaptive")
    plain = _rows(df, "5", variant="sam=0,lr_decay=0,memory=0,weighting=none")
    assert full == _rows(df, "1b", method="stamp", outliers="svhn") == {"acc": 63.7, "auroc": 82.1, "h": 71.7}
    assert plain == _rows(df, "1b", method="tent", outliers="svhn") == {"acc": 54.4, "auroc": 70.4, "h": 61.2}


def test_table6_20_percent_row_equals_table1b_stamp(df):
    for outliers in ("svhn", "lsun", "tiny"):
        assert (_rows(df, "6", variant="ratio=0.2", outliers=outliers)["h"]
                == _rows(df, "1b", method="stamp", outliers=outliers)["h"])


def test_numeric_claims_of_the_text():
    def v(*a, **kw):
        return paper_value(*a, **kw)

    # §4.2: +5.1 AUC on CIFAR10-C over RoTTA; +1.6 / +2.2 H on ImageNet-C.
    assert v("1a", "cifar10_c", "avg", "stamp", "auroc") - v("1a", "cifar10_c", "avg", "rotta", "auroc") \
        == pytest.approx(5.1)
    assert v("2", "imagenet_c", "places365", "stamp", "h") - v("2", "imagenet_c", "places365", "eata", "h") \
        == pytest.approx(1.6)
    assert v("2", "imagenet_c", "textures", "stamp", "h") - v("2", "imagenet_c", "textures", "sar", "h") \
        == pytest.approx(2.2)
    # Closed set: (84.3 − 82.9 + 64.4 − 60.1) / 2 = 2.85 over SoTTA.
    gain = [v(t, d, "none", "stamp", "acc") - v(t, d, "none", "sotta", "acc")
            for t, d in (("4a", "cifar10_c"), ("4b", "cifar100_c"))]
    assert sum(gain) / 2 == pytest.approx(2.85)


# ---------------------------------------------------------------------------- bold markers


def test_bold_markers(df):
    def bold(table, outliers, method, metric, corruption="mean"):
        hit = df[(df["table"] == table) & (df["outliers"] == outliers) & (df["method"] == method)
                 & (df["metric"] == metric) & (df["corruption"] == corruption)]
        assert len(hit) == 1
        return int(hit["bold"].iloc[0])

    assert bold("1a", "noise", "stamp", "h") == 1
    assert bold("1a", "tiny", "cotta", "auroc") == 1
    assert bold("1a", "tiny", "stamp", "auroc") == 0
    assert bold("2", "places365", "eata", "acc") == 1  # tie with STAMP, both bold
    assert bold("2", "textures", "eata", "acc") == 0
    assert bold("4a", "none", "eata", "acc", "zoom_blur") == 1
    assert bold("4a", "none", "sotta", "acc", "zoom_blur") == 1
    assert bold("4a", "none", "stamp", "acc", "defocus_blur") == 0
    counts = df.groupby("table")["bold"].sum().to_dict()
    assert counts == {"1a": 15, "1b": 15, "2": 7, "3": 6, "4a": 17, "4b": 17, "5": 0, "6": 0}


def test_bold_marks_the_column_best(df):
    """In Tables 1–4 bold marks the largest value of each column (ties: all of them), with one
    exception of the paper's own: Table 4b bolds SAR's gaussian 55.1 besides STAMP's 57.2."""
    sub = df[~df["table"].isin(["5", "6"])]
    off = []
    for _, g in sub.groupby(["table", "dataset", "outliers", "corruption", "metric"]):
        best = (g["value"] == g["value"].max()).astype(int)
        off += [tuple(r) for r in g[best != g["bold"]][["table", "method", "corruption"]].values]
    assert off == [("4b", "sar", "gaussian_noise")]


# ---------------------------------------------------------------------------- packaging, labels


def test_csv_is_package_data():
    assert resources.files("stamplib.report").joinpath("paper_numbers.csv").is_file()
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    # A text check (tomllib needs Python 3.11; the project supports 3.10).
    lines = pyproject.read_text().splitlines()
    section = lines[lines.index("[tool.setuptools.package-data]") + 1]
    assert section.startswith("stamplib = [") and '"report/*.csv"' in section


def test_paper_numbers_returns_a_copy():
    a = paper_numbers()
    a.loc[:, "value"] = -1.0
    assert (paper_numbers()["value"] >= 0).all()


def test_labels_and_orders():
    assert [method_label(m) for m in PAPER_ORDER] == [
        "Source", "BN Stats", "Tent", "EATA", "SAR", "CoTTA", "RoTTA", "SoTTA", "OWTTT", "STAMP"]
    assert [method_label(m) for m in TABLE4_METHOD_ORDER][3:5] == ["CoTTA", "EATA"]
    assert sorted(TABLE4_METHOD_ORDER) == sorted(PAPER_ORDER) == sorted(METHODS)
    assert method_label("my_method") == "my_method"
    assert [OUTLIER_LABELS[o] for o in ("noise", "svhn", "lsun", "tiny", "places365", "textures")] == [
        "Noise", "SVHN-C", "LSUN-C", "TinyImageNet-C", "Places365-C", "Textures-C"]
    assert DATASET_LABELS["cifar10_c"] == "CIFAR10-C" and DATASET_LABELS["imagenet_c"] == "ImageNet-C"


# ---------------------------------------------------------------------------- compare


@pytest.fixture
def ours() -> pd.DataFrame:
    return pd.DataFrame({
        "dataset": ["cifar10_c", "cifar10_c", "digits", "cifar100"],
        "outliers": ["noise", "svhn", "noise", "lsun"],
        "method": ["stamp", "tent", "stamp", "stamp"],
        "acc": [79.2, 82.0, 90.0, 60.0],
        "acc_std": [0.4, math.nan, 0.1, 0.0],
        "auroc": [85.0, 50.0, 60.0, 82.6],
        "h": [80.0, 65.1, 70.0, 70.0],
        "collapsed": [False, True, False, False],
        "seed": [0, 0, 0, 1],
    })


def test_compare_diffs_and_missing(ours):
    c = compare(ours, "1a", on=["dataset", "outliers", "method"])
    assert len(c) == len(ours)
    assert list(c["dataset"]) == list(ours["dataset"])  # our names are kept
    assert {"seed", "collapsed"} <= set(c.columns)
    # STAMP / Noise on CIFAR10-C: paper 77.9 / 83.2 / 80.1.
    assert c.loc[0, "ACC paper"] == 77.9 and c.loc[0, "ACC ours"] == 79.2
    assert c.loc[0, "ACC Δ"] == pytest.approx(1.3) and c.loc[0, "ACC std"] == 0.4
    assert c.loc[0, "H Δ"] == pytest.approx(-0.1)
    # Tent / SVHN-C: paper AUC 54.9 → ours below (negative), H equal (zero).
    assert c.loc[1, "AUROC Δ"] == pytest.approx(-4.9) and c.loc[1, "H Δ"] == pytest.approx(0.0)
    # digits: no paper number, but the row stays with our values.
    assert math.isnan(c.loc[2, "H paper"]) and math.isnan(c.loc[2, "H Δ"]) and c.loc[2, "H ours"] == 70.0
    # cifar100 (corrupted on the fly) is compared with CIFAR100-C; but Table 1a is CIFAR10-C only.
    assert math.isnan(c.loc[3, "ACC paper"])
    c1b = compare(ours, "1b", on=["dataset", "outliers", "method"])
    assert c1b.loc[3, "AUROC paper"] == 82.6 and c1b.loc[3, "AUROC Δ"] == pytest.approx(0.0)
    assert c1b.loc[3, "ACC Δ"] == pytest.approx(60.0 - 63.7)


def test_compare_subsets_metrics_and_maps_our_datasets_to_the_papers():
    ours = pd.DataFrame({"method": ["stamp", "tent"], "corruption": ["fog", "mean"],
                         "acc": [88.0, 80.0], "auroc": [50.0, 50.0], "h": [60.0, 60.0]})
    c = compare(ours.assign(dataset="cifar10"), "4a", on=["dataset", "method", "corruption"],
                metrics=("acc",))
    assert [x for x in c.columns if " " in x] == ["ACC paper", "ACC ours", "ACC Δ"]
    assert c["ACC paper"].tolist() == [88.1, 81.8]  # cifar10, corrupted on the fly, is Table 4a's CIFAR10-C
    assert c.loc[0, "ACC Δ"] == pytest.approx(-0.1)


def test_compare_defaults_and_ambiguity():
    ablation = pd.DataFrame({"variant": ["sam=0,lr_decay=1,memory=0,weighting=none"],
                             "acc": [60.0], "auroc": [65.3], "h": [61.0]})
    c = compare(ablation, "5", on=["variant"])
    assert c.loc[0, "ACC paper"] == 58.9 and c.loc[0, "ACC Δ"] == pytest.approx(1.1)
    # Table 4 joined without corruption means the Avg. column.
    t4 = compare(pd.DataFrame({"method": ["stamp"], "acc": [80.0]}), "4b", on=["method"])
    assert t4.loc[0, "ACC paper"] == 64.4
    with pytest.raises(ValueError, match="ambiguous"):
        compare(pd.DataFrame({"method": ["stamp"], "h": [70.0]}), "6", on=["method"])
    with pytest.raises(ValueError, match="unknown paper table"):
        compare(ablation, "7", on=["variant"])
    with pytest.raises(ValueError, match="key columns"):
        compare(ablation, "5", on=["seed"])


def test_format_paper_vs_ours(ours):
    f = format_paper_vs_ours(compare(ours, "1a", on=["dataset", "outliers", "method"]))
    assert "collapsed" not in f.columns and "ACC std" not in f.columns
    assert list(f.columns[-3:]) == ["H paper", "H ours", "H Δ"]
    assert f.loc[0, "method"] == "STAMP" and f.loc[0, "dataset"] == "CIFAR10-C"
    assert f.loc[0, "outliers"] == "Noise"
    assert (f.loc[0, "ACC paper"], f.loc[0, "ACC ours"], f.loc[0, "ACC Δ"]) == ("77.9", "79.2 ± 0.4", "+1.3")
    assert f.loc[0, "H Δ"] == "−0.1"
    assert f.loc[1, "ACC ours"] == "82.0†" and f.loc[1, "H Δ"] == "+0.0"
    assert (f.loc[2, "H paper"], f.loc[2, "H ours"], f.loc[2, "H Δ"]) == ("—", "70.0", "—")
    assert f.loc[2, "dataset"] == "digits"
    tex = format_paper_vs_ours(compare(ours, "1a", on=["dataset", "outliers", "method"]), latex=True)
    assert tex.loc[0, "ACC ours"] == "79.2 $\\pm$ 0.4" and tex.loc[0, "H $\\Delta$"] == "$-$0.1"
    assert tex.loc[1, "ACC ours"] == "82.0$^\\dagger$" and tex.loc[2, "H paper"] == "--"
    assert "79.2 $\\pm$ 0.4" in tex.to_latex(index=False, escape=False)
    assert format_paper_vs_ours(compare(ours, "1a", on=["dataset", "outliers", "method"]),
                                digits=2).loc[0, "ACC paper"] == "77.90"
