"""Grids as processes: a grid killed with SIGKILL leaves no worker alive, and two grids started
at the same instant on one store claim disjoint cells and each reports only its own jobs. The
cells only pretend to compute (tests/experiments/grid_script.py), so each test takes seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("grid_script.py")


def _grid(mode: str, tmp_path: Path, jobs: int = 1) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(SCRIPT), mode, str(tmp_path / "results"), str(tmp_path / "marks"),
                             str(jobs)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(condition, seconds: float, what: str) -> None:  # noqa: ANN001 - a predicate
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie that no one has reaped yet has stopped: it is not alive)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_grid_killed_with_sigkill_leaves_no_worker_alive(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    (marks / "go").touch()
    grid = _grid("hang", tmp_path, jobs=2)
    workers: set[int] = set()
    try:
        def two_cells_computing() -> bool:
            workers.update(int(p.name.split("-")[0]) for p in marks.iterdir() if p.name[0].isdigit())
            assert grid.poll() is None, grid.communicate()
            return len(workers) == 2

        _wait_for(two_cells_computing, 180, "two workers to start their cells")
        running = tmp_path / "results" / ".grid" / "running"
        assert len(list(running.glob("*.json"))) == 2
        grid.kill()  # SIGKILL: the grid cannot tell its workers
        grid.wait()
        _wait_for(lambda: not any(_alive(pid) for pid in workers), 5, f"the workers {sorted(workers)} to stop")
        assert list(running.glob("*.json")) == [], "a dead grid's workers left their cells claimed"
        assert [p.name for p in (tmp_path / "results").glob(".tmp-*")] == []
    finally:
        grid.kill()
        for pid in workers:  # this test's own grandchildren, should the test fail
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_two_grids_started_at_once_claim_disjoint_cells_and_report_their_own_jobs(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    grids = [_grid("store", tmp_path), _grid("store", tmp_path)]
    _wait_for(lambda: len(list(marks.glob("ready-*"))) == 2, 120, "both grids to start")
    (marks / "go").touch()
    reports = {}
    for g in grids:
        out, err = g.communicate(timeout=120)
        assert g.returncode == 0, err
        reports[g.pid] = json.loads(out.strip().splitlines()[-1])
    computed = {pid: {p.name.split("-", 1)[1] for p in marks.iterdir() if p.name.startswith(f"{pid}-")}
                for pid in reports}
    first, second = computed.values()
    assert not first & second, "a cell was computed by both grids"
    assert len(first | second) == 6
    for pid, report in reports.items():
        assert report["done"] + report["running"] == 6
        assert len(report["jobs"]) == len(computed[pid]), report  # its own jobs only


def test_claims_are_atomic_and_take_over_only_stale_markers(tmp_path):
    store = ResultsStore(tmp_path)
    specs = [RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke", seed=s)
             for s in range(40)]
    start = threading.Barrier(6)
    won: dict[int, list[str]] = {}

    def claimant(job: int) -> None:
        marker = {"job_id": f"job-{job}", "host": os.uname().nodename, "pid": os.getpid(), "deadline": None}
        start.wait()
        won[job] = [s.key() for s in specs if store.claim(s, marker) is None]

    threads = [threading.Thread(target=claimant, args=(j,)) for j in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keys = [k for ks in won.values() for k in ks]
    assert sorted(keys) == sorted(s.key() for s in specs), "every cell is claimed exactly once"
    # A marker whose process is gone is taken over; a live job's is not; a job retakes its own.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = os.uname().nodename
    spec = specs[0]
    store.mark_running(spec, {"job_id": "gone", "host": host, "pid": dead.pid, "deadline": None})
    assert store.claim(spec, {"job_id": "new", "host": host, "pid": os.getpid(), "deadline": None}) is None
    holder = store.claim(spec, {"job_id": "third", "host": host, "pid": os.getpid(), "deadline": None})
    assert holder is not None and holder["job_id"] == "new"
    assert store.claim(spec, {"job_id": "new", "host": host, "pid": os.getpid(), "deadline": None}) is None
