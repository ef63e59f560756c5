"""``python -m stamplib`` whose cells only pretend to compute, run as a script by the tests of
signals and full disks (tests/faces/test_signals.py, test_full_disk.py).

Run as ``python pretend_cli.py COMMAND ...``: the real command line, grid, store and notebook
runner, with one change. A cell (``grid``'s, ``run``'s) checks the free space as a real one does,
touches ``$STAMPLIB_TEST_MARKS/<pid>-<key>`` if that is set, sleeps ``$STAMPLIB_TEST_CELL_S``
seconds (default 0.2) behind a progress bar, as a real cell does (tqdm takes its lock), or until the file
``$STAMPLIB_TEST_GO`` exists where that is set, and stores a record with an outputs file of ``$STAMPLIB_TEST_SAMPLES``
random scores (default 64: a few hundred bytes; 300,000 make about 1.2 MB); with
``$STAMPLIB_TEST_ENOSPC`` set, its write fails instead as a full disk does, with a raw ``OSError``
(as a write outside the store would, a checkpoint's copy or a cache). Its module-level
code also runs in every spawned grid worker (spawn imports the parent's main script), so the
workers' cells are the pretend ones too, and each test takes seconds instead of minutes."""

from __future__ import annotations

import errno
import io
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

import stamplib
from stamplib import cli
from stamplib.evaluation.outputs import StreamOutputs
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import grid
from stamplib.paths import RunContext


def pretend_run(spec: RunSpec, context: RunContext | None = None, **kwargs: Any) -> Record:
    assert context is not None
    store = ResultsStore(context.results)
    store.check_space(spec)
    if marks := os.environ.get("STAMPLIB_TEST_MARKS"):
        Path(marks, f"{os.getpid()}-{spec.key()}").touch()
    with tqdm(total=1, file=io.StringIO()) as bar:  # as a real cell's progress bar: tqdm takes its lock here
        time.sleep(float(os.environ.get("STAMPLIB_TEST_CELL_S", "0.2")))
        bar.update()
    while (go := os.environ.get("STAMPLIB_TEST_GO")) and not Path(go).exists():
        time.sleep(0.05)
    if os.environ.get("STAMPLIB_TEST_ENOSPC"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(Path(context.results) / "cache.bin"))
    n = int(os.environ.get("STAMPLIB_TEST_SAMPLES", "64"))
    scores = np.random.default_rng(int(spec.key(), 16) % 2**32).random(n, dtype=np.float32)
    outputs = StreamOutputs(prediction=np.zeros(n, np.int16), ood_score=scores, label=np.zeros(n, np.int16),
                            index=np.arange(n, dtype=np.int32))
    record = Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "mean": {}})
    return store.put(record, {spec.corruptions[0]: outputs})


grid.run = pretend_run
grid._prepare_sources = lambda specs: None  # no source model: the cells compute nothing
stamplib.run = pretend_run  # what `run` computes

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
