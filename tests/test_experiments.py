"""Notebook plans: parameters → RunSpecs, shared cells, validation, paper-vs-ours tables."""

from __future__ import annotations

import math

import pytest

from stamplib import experiments as E
from stamplib.evaluation.spec import RunSpec
from stamplib.report import reproduce

NOTEBOOKS = list(E.EXPERIMENTS)


def test_every_numbered_notebook_from_02_has_a_plan():
    from stamplib.notebook_runner import discover

    stems = [nb.stem for nb in discover() if nb.stem[:2] >= "02"]
    assert stems == NOTEBOOKS


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_every_notebook_passes_its_parameters_cell_to_its_plan(nb):
    from stamplib.notebook_runner import notebook_parameters, notebooks_dir

    params = {k: eval(v["default"]) for k, v in notebook_parameters(notebooks_dir() / f"{nb}.ipynb").items()}
    plan = E.plan(nb, **params)
    assert plan.scale == "builtin" and plan.cells
    assert all(c.spec.profile == "quick" and c.spec.dataset == "digits" for c in plan.cells)


def test_full_profile_cell_counts_follow_the_paper():
    counts = {nb: len(E.plan(nb, profile="full").specs) for nb in NOTEBOOKS}
    assert counts == {
        "02_table1_cifar_outlier_aware": 2 * 4 * 14,  # the paper's ten methods + four newer ones
        "03_table2_imagenet_outlier_aware": 2 * 14,
        "04_table3_class_split": 2 * 14,
        "05_table4_closed_set": 2 * 14,
        "06_table5_ablation": 7,
        "07_fig_weight_strategies": 3,
        "08_table6_outlier_ratio": 3 * 5,
        "09_fig_augmentation_averaging": 4 * 2,
    }
    full = E.plan("02_table1_cifar_outlier_aware", profile="full").specs[0]
    assert len(full.corruptions) == 15 and full.outlier_ratio == 0.2


def test_stamps_default_cell_is_shared_between_notebooks():
    def stamp_default(nb):
        return {c.spec.key() for c in E.plan(nb).cells if c.spec.method == "stamp" and not c.spec.overrides
                and c.spec.outlier_ratio == 0.2}

    shared = stamp_default("02_table1_cifar_outlier_aware")
    assert len(shared) == 1
    for nb in ("06_table5_ablation", "07_fig_weight_strategies", "08_table6_outlier_ratio",
               "09_fig_augmentation_averaging"):
        assert stamp_default(nb) == shared, nb


def test_ablation_rows_switch_the_documented_overrides():
    cells = E.plan("06_table5_ablation", profile="full").cells
    by_label = {c.variant: dict(c.spec.overrides) for c in cells}
    assert by_label["sam=0,lr_decay=0,memory=0,weighting=none"] == {
        "sam": False, "lr_decay": False, "memory": False, "weighting": "none"}
    assert by_label["sam=1,lr_decay=1,memory=1,weighting=adaptive"] == {}
    assert all(c.spec.dataset == "cifar100_c" and c.spec.outliers == "svhn" for c in cells)


def test_ratio_sweep_reads_fractions_and_labels_rows_like_the_paper():
    plan = E.plan("08_table6_outlier_ratio", ratios="0.05,1/3")
    assert [c.variant for c in plan.cells] == ["ratio=0.05", "ratio=0.3333"]
    assert math.isclose(plan.cells[1].spec.outlier_ratio, 1 / 3)


def test_imagenet_stand_in_runs_the_imagenet_setting_without_the_normalised_input_quirk():
    plan = E.plan("03_table2_imagenet_outlier_aware")
    specs = {c.spec.method: c.spec for c in plan.cells}
    assert all(s.setting == "imagenet_c" for s in specs.values())
    assert dict(specs["cotta"].overrides) == {"clip_normalized_inputs": False}
    assert E.plan("03_table2_imagenet_outlier_aware", profile="full").cells[0].spec.setting == ""


def test_seeds_multiply_cells_and_average_with_std():
    plan = E.plan("09_fig_augmentation_averaging", seeds="0,1")
    assert len(plan.specs) == 4
    records = {c.spec.key(): _record(c.spec, acc=50.0 + 10 * c.spec.seed) for c in plan.cells}
    frame = E.over_seeds(E.results(plan, records))
    row = frame[frame["variant"] == "K=16"].iloc[0]
    assert row["acc"] == 55.0 and row["acc_std"] == 5.0 and row["n_seeds"] == 2


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"methods": "stamp,tnet"}, "methods: unknown"),
        ({"datasets": "cifar11"}, "datasets: unknown"),
        ({"outlier_sets": "svhm"}, "outlier_sets: unknown"),
        ({"corruptions": "gauss"}, "corruptions: unknown"),
        ({"severity": 6}, "severity must be"),
        ({"severity": 0}, "severity must be"),
        ({"outlier_ratio": 1.0}, "outlier_ratio must lie"),
        ({"outlier_ratio": -0.1}, "outlier_ratio must lie"),
        ({"seeds": "zero"}, "seeds: expected"),
        ({"seeds": "-1"}, "seeds: give"),
        ({"profile": "fast"}, "unknown profile"),
    ],
)
def test_bad_notebook_parameters_name_the_parameter(params, message):
    with pytest.raises(ValueError, match=message):
        E.plan("02_table1_cifar_outlier_aware", **params)


@pytest.mark.parametrize("ratios", ["0,0.2", "0.2,1", "1/0", "a"])
def test_bad_ratios_are_refused(ratios):
    with pytest.raises(ValueError, match="ratios"):
        E.plan("08_table6_outlier_ratio", ratios=ratios)


def test_device_is_checked():
    with pytest.raises(ValueError, match="device must be"):
        E.check_common("quick", "gpu", 5, 0.2)


def _record(spec: RunSpec, acc: float = 60.0, auroc: float = 70.0, collapsed: bool = False) -> dict:
    h = 2 * acc * auroc / (acc + auroc)
    per = {c: {"acc": acc, "auroc": auroc, "h": h, "collapsed": collapsed, "seconds": 1.0} for c in spec.corruptions}
    return {"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
            "mean": {"acc": acc, "auroc": auroc, "h": h}, "collapsed": list(spec.corruptions) if collapsed else [],
            "seconds": 1.0}


def test_paper_table_puts_ours_next_to_the_cell_it_stands_for(tmp_path):
    plan = E.plan("02_table1_cifar_outlier_aware", methods="tent,stamp")
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
    plan = E.plan("05_table4_closed_set", methods="source", corruptions="gaussian_noise,contrast")
    records = {c.spec.key(): _record(c.spec, acc=30.0) for c in plan.cells}
    table = reproduce.paper_table(plan, records, per_corruption=True, metrics=("acc",))
    assert list(table["corruption"]) == ["gaussian_noise", "contrast", "mean"]
    assert list(table["ACC paper"]) == [28.7, 31.4, 57.3]


def test_newer_methods_are_extra_rows_without_paper_numbers(tmp_path):
    default = E.plan("02_table1_cifar_outlier_aware", profile="smoke")
    assert [c.spec.method for c in default.cells] == list(E.PAPER_METHODS + E.NEWER_METHODS)
    plan = E.plan("02_table1_cifar_outlier_aware", methods="tent_come,stamp,unient,unient_plus,ostta")
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
