"""Adding a method is what docs/architecture.md ("A method") says: one new file, and nothing
more (issue 50). The page's file is written into a copy of the package; in a new process the
method runs from the command line and passes its contract, and the method tables' rows and the
notebooks' cells stay what they are here, so the tests that count them stay green."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import stamplib
from stamplib import methods, paths
from stamplib.experiments import registry
from stamplib.methods.base import _REGISTRY

PACKAGE = Path(stamplib.__file__).resolve().parent
RECIPE = (paths.repo_root() or Path.cwd()) / "docs" / "architecture.md"
NAME = "my_method"
#: The headline tables, whose default rows are the method tables' rows (notebooks 02, 04, 05).
HEADLINE = ("02_table1_cifar_outlier_aware", "04_table3_class_split", "05_table4_closed_set")
#: What the copy's package says of its rows and cells (printed as JSON by a new process there).
ROWS_AND_CELLS = f"""
import json
from stamplib import methods
from stamplib.experiments import registry
print(json.dumps({{"available": methods.available(), "rows": list(methods.TABLE_ORDER),
                  "cells": {{nb: [s.key() for s in registry.plan(nb, profile="quick").specs] for nb in
                  {HEADLINE!r}}}}}))
"""


def recipe_file() -> tuple[str, str]:
    """The page's new file: its path in the package and its text."""
    found = re.findall(r"```python\n# the new file: stamplib/(methods/\w+\.py)\n(.*?)```", RECIPE.read_text(), re.S)
    assert len(found) == 1, "docs/architecture.md's method recipe has no `# the new file: stamplib/methods/…` block"
    return found[0]


def package_copy(tmp_path: Path) -> Path:
    """A copy of the package (the built-in benchmark's large files linked, not copied)."""
    copy = tmp_path / "src" / "stamplib"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pt", "*.npz"))
    for shipped in (*PACKAGE.rglob("*.pt"), *PACKAGE.rglob("*.npz")):
        (copy / shipped.relative_to(PACKAGE)).symlink_to(shipped)
    return copy


def in_copy(copy: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(copy.parent), "STAMPLIB_HOME": str(paths.home()),
           "OMP_NUM_THREADS": "1"}  # the cached digits model is reused
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=copy.parent,
                          timeout=600)


def test_the_recipe_registers_a_method_and_adds_no_row_here(monkeypatch) -> None:
    """In this process, cheaply: the file registers its method and asks for no table row."""
    where, text = recipe_file()
    module = types.ModuleType(f"stamplib.{where[:-3].replace('/', '.')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # where dataclass looks its module up
    try:
        exec(compile(text, where, "exec"), module.__dict__)  # the page's own code
        assert NAME in methods.available() and methods.method_class(NAME).table_row is None
        assert methods.table_order() == methods.TABLE_ORDER  # what tests/methods/test_hyperparameter_sets.py checks
        assert set(methods.TABLE_ORDER) <= set(methods.available())
    finally:
        _REGISTRY.pop(NAME, None)


def test_a_new_method_is_one_file_that_runs_and_passes_its_contract(tmp_path: Path, digits_model) -> None:
    copy = package_copy(tmp_path)
    where, text = recipe_file()
    before = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*.py")}
    (copy / where).write_text(text)
    after = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*.py")}
    assert {p for p in after if before.get(p) != after[p]} == {Path(where)}  # one file, nothing edited

    results = tmp_path / "results"
    run = in_copy(copy, "-m", "stamplib", "run", "--method", NAME, "--dataset", "digits", "--profile", "smoke",
                  "--corruptions", "none", "--results", str(results), "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads(run.stdout[run.stdout.index("\n{") + 1:])
    assert record["spec"]["method"] == NAME and 0.0 <= record["mean"]["acc"] <= 100.0
    assert list(results.rglob(f"{NAME}__*{record['key']}.json"))

    contract = in_copy(copy, "-m", "stamplib", "check-method", NAME)
    assert contract.returncode == 0 and "failed" not in contract.stdout.splitlines()[-1], contract.stdout[-3000:]

    # The copy's rows and its headline notebooks' cells are this checkout's: registered ⊇ rows, and
    # what test_hyperparameter_sets, test_plans, test_builtin_benchmark and the reference run count is unchanged.
    there = in_copy(copy, "-c", ROWS_AND_CELLS)
    assert there.returncode == 0, there.stderr[-3000:]
    copied = json.loads(there.stdout)
    assert NAME in copied["available"] and copied["rows"] == list(methods.TABLE_ORDER)
    assert copied["cells"] == {nb: [s.key() for s in registry.plan(nb, profile="quick").specs] for nb in HEADLINE}

