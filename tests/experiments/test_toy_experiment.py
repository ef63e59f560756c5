"""Adding a notebook is one module plus its registration: the toy experiment of
``toy_experiment.py`` plans, runs through the grid's planning and takes its own parameter, in
this checkout and from a wheel installed outside it, where the entry-point group
``stamplib.experiments`` makes it known to a new process that never imports it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stamplib.experiments import plans, registry
from tests.faces.test_outside_method import _installed_wheel

TOY = Path(__file__).with_name("toy_experiment.py")
CHECK = """
import toy_experiment
from stamplib import cli
from stamplib.experiments import registry

plan = registry.plan("99_toy_learning_rates", profile="smoke", learning_rates="0.001,0.01")  # by name, at the edge
assert plan.experiment is toy_experiment.TOY and plan.notebook == "99_toy_learning_rates"
assert [c.variant for c in plan.cells] == ["lr=0.001", "lr=0.01"], plan.cells
assert [dict(c.spec.overrides)["lr"] for c in plan.cells] == [0.001, 0.01]
assert {c.spec.dataset for c in plan.cells} == {"digits"} and {c.spec.method for c in plan.cells} == {"tent"}
assert registry.resolve_notebooks(["99"]) == [toy_experiment.TOY]
assert cli.main(["grid", "--notebook", "99", "--profile", "smoke", "--param", "learning_rates=0.1",
                 "--dry-run"]) == 0
try:
    registry.register(toy_experiment.TOY)
except ValueError as err:
    assert "registered once" in str(err)
else:
    raise AssertionError("registered twice")
print("toy experiment ok")
"""


@pytest.fixture
def toy_module(tmp_path: Path) -> Path:
    shutil.copy(TOY, tmp_path / "toy_experiment.py")
    return tmp_path


def _check(python: str | Path, folder: Path, tmp_path: Path, extra_path: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(folder), extra_path) if p),
           "STAMPLIB_HOME": str(tmp_path / "home"), "STAMPLIB_RESULTS": str(tmp_path / "results"),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(python), "-c", CHECK], env=env, cwd=folder, capture_output=True, text=True,
                          timeout=900)


def test_a_toy_experiment_registers_and_plans_in_this_checkout(toy_module: Path, tmp_path: Path) -> None:
    import sys

    done = _check(sys.executable, toy_module, tmp_path, str(Path(__file__).resolve().parents[2]))
    assert done.returncode == 0 and "toy experiment ok" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]


TOY_PYPROJECT = """
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "stamplib-toy-experiment"
version = "0.1"

[project.entry-points."stamplib.experiments"]
toy = "toy_experiment"

[tool.setuptools]
py-modules = ["toy_experiment"]
"""


def _install_toy_wheel(python: Path, toy_module: Path, tmp_path: Path) -> None:
    """Build the toy experiment as a wheel of its own, with its entry point, and install it."""
    (toy_module / "pyproject.toml").write_text(TOY_PYPROJECT)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w",
                    str(tmp_path / "toy_dist"), str(toy_module)], check=True, timeout=600)
    (wheel,) = (tmp_path / "toy_dist").glob("stamplib_toy_experiment-*.whl")
    subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True,
                   timeout=600)


def test_a_toy_experiment_from_a_wheel_is_found_through_its_entry_point(toy_module: Path, tmp_path: Path) -> None:
    python = _installed_wheel(tmp_path)
    _install_toy_wheel(python, toy_module, tmp_path)
    elsewhere = tmp_path / "elsewhere"  # neither the checkout nor the toy's folder: only the wheels
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(STAMPLIB_HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1")
    grid = subprocess.run([python, "-m", "stamplib", "grid", "--notebook", "99", "--profile", "smoke",
                           "--results", str(tmp_path / "results"), "--dry-run"],
                          env=env, cwd=elsewhere, capture_output=True, text=True, timeout=900)
    assert grid.returncode == 0, grid.stdout[-2000:] + grid.stderr[-3000:]
    row = next(line.split() for line in grid.stdout.splitlines() if line.startswith("99_toy_learning_rates"))
    assert row[1:] == ["2", "0", "0", "2", "0"], grid.stdout  # two learning rates, none computed yet
    done = _check(python, elsewhere, tmp_path)  # imported as well, it is registered once
    assert done.returncode == 0 and "toy experiment ok" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]


def test_a_notebook_without_an_experiment_is_one_error_naming_the_entry_point_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from stamplib import cli, notebook_runner

    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("01_source_models", "11_explore_a_stream"):
        shutil.copy(notebook_runner.notebooks_dir() / f"{name}.ipynb", folder)
    (folder / "42_orphan.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4,
                                                        "nbformat_minor": 5}))
    monkeypatch.setattr(notebook_runner, "notebooks_dir", lambda: folder)
    results = ["--results", str(tmp_path / "results"), "--profile", "smoke", "--dry-run"]
    assert cli.main(["grid", "--notebook", "01", "11", *results]) == 0  # they declare they compute themselves
    assert "no grid cells" in capsys.readouterr().out
    assert cli.main(["grid", "--notebook", "42", *results]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "42_orphan has no registered experiment" in err
    assert "'stamplib.experiments'" in err and "computes_itself" in err
    assert cli.main(["grid", "--notebook", "77", *results]) == 2  # no notebook, no experiment
    assert "entry-point group 'stamplib.experiments'" in capsys.readouterr().err


def test_experiments_refer_to_objects_and_an_unknown_name_is_one_clear_error() -> None:
    assert registry.plan(plans.TABLE1, profile="smoke").experiment is plans.TABLE1
    assert plans.TABLE1.averages_outlier_sets and not plans.CLASS_SPLIT.averages_outlier_sets
    with pytest.raises(ValueError, match="unknown notebook '77_nothing'"):
        registry.plan("77_nothing")
    with pytest.raises(ValueError, match="give it setups per scale"):
        registry.register(registry.Experiment("98_no_setups", plans.plan_method_table))
