"""Paper-vs-ours tables from a plan and its records (stamplib.report.reproduce)."""

from __future__ import annotations

import math

from stamplib import methods
from stamplib.evaluation import plans
from stamplib.evaluation.spec import RunSpec
from stamplib.report import reproduce


def _record(spec: RunSpec, acc: float = 60.0, auroc: float = 70.0, collapsed: bool = False) -> dict:
    h = 2 * acc * auroc / (acc + auroc)
    per = {c: {"acc": acc, "auroc": auroc, "h": h, "collapsed": collapsed, "seconds": 1.0} for c in spec.corruptions}
    return {"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
            "mean": {"acc": acc, "auroc": auroc, "h": h}, "collapsed": list(spec.corruptions) if collapsed else [],
            "seconds": 1.0}


def test_paper_table_puts_ours_next_to_the_cell_it_stands_for(tmp_path):
    plan = plans.plan("02_table1_cifar_outlier_aware", methods="tent,stamp")
    records = {c.spec.key(): _record(c.spec, acc=80.0 if c.spec.method == "stamp" else 70.0,
                                     collapsed=c.spec.method == "tent") for c in plan.cells}
    table = reproduce.paper_table(plan, records)
    assert list(table["method"]) == ["tent", "stamp"]  # the paper's row order
    stamp = table[table["method"] == "stamp"].iloc[0]
    assert stamp["dataset"] == "cifar10_c" and stamp["ours on"] == "digits / noise"
    assert stamp["ACC paper"] == 77.9 and stamp["ACC ours"] == 80.0
    assert math.isclose(stamp["ACC Δ"], 2.1)
    files = reproduce.save_paper_table(table, "t", directory=tmp_path)
    md = files[1].read_text()
    assert "†" in md and "collapsed" in md  # Tent's collapse is flagged, not silently averaged
    assert "STAMP" in md and "+2.1" in md


def test_closed_set_table_has_a_row_per_corruption_and_the_mean():
    plan = plans.plan("05_table4_closed_set", methods="source", corruptions="gaussian_noise,contrast")
    records = {c.spec.key(): _record(c.spec, acc=30.0) for c in plan.cells}
    table = reproduce.paper_table(plan, records, per_corruption=True, metrics=("acc",))
    assert list(table["corruption"]) == ["gaussian_noise", "contrast", "mean"]
    assert list(table["ACC paper"]) == [28.7, 31.4, 57.3]


def test_newer_methods_are_extra_rows_without_paper_numbers(tmp_path):
    default = plans.plan("02_table1_cifar_outlier_aware", profile="smoke")
    assert [c.spec.method for c in default.cells] == list(methods.TABLE_ORDER)
    plan = plans.plan("02_table1_cifar_outlier_aware", methods="tent_come,stamp,unient,unient_plus,ostta")
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
    import matplotlib.pyplot as plt

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
