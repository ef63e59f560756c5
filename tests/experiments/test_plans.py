"""Notebook plans: parameters → RunSpecs, shared cells, validation (the tables built from
them: tests/report/test_reproduce.py)."""

from __future__ import annotations

import math

import pytest

from stamplib import methods
from stamplib.experiments import course, registry
from stamplib.experiments import plans as E

NOTEBOOKS = list(registry.EXPERIMENTS)


#: Notebooks that compute what they show themselves, with no grid cells: the source models (01)
#: and the stream explorer (11, one run of one method, not a table).
SELF_COMPUTING = {"01_source_models", "11_explore_a_stream"}


def test_every_notebook_but_the_self_computing_ones_has_a_plan():
    from stamplib.notebook_runner import discover

    stems = [nb.stem for nb in discover()]
    assert SELF_COMPUTING <= set(stems)
    assert [s for s in stems if s not in SELF_COMPUTING] == NOTEBOOKS


def test_experiments_stand_in_notebook_file_name_order_whichever_module_registers_first(monkeypatch):
    """One rule, the notebooks' file names: a paper notebook numbered after the course (plans.py
    registers it before course.py registers 14–17) still comes after the lessons."""
    monkeypatch.setattr(registry, "EXPERIMENTS", {})
    later = registry.Experiment("18_after_the_course", E.plan_method_table, E.NOISE_SETUPS)
    for experiment in (E.TABLE1, later, *course.LESSONS, E.WALKTHROUGH):  # plans' order, then the course's
        registry.register(experiment)
    lessons = [e.notebook for e in course.LESSONS]
    assert list(registry.EXPERIMENTS) == ["00_walkthrough", "02_table1_cifar_outlier_aware", *lessons,
                                          "18_after_the_course"]
    assert registry.resolve_notebooks(["18", "02"]) == [E.TABLE1, later]


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_every_notebook_passes_its_parameters_cell_to_its_plan(nb):
    from stamplib.notebook_runner import notebook_parameters, notebooks_dir

    params = {k: eval(v["default"]) for k, v in notebook_parameters(notebooks_dir() / f"{nb}.ipynb").items()}
    plan = registry.plan(nb, **params)  # the walkthrough's are not the plan's names: ignored there
    assert plan.scale == "builtin" and plan.cells
    # The quick profile runs on the built-in CIFAR-10 photographs (the class split in Table 3).
    assert all(c.spec.profile == "quick" and c.spec.dataset.startswith("cifar10_builtin") for c in plan.cells)


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_the_smoke_profile_keeps_the_digits_and_they_stay_selectable_by_name(nb):
    smoke = registry.plan(nb, profile="smoke")
    assert smoke.cells and {c.spec.dataset for c in smoke.cells} == {"digits"}
    assert {c.spec.outlier_set for c in smoke.cells} <= {"noise", "none", "digits_heldout"}
    if nb == "00_walkthrough":
        return  # the walkthrough takes the profile's benchmark, no datasets parameter
    quick = registry.plan(nb, profile="quick", seeds="0")  # the digits by name: seed 0, the notebook's own data
    by_name = registry.plan(nb, profile="quick", datasets="digits")
    assert {c.spec.dataset for c in by_name.cells} == {"digits"}
    # Same outlier sets as the smoke profile's digits (digits 8–9 stand in for the held-out classes).
    assert {c.spec.outlier_set for c in by_name.cells} == {c.spec.outlier_set for c in smoke.cells}
    assert [c.paper_dataset for c in by_name.cells] == [c.paper_dataset for c in quick.cells]


def test_the_class_split_runs_on_the_built_in_ship_and_truck():
    quick = registry.plan("04_table3_class_split", methods="stamp")
    assert [(c.spec.dataset, c.spec.outlier_set, c.paper_dataset, c.spec.seed) for c in quick.cells] == [
        ("cifar10_builtin_8_2", "heldout_classes", "cifar10_c_8_2", seed) for seed in (0, 1, 2)]


def test_the_headline_tables_run_three_seeds_on_the_built_in_benchmark_only():
    """Issue 41: notebooks 02, 04 and 05 take the quick profile's headline seeds on the built-in
    benchmark; everything else, real data and the full profile take seed 0 unless told."""
    for nb in ("02_table1_cifar_outlier_aware", "04_table3_class_split", "05_table4_closed_set"):
        assert {c.spec.seed for c in registry.plan(nb, methods="stamp").cells} == {0, 1, 2}, nb
        assert {c.spec.seed for c in registry.plan(nb, methods="stamp", data_root="/data").cells} == {0}, nb
        assert {c.spec.seed for c in registry.plan(nb, methods="stamp", profile="full").cells} == {0}, nb
        assert {c.spec.seed for c in registry.plan(nb, methods="stamp", profile="smoke").cells} == {0}, nb
        assert {c.spec.seed for c in registry.plan(nb, methods="stamp", seeds="4").cells} == {4}, nb
        assert {c.spec.seed for c in registry.plan(nb, methods="stamp", datasets="digits").cells} == {0}, nb
    for nb in ("06_table5_ablation", "10_inside_the_stream", "12_realistic_stream", "13_stress_streams"):
        assert {c.spec.seed for c in registry.plan(nb).cells} == {0}, nb


def test_full_profile_cell_counts_follow_the_paper():
    counts = {nb: len(registry.plan(nb, profile="full").specs) for nb in NOTEBOOKS}
    rows = len(methods.TABLE_ORDER)  # the paper's ten methods + the newer ones that ask for a row
    no_batch_of_one = sum(methods.method_class(m).min_batch_size > 1 for m in methods.TABLE_ORDER)
    assert counts == {
        "00_walkthrough": 4,
        "02_table1_cifar_outlier_aware": 2 * 4 * rows,
        "03_table2_imagenet_outlier_aware": 2 * rows,
        "04_table3_class_split": 2 * rows,
        "05_table4_closed_set": 2 * rows,
        "06_table5_ablation": 7,
        "07_fig_weight_strategies": 3,
        "08_table6_outlier_ratio": 3 * 5,
        "09_fig_augmentation_averaging": 4 * 2,
        "10_inside_the_stream": 6 * 3,  # the six traced methods × iid, continual, Dirichlet
        "12_realistic_stream": 2 * 4 * rows * 2,  # Table 1's cells under both protocols
        "13_stress_streams": rows * (1 + 6) - no_batch_of_one,  # the paper's stream, 3 batch sizes on one
                                                  # corruption (the batch of 64 is read from the paper's
                                                  # stream), 3 harder streams; no UniEnt batch of 1
        "14_course_adapting_at_test_time": 3 + 2 * 2,  # Source, BN Stats, Tent; two on the long stream, ± outliers
        "15_course_outliers_in_the_stream": 8 + 2 + 2 * 2,  # + the five filters; closed set; the long streams
        "16_course_stamp_piece_by_piece": 1 + 5,  # Tent, then five of Table 5's rows
        "17_course_when_it_breaks": 2 + 4 * 4 - 1,  # STAMP ± self-weights; four methods × (batch of 16,
                                                   # sorted, mixed, the paper's stream, which is also the
                                                   # batch of 64); STAMP's shared
    }
    full = registry.plan("02_table1_cifar_outlier_aware", profile="full").specs[0]
    assert len(full.corruptions) == 15 and full.outlier_ratio == 0.2


def test_inside_the_stream_shares_its_iid_cells_with_table_1_and_parses_stream_kinds():
    inside = registry.plan("10_inside_the_stream")
    table1 = set(registry.plan("02_table1_cifar_outlier_aware").specs)
    iid = [c.spec for c in inside.cells if c.variant == "iid"]
    assert iid and set(iid) <= table1
    harder = {c.variant: c.spec for c in inside.cells if c.spec.method == "stamp"}
    assert harder["continual"].stream.schedule == "continual" and harder["dirichlet:0.1"].stream.dirichlet == 0.1
    assert E.parse_stream_kinds("burst=32,dirichlet:1") == (("burst=32", {"outlier_burst": 32}),
                                                            ("dirichlet:1", {"dirichlet": 1.0}))
    with pytest.raises(ValueError, match="unknown stream"):
        E.parse_stream_kinds("shuffled")


def test_the_realistic_stream_shares_its_paper_protocol_cells_with_table_1():
    both = registry.plan("12_realistic_stream")
    table1 = registry.plan("02_table1_cifar_outlier_aware", seeds="0").specs
    paper = [c.spec for c in both.cells if c.variant == E.PAPER_PROTOCOL]
    realistic = [c.spec for c in both.cells if c.variant == E.REALISTIC_PROTOCOL]
    assert paper == table1 and len(realistic) == len(table1) == len(methods.TABLE_ORDER)
    assert all(s.stream.realistic and s.stream.relative_speed == 0 for s in realistic)
    assert [s.with_stream(realistic=False) for s in realistic] == paper
    fixed = registry.plan("12_realistic_stream", relative_speed="17")
    assert {c.spec.stream.relative_speed for c in fixed.cells if c.variant == E.REALISTIC_PROTOCOL} == {17}
    with pytest.raises(ValueError, match="relative_speed is C"):
        registry.plan("12_realistic_stream", relative_speed=-2)


def test_stamps_default_cell_is_shared_between_notebooks():
    def stamp_default(nb):
        return {c.spec.key() for c in registry.plan(nb).cells if c.spec.method == "stamp" and not c.spec.overrides
                and c.spec.outlier_ratio == 0.2}

    shared = stamp_default("02_table1_cifar_outlier_aware")
    assert len(shared) == 3  # seeds 0, 1 and 2 in the quick profile
    for nb in ("06_table5_ablation", "07_fig_weight_strategies", "08_table6_outlier_ratio",
               "09_fig_augmentation_averaging"):
        plan = registry.plan(nb)
        # the table's row at seed 0, and the same cell over seeds 1 and 2 for the band: notebook 02's
        band = {c.spec.key() for c in plan.band_cells}
        assert len(stamp_default(nb)) == 1 and stamp_default(nb) | band == shared, nb
        assert {c.spec.seed for c in plan.band_cells} == {1, 2} and not registry.plan(nb, profile="full").band_cells


def test_ablation_rows_switch_the_documented_overrides():
    cells = registry.plan("06_table5_ablation", profile="full").cells
    by_label = {c.variant: dict(c.spec.overrides) for c in cells}
    assert by_label["sam=0,lr_decay=0,memory=0,weighting=none"] == {
        "sam": False, "lr_decay": False, "memory": False, "weighting": "none"}
    assert by_label["sam=1,lr_decay=1,memory=1,weighting=adaptive"] == {}
    assert all(c.spec.dataset == "cifar100_c" and c.spec.outlier_set == "svhn" for c in cells)


def test_ratio_sweep_reads_fractions_and_labels_rows_like_the_paper():
    plan = registry.plan("08_table6_outlier_ratio", outlier_ratios="0.05,1/3")
    assert [c.variant for c in plan.cells] == ["ratio=0.05", "ratio=0.3333"]
    assert math.isclose(plan.cells[1].spec.outlier_ratio, 1 / 3)


def test_imagenet_stand_in_runs_the_imagenet_hyperparameter_set_without_the_normalised_input_quirk():
    plan = registry.plan("03_table2_imagenet_outlier_aware")
    specs = {c.spec.method: c.spec for c in plan.cells}
    assert all(s.hyperparameter_set == "imagenet_c" for s in specs.values())
    assert dict(specs["cotta"].overrides) == {"clip_normalized_inputs": False}
    assert registry.plan("03_table2_imagenet_outlier_aware", profile="full").cells[0].spec.hyperparameter_set == ""


def test_seeds_multiply_cells():
    plan = registry.plan("09_fig_augmentation_averaging", seeds="0,1")
    assert sorted(c.spec.seed for c in plan.cells) == [0, 0, 1, 1]
    # the default row's band takes the headline seeds the table lacks
    assert [(c.variant, c.spec.seed) for c in plan.band_cells] == [("K=16", 2)] and len(plan.specs) == 5


def test_the_stress_batch_axis_reads_the_paper_batch_from_table_1_and_leaves_one_to_the_full_profile():
    quick, full = registry.plan("13_stress_streams", methods="stamp"), registry.plan("13_stress_streams",
                                                                                     methods="stamp",
                                                                         profile="full")
    sizes = [c.variant for c in quick.cells if c.variant.startswith(E.BATCH_AXIS)]
    assert sizes == ["batch size=4", "batch size=16", "batch size=64"]
    assert [c.variant for c in full.cells if c.variant.startswith(E.BATCH_AXIS)][0] == "batch size=1"
    paper_batch = next(c for c in quick.cells if c.variant == "batch size=64")
    table1 = registry.plan("02_table1_cifar_outlier_aware", methods="stamp", seeds="0").cells[0].spec
    assert paper_batch.spec == table1 and paper_batch.corruptions == ("gaussian_noise",)
    assert registry.plan("13_stress_streams", methods="stamp", batch_sizes="1,64").cells[0].variant == "batch size=1"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"methods": "stamp,tnet"}, "methods: unknown"),
        ({"datasets": "cifar11"}, "datasets: unknown"),
        ({"outlier_sets": "svhm"}, "outlier_sets: unknown"),
        ({"corruptions": "gauss"}, "corruptions: unknown"),
        ({"severity": 6}, "severity must be"),
        ({"severity": 0}, "severity must be"),
        ({"outlier_ratio": 1.0}, r"outlier_ratio .* must be in \[0, 1\)"),
        ({"outlier_ratio": -0.1}, r"outlier_ratio .* must be in \[0, 1\)"),
        ({"seeds": "zero"}, "seeds: expected"),
        ({"seeds": "-1"}, "seeds: give"),
        ({"profile": "fast"}, "unknown profile"),
    ],
)
def test_bad_notebook_parameters_name_the_parameter(params, message):
    with pytest.raises(ValueError, match=message):
        registry.plan("02_table1_cifar_outlier_aware", **params)


@pytest.mark.parametrize("ratios", ["0,0.2", "0.2,1", "1/0", "a"])
def test_bad_ratios_are_refused(ratios):
    with pytest.raises(ValueError, match="outlier_ratios"):
        registry.plan("08_table6_outlier_ratio", outlier_ratios=ratios)


def test_device_is_checked():
    with pytest.raises(ValueError, match="device must be"):
        registry.plan("02_table1_cifar_outlier_aware", device="gpu")


def test_cells_are_deduplicated_across_notebooks():
    per = registry.cells_by_notebook(["06", "07"], profile="smoke")
    both = registry.cells(["06", "07"], profile="smoke")
    keys = [s.key() for s in both]
    assert len(keys) == len(set(keys)) == len({s.key() for specs in per.values() for s in specs})
    assert len(both) < sum(len(s) for s in per.values())  # STAMP's default row is in both
    with pytest.raises(ValueError, match="no registered experiment matches"):
        registry.cells(["99"], profile="smoke")



def test_the_walkthrough_compares_methods_on_its_corruption_first():
    plan = registry.plan("00_walkthrough", profile="quick", methods_to_compare="source,stamp", corruption="fog")
    assert [c.spec.method for c in plan.cells] == ["source", "stamp"]
    assert plan.cells[0].spec.corruptions == ("fog", "gaussian_noise", "defocus_blur", "contrast")
    assert registry.plan("00_walkthrough", corruption="contrast").cells[0].spec.corruptions[0] == "gaussian_noise"
    with pytest.raises(ValueError, match="methods: unknown"):
        registry.plan("00_walkthrough", methods_to_compare="tnet")
    with pytest.raises(ValueError, match="unknown outlier set 'cifar'"):
        registry.plan("00_walkthrough", outlier_set="cifar")


def test_grid_parameters_are_checked_by_name():
    registry.check_parameter_names(registry.resolve_notebooks(["02", "06"]), ["methods", "seeds"])  # 02 takes methods
    with pytest.raises(ValueError, match=r"--param \['method'\]: no chosen notebook takes it"):
        registry.check_parameter_names(["02_table1_cifar_outlier_aware"], ["method"])
    with pytest.raises(ValueError, match="profile"):
        registry.check_parameter_names(["02_table1_cifar_outlier_aware"], ["profile"], flags=("profile",))
