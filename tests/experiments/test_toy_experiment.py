"""Adding a notebook is one module plus its registration (issue 36 item 1): the toy experiment
of ``toy_experiment.py`` plans, runs through the grid's planning and takes its own parameter, in
this checkout and from a wheel installed outside it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stamplib.experiments import plans
from tests.faces.test_outside_method import _installed_wheel

TOY = Path(__file__).with_name("toy_experiment.py")
CHECK = """
import toy_experiment
from stamplib import cli
from stamplib.experiments import plans

plan = plans.plan("99_toy_learning_rates", profile="smoke", learning_rates="0.001,0.01")  # by name, at the edge
assert plan.experiment is toy_experiment.TOY and plan.notebook == "99_toy_learning_rates"
assert [c.variant for c in plan.cells] == ["lr=0.001", "lr=0.01"], plan.cells
assert [dict(c.spec.overrides)["lr"] for c in plan.cells] == [0.001, 0.01]
assert {c.spec.dataset for c in plan.cells} == {"digits"} and {c.spec.method for c in plan.cells} == {"tent"}
assert plans.resolve_notebooks(["99"]) == [toy_experiment.TOY]
assert cli.main(["grid", "--notebook", "99", "--profile", "smoke", "--param", "learning_rates=0.1",
                 "--dry-run"]) == 0
try:
    plans.register(toy_experiment.TOY)
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


def test_a_toy_experiment_registers_and_plans_from_a_wheel(toy_module: Path, tmp_path: Path) -> None:
    done = _check(_installed_wheel(tmp_path), toy_module, tmp_path)
    assert done.returncode == 0 and "toy experiment ok" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]


def test_experiments_refer_to_objects_and_an_unknown_name_is_one_clear_error() -> None:
    assert plans.plan(plans.TABLE1, profile="smoke").experiment is plans.TABLE1
    assert plans.TABLE1.averages_outlier_sets and not plans.CLASS_SPLIT.averages_outlier_sets
    with pytest.raises(ValueError, match="unknown notebook '77_nothing'"):
        plans.plan("77_nothing")
    with pytest.raises(ValueError, match="give it setups per scale"):
        plans.register(plans.Experiment("98_no_setups", plans.plan_method_table))
