"""A light import (issue 71): ``import stamplib`` and a ``stamplib.run`` load no module of the
layers that only read records (``evidence``, ``report``, ``teaching``) nor the site. Read from the
source (every import the run path can reach, function-level ones included) and seen in a new
process that imports the package and runs a cell, as the README does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_layers import GRAPH

REPO = Path(__file__).resolve().parents[1]
#: What a run never needs: the pages, the notebooks' tables and figures, the course, the site.
ABOVE_THE_RUN = ("stamplib.evidence", "stamplib.report", "stamplib.teaching", "stamplib.site")
#: A new process: the stamplib modules loaded by ``import stamplib``, then by a run of the spec
#: given as JSON (its records under the folder given), as JSON.
PROBE = """
import json, sys
import stamplib
loaded = {"import": sorted(m for m in sys.modules if m.startswith("stamplib"))}
stamplib.run(stamplib.RunSpec(**json.loads(sys.argv[1])), stamplib.RunContext.build(results=sys.argv[2]))
loaded["run"] = sorted(m for m in sys.modules if m.startswith("stamplib"))
print(json.dumps(loaded))
"""


def above_the_run(modules: list[str] | set[str]) -> list[str]:
    return sorted(m for m in modules if m.startswith(tuple(f"{heavy}." for heavy in ABOVE_THE_RUN))
                  or m in ABOVE_THE_RUN)


def reachable(start: set[str]) -> set[str]:
    """Every stamplib module ``start`` can import, at module level or inside a function."""
    seen, todo = set(), list(start)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += GRAPH.get(module, ())
    return seen


def loaded_by(spec: dict, results: Path) -> dict[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(spec), str(results)], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_nothing_the_run_path_can_reach_is_above_the_run() -> None:
    # stamplib.explore is the explorer face (a notebook's widget), imported on its first call.
    start = GRAPH["stamplib"] - {"stamplib.explorer"}
    assert "stamplib.evaluation.runner" in start and "stamplib.explorer" in GRAPH["stamplib"]
    assert above_the_run(reachable(start)) == []
    assert above_the_run(reachable({"stamplib.cli"}))  # it sees what a face imports inside a function


def test_import_stamplib_and_a_smoke_run_load_nothing_above_the_run(tmp_path: Path) -> None:
    """The README's example with the cheapest method (a forward per batch): the run path is the same."""
    loaded = loaded_by(dict(method="source", dataset="cifar10_builtin", outlier_set="noise", profile="smoke"),
                       tmp_path / "results")
    # `import stamplib` loads its names on first use (a few modules); the run loads the run path.
    assert len(loaded["import"]) <= 5 and "stamplib.evaluation.runner" in loaded["run"]
    assert list((tmp_path / "results").glob("source__*.json"))
    assert above_the_run(loaded["import"]) == [] and above_the_run(loaded["run"]) == [], loaded


@pytest.mark.slow
def test_the_readme_example_loads_nothing_above_the_run(tmp_path: Path) -> None:
    loaded = loaded_by(dict(method="stamp", dataset="cifar10_builtin", outlier_set="noise", profile="smoke"),
                       tmp_path / "results")
    assert above_the_run(loaded["run"]) == [], loaded
