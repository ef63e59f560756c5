"""A grid job that dies at one cell, for the grid's tests (the grid itself takes no fault
argument). The tests put :class:`KilledAtCell` in place of :class:`stamplib.experiments.grid.CellGroup`
by monkeypatch; submitit pickles the job by reference, so its subprocess imports this module and
reads the victim from the environment."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from stamplib.experiments import grid

#: ``KEY:FLAG_FILE``: the job that reaches cell KEY kills itself (SIGKILL, like an out-of-memory
#: kill or a lost node) the first time, and creates FLAG_FILE so that a retry computes the cell.
VICTIM = "STAMPLIB_TEST_KILL_AT_CELL"


class KilledAtCell(grid.CellGroup):
    def __call__(self) -> dict[str, str]:
        key, flag = os.environ[VICTIM].split(":", 1)
        real_run = grid.run

        def run(spec, context, **kwargs):  # noqa: ANN001, ANN003, ANN202 - grid.run's own
            if spec.key() == key and not Path(flag).exists():
                Path(flag).touch()
                os.kill(os.getpid(), signal.SIGKILL)
            return real_run(spec, context, **kwargs)

        grid.run = run  # this job's own process
        return super().__call__()
