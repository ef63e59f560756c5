"""A grid whose cells only pretend to compute, run as a script by the grid's process tests.

Run as ``python grid_script.py MODE RESULTS MARKS [JOBS]``. Its module-level code also runs in
every spawned pool worker (spawn imports the parent's main script), so the workers' cells are
the pretend ones too: each touches ``MARKS/<pid>-<key>`` and then either sleeps (``hang``: a
cell that is still computing when the grid is killed) or stores a hand-made record after a
moment (``store``)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import grid
from stamplib.paths import RunContext


def pretend_run(spec: RunSpec, context: RunContext, **kwargs: object) -> Record:
    Path(os.environ["STAMPLIB_TEST_MARKS"], f"{os.getpid()}-{spec.key()}").touch()
    if os.environ["STAMPLIB_TEST_MODE"] == "hang":
        time.sleep(300)
    time.sleep(0.2)
    return ResultsStore(context.results).put(Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "mean": {}}))


grid.run = pretend_run
grid._prepare_sources = lambda specs: None  # no source model: the cells compute nothing


def cells(n: int) -> list[RunSpec]:
    return [RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke", seed=s) for s in range(n)]


if __name__ == "__main__":
    mode, results, marks = sys.argv[1:4]
    jobs = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    os.environ["STAMPLIB_TEST_MODE"], os.environ["STAMPLIB_TEST_MARKS"] = mode, marks
    go = Path(marks) / "go"
    Path(marks, f"ready-{os.getpid()}").touch()
    while not go.exists():  # the test starts two grids at the same instant
        time.sleep(0.01)
    root = Path(results)
    context = RunContext(root.parent / "data", root, root.parent / "figures", "cpu")
    report = grid.run_grid(cells(6), context, grid.ExecutorOptions(jobs=jobs), progress=False)
    print(json.dumps({"jobs": report.jobs, "done": len(report.done), "running": len(report.running)}))
