"""Paper-vs-ours tables from a plan and its records (stamplib.report.reproduce)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from stamplib import methods
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.experiments import plans, registry
from stamplib.report import reproduce


def _record(spec: RunSpec, acc: float = 60.0, auroc: float = 70.0, collapsed: bool = False) -> Record:
    h = 2 * acc * auroc / (acc + auroc)
    per = {c: {"acc": acc, "auroc": auroc, "h": h, "collapsed": collapsed, "seconds": 1.0} for c in spec.corruptions}
    return Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
                             "mean": {"acc": acc, "auroc": auroc, "h": h},
                             "collapsed": list(spec.corruptions) if collapsed else [], "seconds": 1.0})


def _tent_and_stamp(data_root: str = "") -> tuple[plans.Plan, dict]:
    plan = registry.plan("02_table1_cifar_outlier_aware", methods="tent,stamp", data_root=data_root, seeds="0")
    records = {c.spec.key(): _record(c.spec, acc=80.0 if c.spec.method == "stamp" else 70.0,
                                     collapsed=c.spec.method == "tent") for c in plan.cells}
    return plan, records


def test_paper_table_puts_ours_next_to_the_cell_it_stands_for(tmp_path):
    plan, records = _tent_and_stamp()
    assert plan.scale == "builtin"
    table = reproduce.paper_table(plan, records)
    assert list(table["method"]) == ["tent", "stamp"]  # the paper's row order
    stamp = table[table["method"] == "stamp"].iloc[0]
    assert stamp["dataset"] == "cifar10_c" and stamp["ours on"] == "cifar10_builtin / noise"
    assert stamp["ACC paper"] == 77.9 and stamp["ACC ours"] == 80.0
    # Another benchmark's number is a reference, not something to subtract.
    assert not [c for c in table.columns if "Δ" in c] and reproduce.paper_is_reference(table)
    files = reproduce.save_paper_table(table, "t", directory=tmp_path)
    assert [f.name for f in files] == ["t.csv", "t.md", "t.tex", "t_ranking.csv", "t_ranking.md"]
    md = files[1].read_text()
    assert "†" in md and "collapsed" in md  # Tent's collapse is flagged, not silently averaged
    assert "STAMP" in md and "77.9" in md and "80.0" in md
    assert "Δ |" not in md and "+2.1" not in md and "Δ" not in files[2].read_text() and "Δ" not in files[0].read_text()
    # Both rank STAMP above Tent by H (paper 80.1 vs 59.7, ours 74.7 vs 70.0): τ_b = 1.
    assert "Kendall's τ_b" in md and "CIFAR10-C + Noise: τ_b = +1.00 over 2 methods" in md
    ranking = pd.read_csv(files[3])
    assert ranking.loc[0, "kendall_tau"] == 1.0 and ranking.loc[0, "ours_ranking"] == "STAMP > Tent"
    assert "STAMP > Tent" in files[4].read_text()
    # STAMP's place among the paper's methods is said under the table, for ours and the paper.
    assert ("STAMP ranks 1st of the paper's 2 methods by H (74.7; best other: Tent 70.0); in the paper it ranks 1st"
            in md)
    assert "a compact ResNet (0.3 M parameters" in md and "subset of the CIFAR-10 test photographs" in md


def test_standing_says_where_stamp_stands_among_the_papers_methods():
    table = _ranked([80.1, 67.3, 59.7, 50.0], [70.0, 72.0, 70.04, 10.0])
    table["method"] = ["stamp", "cotta", "tent", "source"]
    table.loc[len(table)] = ["cifar10_c", "noise", "unient", float("nan"), 99.0]  # no paper number: not ranked
    got = reproduce.standing(table).iloc[0]
    # Ours: CoTTA 72.0 above; Tent's 70.04 prints as 70.0, a tie that shares STAMP's place.
    assert (got["ours_rank"], got["paper_rank"], got["n_methods"]) == (2, 1, 4)
    assert got["ours_best_other"] == "CoTTA 72.0" and got["paper_best_other"] == "CoTTA 67.3"
    text = reproduce.standing_text(reproduce.standing(table))
    assert text.startswith("CIFAR10-C + Noise: STAMP ranks 2nd of the paper's 4 methods by H (70.0")
    assert reproduce.standing(table, method="unient").empty


def test_real_data_table_keeps_the_delta_columns(tmp_path):
    plan, records = _tent_and_stamp(data_root=str(tmp_path / "data"))
    assert plan.scale == "real"
    table = reproduce.paper_table(plan, records)
    stamp = table[table["method"] == "stamp"].iloc[0]
    assert stamp["ours on"] == "cifar10_jpeg / noise" and math.isclose(stamp["ACC Δ"], 2.1)
    assert not reproduce.paper_is_reference(table)
    files = reproduce.save_paper_table(table, "t_real", directory=tmp_path)
    assert [f.name for f in files] == ["t_real.csv", "t_real.md", "t_real.tex"]
    md = files[1].read_text()
    assert "| H Δ |" in md and "+2.1" in md and "τ" not in md
    assert "H $\\Delta$" in files[2].read_text() and "H Δ" in files[0].read_text()


def test_an_empty_builtin_table_has_no_delta_columns_either():
    plan = registry.plan("02_table1_cifar_outlier_aware", methods="stamp")
    assert [c for c in reproduce.paper_table(plan, {}).columns if c.startswith("H ")] == ["H ours", "H paper"]
    real = registry.plan("02_table1_cifar_outlier_aware", methods="stamp", data_root="somewhere")
    assert "H Δ" in reproduce.paper_table(real, {}).columns


def _ranked(paper: list[float], ours: list[float], dataset: str = "cifar10_c") -> pd.DataFrame:
    names = ["stamp", "cotta", "tent", "source", "sar"][:len(paper)]
    return pd.DataFrame({"dataset": dataset, "outliers": "noise", "method": names, "H paper": paper, "H ours": ours})


def test_kendall_tau_is_one_for_the_same_order_and_minus_one_for_the_reverse():
    same = reproduce.rank_agreement(_ranked([80.1, 67.3, 59.7, 50.0], [90.0, 70.0, 65.0, 10.0]))
    assert same.loc[0, "kendall_tau"] == pytest.approx(1.0) and same.loc[0, "n_methods"] == 4
    assert same.loc[0, "paper_ranking"] == same.loc[0, "ours_ranking"] == "STAMP > CoTTA > Tent > Source"
    reverse = reproduce.rank_agreement(_ranked([80.1, 67.3, 59.7, 50.0], [10.0, 65.0, 70.0, 90.0]))
    assert reverse.loc[0, "kendall_tau"] == pytest.approx(-1.0)
    assert reverse.loc[0, "ours_ranking"] == "Source > Tent > CoTTA > STAMP"


def test_kendall_tau_b_with_a_tie_at_the_printed_precision():
    # Ours 75.04 and 74.96 both print as 75.0: a tie. Pairs: (STAMP, CoTTA) tied in ours, so
    # neither concordant nor discordant; (STAMP, Tent) and (CoTTA, Tent) concordant. tau-b =
    # (2 - 0) / sqrt((3 - 0) * (3 - 1)) = 2 / sqrt(6).
    table = _ranked([80.1, 67.3, 59.7], [75.04, 74.96, 50.0])
    row = reproduce.rank_agreement(table).iloc[0]
    assert row["kendall_tau"] == pytest.approx(2 / math.sqrt(6))
    assert row["ours_ranking"] == "STAMP = CoTTA > Tent"
    # At full precision there would be no tie, and tau = 1.
    assert reproduce.rank_agreement(table, digits=2).loc[0, "kendall_tau"] == pytest.approx(1.0)


def test_rank_agreement_ranks_per_panel_and_only_methods_with_both_numbers():
    table = pd.concat([_ranked([80.1, 67.3, float("nan")], [60.0, 70.0, 99.0]),
                       _ranked([40.0, 30.0], [1.0, 2.0], dataset="cifar100_c"),
                       _ranked([40.0], [1.0], dataset="imagenet_c")], ignore_index=True)
    got = reproduce.rank_agreement(table)
    assert list(got["dataset"]) == ["cifar10_c", "cifar100_c", "imagenet_c"]
    assert list(got["n_methods"]) == [2, 2, 1]
    assert list(got["kendall_tau"][:2]) == pytest.approx([-1.0, -1.0])
    assert math.isnan(got.loc[2, "kendall_tau"])  # one method: nothing to order
    assert got.loc[0, "ours_ranking"] == "CoTTA > STAMP"  # Tent has no paper number


def test_builtin_figure_compares_ranks_not_values(tmp_path):
    from stamplib.report import save_figure

    plan = registry.plan("02_table1_cifar_outlier_aware", methods="source,tent,stamp", seeds="0")
    h = {"source": 70.0, "tent": 80.0, "stamp": 60.0}  # the paper's order (STAMP 80.1, Source 62.3, Tent 59.7) reversed
    records = {c.spec.key(): _record(c.spec, acc=h[c.spec.method], auroc=h[c.spec.method]) for c in plan.cells}
    table = reproduce.paper_table(plan, records)
    fig = reproduce.plot_method_bars(table, "H-score per method: paper vs ours")
    ax = fig.axes[0]
    assert not ax.patches  # no bars
    assert "= −1.00 over 3 methods" in ax.get_title()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["paper's rank", "our rank"]
    assert "built-in CIFAR-10 benchmark" in fig.texts[0].get_text()
    first = [p.read_bytes() for p in save_figure(fig, "a", tmp_path)]
    again = [p.read_bytes() for p in save_figure(reproduce.plot_method_bars(table, "H-score per method: paper vs ours"),
                                                 "a", tmp_path / "again")]
    assert first == again  # byte-stable


def test_builtin_closed_set_heatmap_has_no_delta_panel():
    plan = registry.plan("05_table4_closed_set", methods="source", corruptions="gaussian_noise,contrast")
    records = {c.spec.key(): _record(c.spec, acc=30.0) for c in plan.cells}
    table = reproduce.paper_table(plan, records, per_corruption=True, metrics=("acc",))
    assert "ACC Δ" not in table.columns
    fig = reproduce.plot_corruption_heatmap(table, "ACC")
    assert [ax.get_title() for ax in fig.axes] == ["ours: accuracy (%)"]
    plt.close(fig)


def test_closed_set_table_has_a_row_per_corruption_and_the_mean():
    plan = registry.plan("05_table4_closed_set", methods="source", corruptions="gaussian_noise,contrast")
    records = {c.spec.key(): _record(c.spec, acc=30.0) for c in plan.cells}
    table = reproduce.paper_table(plan, records, per_corruption=True, metrics=("acc",))
    assert list(table["corruption"]) == ["gaussian_noise", "contrast", "mean"]
    assert list(table["ACC paper"]) == [28.7, 31.4, 57.3]


def test_newer_methods_are_extra_rows_without_paper_numbers(tmp_path):
    default = registry.plan("02_table1_cifar_outlier_aware", profile="smoke")
    assert [c.spec.method for c in default.cells] == list(methods.TABLE_ORDER)
    # real data: the scale whose figure still puts the paper's bars next to ours
    plan = registry.plan("02_table1_cifar_outlier_aware", methods="tent_come,stamp,unient,unient_plus,ostta",
                      data_root=str(tmp_path / "data"))
    records = {c.spec.key(): _record(c.spec, acc=60.0) for c in plan.cells}
    table = reproduce.paper_table(plan, records)
    assert list(table["method"]) == ["stamp", "tent_come", "unient", "unient_plus", "ostta"]
    newer = table[table["method"] != "stamp"]
    assert newer["ACC paper"].isna().all() and newer["H Δ"].isna().all()
    assert (newer["ACC ours"] == 60.0).all()
    md = reproduce.save_paper_table(table, "t", directory=tmp_path)[1].read_text()
    row = next(line for line in md.splitlines() if "UniEnt+" in line)
    assert "—" in row and "60.0" in row
    for label in ("Tent+COME", "UniEnt", "OSTTA"):
        assert label in md

    fig = reproduce.plot_method_bars(table, "H")  # bars without a paper number are left out
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["STAMP", "Tent+COME", "UniEnt", "UniEnt+",
                                                                     "OSTTA"]
    plt.close(fig)


def test_figures_of_the_builtin_benchmark_say_so_in_their_title():
    import pandas as pd

    from stamplib.report.reproduce import labelled_title

    assert "digits benchmark" in labelled_title("H", pd.DataFrame({"ours on": ["digits / noise"]}))
    assert "JPEG CIFAR-10" in labelled_title("H", pd.DataFrame({"ours on": ["cifar10_jpeg / noise"]}))
    assert labelled_title("H", pd.DataFrame({"ours on": ["cifar10_c / noise"]})) == "H"


def test_ablations_and_sweeps_draw_their_baseline_rows_seed_spread_as_a_band(tmp_path):
    """Issue 41: notebook 06's rows stay at seed 0; its default row over the quick profile's
    headline seeds (notebook 02's STAMP cells) is named under the table and drawn as a band."""
    plan = registry.plan("06_table5_ablation")
    assert {c.spec.seed for c in plan.cells} == {0} and {c.spec.seed for c in plan.band_cells} == {1, 2}
    h_of_seed = {0: 70.0, 1: 60.0, 2: 80.0}
    records = {c.spec.key(): _record(c.spec, acc=h_of_seed[c.spec.seed], auroc=h_of_seed[c.spec.seed])
               for c in (*plan.cells, *plan.band_cells)}
    band = reproduce.baseline_band(plan, records)
    assert len(band) == 1 and (band.loc[0, "h_min"], band.loc[0, "h"], band.loc[0, "h_max"]) == (60.0, 70.0, 80.0)
    table = reproduce.paper_table(plan, records, table="5")
    assert set(table["H ours"]) == {70.0}  # the table itself: seed 0 alone
    md = reproduce.save_paper_table(table, "t", directory=tmp_path, band=band)[1].read_text()
    assert ("The baseline row (S.A.+D.S.+RBM+S.W.) over seeds 0–2, mean (min–max): ACC 70.0 (60.0–80.0), "
            "AUROC 70.0 (60.0–80.0), H 70.0 (60.0–80.0); the band in the figure.") in md
    fig = reproduce.plot_variant_bars(table, "ablation", band=band)
    spans = [p for p in fig.axes[0].patches if p.get_label().startswith("band:") or p.get_alpha() == 0.18]
    assert len(spans) == 3  # one band per metric, behind our bars
    assert any(t.get_text() == "band: S.A.+D.S.+RBM+S.W. over seeds 0–2, min–max"
               for t in fig.axes[0].get_legend().get_texts())
    plt.close(fig)
    ratios = registry.plan("08_table6_outlier_ratio")
    records = {c.spec.key(): _record(c.spec, acc=h_of_seed[c.spec.seed], auroc=h_of_seed[c.spec.seed])
               for c in (*ratios.cells, *ratios.band_cells)}
    band = reproduce.baseline_band(ratios, records)
    assert band.loc[0, "variant"] == "ratio=0.2"
    fig = reproduce.plot_ratio_lines(reproduce.paper_table(ratios, records, table="6"), "ratios", band=band)
    assert [p.get_alpha() for p in fig.axes[0].patches] == [0.18]
    plt.close(fig)
    assert reproduce.baseline_band(registry.plan("06_table5_ablation", profile="full"), {}).empty


def test_tables_over_seeds_show_the_mean_with_min_max_and_ranks_as_intervals(tmp_path):
    plan = registry.plan("02_table1_cifar_outlier_aware", methods="source,tent,stamp")
    h = {"source": (50.0, 50.0, 50.0), "tent": (60.0, 66.0, 60.0), "stamp": (70.0, 62.0, 71.0)}
    records = {c.spec.key(): _record(c.spec, acc=h[c.spec.method][c.spec.seed], auroc=h[c.spec.method][c.spec.seed])
               for c in plan.cells}
    table = reproduce.paper_table(plan, records)
    md = reproduce.save_paper_table(table, "t", directory=tmp_path)[1].read_text()
    assert "| 67.7 (62.0–71.0) |" in md and "Ours over seeds 0–2: the mean, and in brackets" in md
    assert ("STAMP ranks 1st–2nd of the paper's 3 methods by H over seeds 0–2 (67.7 (62.0–71.0); best other: Tent "
            "62.0 (60.0–66.0))") in md  # whether it leads under every seed: the ledger's verdict (test_claims.py)
    assert "τ_b = +0.33 / −0.33 / +0.33 (seeds 0–2; range −0.33 to +0.33) over 3 methods" in md
    csv = pd.read_csv(tmp_path / "t.csv")
    assert {"H seed 0", "H seed 1", "H seed 2", "H min", "H max"} <= set(csv.columns)


def test_a_figure_drawn_again_to_the_same_bytes_is_not_rewritten(tmp_path):
    """A command that draws the same numbers leaves the file as it is (issue 83: no rewrite without a
    change); new numbers are written, whole."""
    import os

    import matplotlib.pyplot as plt

    from stamplib.report import save_figure

    def drawn(values: list[float]) -> plt.Figure:
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot(values)
        return fig

    written = save_figure(drawn([1.0, 2.0]), "same", tmp_path)
    stamps = [p.stat().st_mtime_ns for p in written]
    for path in written:  # an earlier time, so that a rewrite would show
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert save_figure(drawn([1.0, 2.0]), "same", tmp_path) == written
    assert [p.stat().st_mtime_ns for p in written] == [1_000_000_000] * 2, stamps
    save_figure(drawn([1.0, 3.0]), "same", tmp_path)
    assert all(p.stat().st_mtime_ns != 1_000_000_000 for p in written)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
