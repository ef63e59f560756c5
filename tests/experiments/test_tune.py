"""``python -m stamplib tune``: grid parsing, the authors' presets, the selection (both metric
directions, ties, missing cells), the store (a second call computes nothing), the output files
and the command line."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stamplib import cli, methods, models
from stamplib.evaluation import metrics
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import grid, tune
from stamplib.report import tuning
from tests.support import context_for, load_script

REPO = Path(__file__).resolve().parents[2]


def _boom(*args: object, **kwargs: object) -> None:
    raise AssertionError("work started that should not have")


# ------------------------------------------------------------------------------- parsing


def test_grid_values_take_the_config_fields_types() -> None:
    grid = tune.parse_grid(
        ["lr=0.1,1e-2, 5e-3", "num_views=1,16", "sam=true,False", "view_kind=crop_flip,cotta"], "stamp", "cifar10_c")
    assert grid == (("lr", (0.1, 0.01, 0.005)), ("num_views", (1, 16)), ("sam", (True, False)),
                    ("view_kind", ("crop_flip", "cotta")))
    assert [type(v) for _, values in grid for v in values] == [float] * 3 + [int] * 2 + [bool] * 2 + [str] * 2
    # an optional float: "none" is None; an integer spelling of a float field is a float
    assert tune.parse_grid(["uncertainty_mass=none,8"], "tent_come", "cifar10_c") == (("uncertainty_mass", (None, 8.0)),
                                                                                      )
    assert tune.check_grid("tent", "cifar10_c", {"lr": (1, "0.5")}) == (("lr", (1.0, 0.5)),)


@pytest.mark.parametrize(
    ("items", "match"),
    [
        (["lrr=0.1"], "unknown hyperparameter 'lrr' for method 'stamp': use one of alpha, "),
        (["lr="], "--grid lr has no values: give at least one, --grid NAME=V1,V2"),
        (["lr"], "expected --grid NAME=V1,V2,... (e.g. --grid lr=0.01,0.05,0.1), got --grid 'lr'"),
        (["lr=0.1,1e-1"], "--grid lr lists 0.1 twice (0.1, 1e-1): give each value once"),
        (["lr=0.1,,0.2"], "has an empty value: separate the values by single commas"),
        (["lr=0.1", "lr=0.2"], "--grid lr is given twice: list all its values in one --grid"),
        (["num_views=1.5"], "--grid num_views takes an integer, got '1.5'"),
        (["sam=maybe"], "--grid sam takes true or false, got 'maybe'"),
        (["view_kind=fog"], "--grid view_kind takes one of cotta, crop_flip, got 'fog'"),
        (["crop_fill=0.5"], "--grid crop_fill takes a tuple such as (1.0, 2.0), got '0.5'"),
    ],
)
def test_bad_grids_are_one_line_errors_that_say_what_to_do(items: list[str], match: str) -> None:
    with pytest.raises(ValueError, match=re.escape(match)):
        tune.parse_grid(items, "stamp", "cifar10_c")


def test_a_job_refuses_values_its_config_refuses_and_unknown_criteria() -> None:
    with pytest.raises(ValueError, match=re.escape("lr=-1.0 out of range for 'stamp': lr and alpha must be positive")):
        tune.TuneJob("stamp", grid={"lr": (-1.0,)})
    with pytest.raises(ValueError, match="unknown metric"):
        tune.TuneJob("tent", grid={"lr": (0.1,)}, criterion="hscore")
    with pytest.raises(ValueError, match="the grid is empty"):
        tune.TuneJob("tent")
    with pytest.raises(ValueError, match="preset 'stamp' is a grid of method 'stamp', not 'tent'"):
        tune.make_job("tent", preset="stamp")


# ------------------------------------------------------------------------------- presets


def test_stamp_preset_is_the_authors_intended_grid_without_the_typo() -> None:
    """test-time-val.sh (yuyongcan/STAMP) per data-set branch. Its STAMP command once passed a stray
    "$lamb" (issue #5: a typo); the intended grid is LR × α, no third dimension."""
    expected = {
        "cifar10_c": ([5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1],
                      [0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6]),
        "cifar100_c": ([1e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.5], [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]),
        "cifar10_c_8_2": ([1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 1.0],
                          [round(0.2 + 0.05 * i, 2) for i in range(14)]),
        "imagenet_c": ([1e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1], [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]),
        "cifar100_c_80_20": ([1e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1], [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]),
    }
    assert set(tune.PRESETS["stamp"].grids) == set(methods.HYPERPARAMETER_SETS)
    for hyperparameter_set, (lrs, alphas) in expected.items():
        grid = tune.preset_grid("stamp", "stamp", hyperparameter_set)
        assert list(grid) == ["lr", "alpha"]  # no "lamb"
        assert list(grid["lr"]) == lrs and list(grid["alpha"]) == alphas, hyperparameter_set
        # the values the paper (and our config) uses were among those searched
        config = methods.resolve_config("stamp", hyperparameter_set)
        assert config.lr in grid["lr"] and config.alpha in grid["alpha"], hyperparameter_set
    assert len(tune.make_job("stamp").specs()) == 11 * 8  # digits: the cifar10_c hyperparameter set


def test_every_preset_builds_a_valid_job_in_each_of_its_hyperparameter_sets() -> None:
    for preset in tune.PRESETS.values():
        for hyperparameter_set in preset.grids:
            job = tune.make_job(preset.method, preset=preset.name, hyperparameter_set=hyperparameter_set,
                                profile="smoke")
            assert len(job.specs()) == math.prod(len(v) for _, v in job.grid) >= 2
    assert tune.preset_grid("eata", "eata", "imagenet_c")["lr"] == (1e-4, 2.5e-4, 5e-4)
    assert tune.preset_grid("cotta", "cotta", "cifar100_c_80_20")["aug_threshold"] == (0.5, 0.72, 0.9)


def test_newer_methods_script_keeps_its_cells(tmp_path: Path) -> None:
    """benchmarks/tune_newer_methods.py is a thin call: the same RunSpecs (so the same stored
    records) as the script it replaced built by hand."""
    script = load_script("benchmarks/tune_newer_methods.py")
    alphas = (1.0, 0.5, 0.2, 0.1)
    for method in ("unient", "ostta", "tent_come"):
        hyperparameter_sets = list(script.hyperparameter_sets(method))
        assert hyperparameter_sets == (["cifar10_c"] if method == "tent_come" else ["cifar10_c", "imagenet_c"])
        new = [s.key() for hp in hyperparameter_sets for s in tune.TuneJob(
            method, hyperparameter_set=hp, grid=tuple(tune.preset_grid(method, method, hp).items())).specs()]
        if method == "unient":
            cells = [(hp, {"alpha_marginal": a, "alpha_ood": b}) for hp in hyperparameter_sets for a in alphas
                     for b in alphas]
        elif method == "ostta":
            cells = [(hp, {"alpha_marginal": a}) for hp in hyperparameter_sets for a in alphas]
        else:
            cells = [("cifar10_c", {"lr": lr}) for lr in (1e-4, 2.5e-4, 1e-3, 5e-3)]
        old = [RunSpec.make(method, overrides=o, corruptions=("gaussian_noise",), hyperparameter_set=hp).key()
               for hp, o in cells]
        assert new == old, method


def test_newer_methods_script_runs_its_command_line(tmp_path: Path, digits_model: object) -> None:
    # digits_model: the built-in source model is trained (once, minutes on a fresh clone) and
    # cached before the script starts, so that the script's timeout covers the tuning alone.
    done = subprocess.run(
        [sys.executable, "benchmarks/tune_newer_methods.py", "--methods", "tent_come", "--profile", "smoke",
         "--results", str(tmp_path / "results"), "--out", str(tmp_path / "out")],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "tent_come, optimiser of hyperparameter set cifar10_c:" in done.stdout and "<- chosen" in done.stdout
    assert done.stdout.count("| 0.0001 |") == 1 and "config uses: lr=0.0001" in done.stdout
    stem = "tune__tent_come__digits__noise__cifar10_c__smoke"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"{stem}.csv", f"{stem}.md"]


# ------------------------------------------------------------------------------- selection


class _FakeStore:
    """Records with chosen means, by key: select() only asks for them."""

    def __init__(self, job: tune.TuneJob, means: list[dict[str, float] | None]) -> None:
        self.records = {s.key(): None if m is None else Record.from_json({"key": s.key(), "spec": s.to_dict(),
                                                                          "mean": m})
                        for s, m in zip(job.specs(), means)}

    def get(self, spec: RunSpec) -> Record | None:
        return self.records[spec.key()]


def test_selection_respects_the_metrics_direction_ties_and_missing_cells() -> None:
    assert not metrics.higher_is_better("fpr95") and metrics.higher_is_better("h")
    lrs = (1e-4, 1e-3, 5e-3, 1e-2)
    means = [{"acc": 60.0, "auroc": 50.0, "h": 54.0, "fpr95": 30.0},
             {"acc": 61.0, "auroc": 52.0, "h": 56.0, "fpr95": 10.0},
             {"acc": 62.0, "auroc": 49.0, "h": 56.0, "fpr95": 10.0},
             None]
    by_h = tune.TuneJob("tent", grid={"lr": lrs})
    result = tune.select(by_h, _FakeStore(by_h, means))
    assert result.best == 1 and result.chosen == {"lr": 1e-3} and result.value == 56.0  # tie: grid order
    assert result.current == {"lr": 1e-3} and result.current_row == 1
    assert [s.key() for s in result.missing] == [by_h.specs()[3].key()] and math.isnan(result.table.loc[3, "h"])
    by_fpr = tune.TuneJob("tent", grid={"lr": lrs}, criterion="fpr95")
    assert tune.select(by_fpr, _FakeStore(by_fpr, [{**m, "fpr95": v} for m, v in zip(means[:3], (30.0, 40.0, 5.0))]
                                          + [None])).chosen == {"lr": 5e-3}
    assert tune.best_index([float("nan"), 3.0, 1.0], higher_better=False) == 2
    with pytest.raises(ValueError, match="no cell of the grid has a finite value"):
        tune.best_index([float("nan")], higher_better=True)


def test_a_registered_metric_says_its_direction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "METRICS", dict(metrics.METRICS))
    monkeypatch.setattr(metrics, "METRIC_LABELS", dict(metrics.METRIC_LABELS))
    monkeypatch.setattr(metrics, "LOWER_IS_BETTER", set(metrics.LOWER_IS_BETTER))
    metrics.register_metric("risk", lambda p, s, y: 0.0, lower_is_better=True)
    assert not metrics.higher_is_better("risk")


# ------------------------------------------------------------------------------- on the smoke profile


def test_a_two_point_grid_chooses_the_best_stored_cell_and_writes_its_table(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results")
    job = tune.TuneJob("tent", profile="smoke", grid={"lr": (1e-3, 0.05)})
    result = tune.tune(job, context_for(store))
    stored = [store.get(spec).mean.h for spec in job.specs()]  # independently of select()
    best = max(range(len(stored)), key=lambda i: (stored[i], -i))
    assert stored[0] != stored[1]  # otherwise the grid would not test the choice
    assert result.chosen == job.cells()[best] and result.value == stored[best]
    assert list(result.table["h"]) == stored and list(result.table["chosen"]) == [i == best for i in range(2)]
    written = tuning.write_outputs(result, tmp_path / "out")
    assert [p.name for p in written] == ["tune__tent__digits__noise__cifar10_c__smoke.csv",
                                         "tune__tent__digits__noise__cifar10_c__smoke.md"]  # one dimension: no heatmap
    csv = written[0].read_text().splitlines()
    assert csv[0].startswith("lr,ACC,AUROC,H,") and len(csv) == 3 and csv[1].startswith("0.001,")
    md = written[1].read_text()
    assert "<- chosen" in md and "config uses: lr=0.001" in md
    assert not list((tmp_path / "out").glob(".tmp-*"))


def test_a_two_dimensional_grid_draws_a_heatmap_and_a_second_call_computes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ResultsStore(tmp_path / "results")
    job = tune.TuneJob("unient", profile="smoke", grid={"alpha_marginal": (1.0, 0.1), "alpha_ood": ("1",)})
    first = tune.tune(job, context_for(store), grid.ExecutorOptions())  # through run_grid, as `grid` computes cells
    written = tuning.write_outputs(first, tmp_path / "figures" / "tune")
    assert [p.suffix for p in written] == [".csv", ".md", ".png"]
    assert written[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setattr(ResultsStore, "put", _boom)
    monkeypatch.setattr(models, "source_model", _boom)
    again = tune.tune(job, context_for(store))
    assert again.chosen == first.chosen and again.table.equals(first.table)


def test_cli_help_documents_the_grid_syntax(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["tune", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "--grid NAME=V1,V2,..." in text and "--grid lr=0.01,0.05,0.1 --grid alpha=0.25,0.3,0.4" in text
    assert "--preset" in text and "figures/tune" in text


def test_cli_tunes_and_refuses_a_bad_grid_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["tune", "tent", "--dataset", "digits", "--outlier-set", "noise", "--profile", "smoke",
            "--results", str(tmp_path / "results"), "--out", str(tmp_path / "out")]
    assert cli.main([*argv, "--grid", "lr=0.001,0.05"]) == 0
    out = capsys.readouterr().out
    assert "2 cells (lr 2), 2 to compute" in out and "<- chosen" in out and "config uses: lr=0.001" in out
    assert len(list((tmp_path / "out").glob("tune__tent__*"))) == 2
    monkeypatch.setattr(models, "source_model", _boom)
    assert cli.main([*argv, "--grid", "learning_rate=0.1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: unknown hyperparameter 'learning_rate' for method 'tent'")


def test_set_and_tune_type_an_override_by_one_rule() -> None:
    """The config field's type decides, for ``run --set`` (a RunSpec's overrides) and for
    ``tune --grid`` alike: "true" is a bool for both, "1" an integer field's 1, "none" None."""
    given = {"sam": "true", "num_views": "1", "lr": "0.05", "weighting": "static"}
    typed = methods.typed_overrides("stamp", "cifar10_c", given)
    assert typed == {"sam": True, "num_views": 1, "lr": 0.05, "weighting": "static"}
    assert [type(v) for v in typed.values()] == [bool, int, float, str]
    parsed = tune.parse_grid([f"{name}={value}" for name, value in given.items()], "stamp", "cifar10_c")
    assert {name: values[0] for name, values in parsed} == typed
    # A RunSpec holds its overrides typed, so the text and the value name one record.
    assert RunSpec.make("stamp", overrides=given).key() == RunSpec.make("stamp", overrides=typed).key()
