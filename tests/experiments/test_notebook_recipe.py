"""Adding a notebook inside the package is what docs/architecture.md ("An experiment (a
notebook)") says: the page's module as a file of ``experiments/``, one import line in
``experiments/__init__.py`` and the notebook, nothing more (issue 50). Applied to a copy of the
checkout, the notebook plans from its parameters cell and through ``grid --dry-run`` in a new
process, and the rules other tests hold there stay true: experiments in notebook file-name order
(tests/experiments/test_plans.py), the lessons together (tests/teaching/test_course.py), the
paper notebooks' cells unchanged."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import stamplib
from stamplib import paths
from stamplib.experiments import registry

PACKAGE = Path(stamplib.__file__).resolve().parent
CHECKOUT = paths.repo_root() or Path.cwd()
RECIPE = CHECKOUT / "docs" / "architecture.md"
MODULE, NOTEBOOK = "learning_rates", "99_learning_rates"
IMPORT = f"from stamplib.experiments import {MODULE} as {MODULE}\n"
PARAMETERS = 'profile: str = "quick"  # smoke, quick or full\nlearning_rates: str = "0.001,0.01"\n'
SETUP = f"""from stamplib.experiments import execute, registry
from stamplib.experiments.parameters import NotebookParameters

params = NotebookParameters.from_notebook(globals())
plan = registry.plan("{NOTEBOOK}", params, learning_rates=learning_rates)
records = execute.compute(plan, params.run_context())
"""
#: What the copy says of its experiments (printed as JSON by a new process there).
REPORT = f"""
import json
from stamplib.experiments import course, registry
from stamplib.notebook_runner import discover, notebook_parameters
nb = [p for p in discover() if p.stem == "{NOTEBOOK}"][0]
params = {{k: eval(v["default"]) for k, v in notebook_parameters(nb).items()}}
plan = registry.plan(nb.stem, **params)
print(json.dumps({{"stems": [p.stem for p in discover()], "registered": list(registry.EXPERIMENTS),
                  "lessons": [e.notebook for e in course.LESSONS], "variants": [c.variant for c in plan.cells],
                  "table1": [s.key() for s in registry.plan("02_table1_cifar_outlier_aware").specs]}}))
"""


def recipe_module() -> str:
    """The page's module: its code block that plans the learning rates."""
    blocks = [b for b in re.findall(r"```python\n(.*?)```", RECIPE.read_text(), re.S) if "def plan_learning_rates" in b]
    assert len(blocks) == 1, "docs/architecture.md's notebook recipe has no module planning learning rates"
    return blocks[0]


def notebook() -> str:
    def cell(source: str, **metadata: object) -> dict:
        return {"cell_type": "code", "execution_count": None, "metadata": metadata, "outputs": [],
                "source": source.splitlines(keepends=True)}

    return json.dumps({"cells": [cell(PARAMETERS, tags=["parameters"]), cell(SETUP)],
                       "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                   "name": "python3"}},
                       "nbformat": 4, "nbformat_minor": 5}, indent=1)


def files(root: Path) -> dict[Path, bytes]:
    return {p.relative_to(root): p.read_bytes() for p in (*root.rglob("*.py"), *root.rglob("*.ipynb"))}


def test_a_new_notebook_is_three_files_and_plans_in_a_new_process(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    shutil.copytree(PACKAGE, root / "stamplib", ignore=shutil.ignore_patterns("__pycache__", "*.pt", "*.npz"))
    shutil.copytree(CHECKOUT / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copy(CHECKOUT / "pyproject.toml", root / "pyproject.toml")  # marks the copy as a checkout
    before = files(root)

    (root / "stamplib" / "experiments" / f"{MODULE}.py").write_text(recipe_module())
    init = root / "stamplib" / "experiments" / "__init__.py"
    init.write_text(init.read_text() + IMPORT)  # after the course's import, which is the file's last line
    (root / "notebooks" / f"{NOTEBOOK}.ipynb").write_text(notebook())
    after = files(root)
    assert {p for p in after if before.get(p) != after[p]} == {
        Path("stamplib/experiments/__init__.py"), Path(f"stamplib/experiments/{MODULE}.py"),
        Path(f"notebooks/{NOTEBOOK}.ipynb")}

    env = {**os.environ, "PYTHONPATH": str(root), "STAMPLIB_HOME": str(paths.home()), "OMP_NUM_THREADS": "1"}

    def in_copy(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=root, timeout=600)

    grid = in_copy("-m", "stamplib", "grid", "--notebook", "99", "--profile", "smoke", "--dry-run",
                   "--results", str(tmp_path / "results"))
    assert grid.returncode == 0 and NOTEBOOK in grid.stdout, grid.stdout[-2000:] + grid.stderr[-2000:]

    there = in_copy("-c", REPORT)
    assert there.returncode == 0, there.stderr[-3000:]
    found = json.loads(there.stdout)
    assert found["variants"] == ["lr=0.001", "lr=0.01"]  # planned from its own parameters cell
    computes_itself = {"01_source_models", "11_explore_a_stream"}
    assert [s for s in found["stems"] if s not in computes_itself] == found["registered"]  # file-name order
    assert found["registered"][-1] == NOTEBOOK and found["registered"][:-1] == list(registry.EXPERIMENTS)
    first = found["registered"].index(found["lessons"][0])
    assert found["registered"][first:first + len(found["lessons"])] == found["lessons"]
    assert found["table1"] == [s.key() for s in registry.plan("02_table1_cifar_outlier_aware").specs]
