"""Every process ends with its parent: SIGINT, SIGTERM and SIGHUP of ``grid``, ``run``,
``notebooks`` and ``./run_all.sh`` end every process they started within seconds, with one line
("interrupted: N … done and kept; run the same command again to go on") and exit 128 + the
signal, and a second run goes on from what was kept. The one line is all: no worker's traceback
(a Ctrl-C while the workers still import) and no resource tracker's warning of leaked semaphores
(the pretend cells hold a progress bar, whose lock was one).

Each command runs in a process group of its own (``start_new_session``), so that the survivors
are counted by group; the cells only pretend to compute (``pretend_cli.py``), so that a grid is
in the middle of its cells within seconds. ``run`` is also stopped in the middle of a real cell."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest

from stamplib import processes

REPO = Path(__file__).resolve().parents[2]
PRETEND = Path(__file__).with_name("pretend_cli.py")
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
#: Seconds after the signal within which the command and everything it started must be gone.
WITHIN_S = 15.0

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts processes in /proc")


def _group(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run (zombies are not counted: they have ended)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(entry.name))
    return alive


def _wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _start(argv: list[str], tmp_path: Path, cell_s: float = 60.0, **env: str) -> subprocess.Popen:
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    environment = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "STAMPLIB_TEST_MARKS": str(marks),
                   "STAMPLIB_TEST_CELL_S": str(cell_s), **env}
    return subprocess.Popen(argv, cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _marks(tmp_path: Path) -> int:
    return len(list((tmp_path / "marks").iterdir()))


def _stop(proc: subprocess.Popen, signum: int) -> tuple[int, str, float]:
    """Send ``signum`` to ``proc`` alone; its exit code, stderr, and the seconds until its whole
    group was gone (at most :data:`WITHIN_S`, else the test fails naming the survivors)."""
    pgid = proc.pid
    started = time.monotonic()
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=WITHIN_S)
        _wait_for(lambda: not _group(pgid), WITHIN_S - (time.monotonic() - started), "the group to end")
    finally:
        survivors = _group(pgid)
        for pid in survivors:  # this test's own processes, should it fail
            os.kill(pid, signal.SIGKILL)
        proc.kill()
    assert not survivors, f"{len(survivors)} process(es) outlived the command: {survivors}"
    return proc.returncode, err, time.monotonic() - started


def _lines(err: str) -> list[str]:
    """stderr's lines, a progress bar's redraws apart."""
    return [line for line in err.replace("\r", "\n").splitlines() if line.strip() and "|" not in line]


def _running(results: Path) -> list[str]:
    return sorted(p.name for p in (results / ".grid" / "running").glob("*.json"))


def _records(results: Path) -> list[str]:
    return sorted(p.name for p in results.glob("*.json") if not p.name.startswith("."))


# -- grid ---------------------------------------------------------------------------------------------


GRID = [sys.executable, str(PRETEND), "grid", "--notebook", "02", "--profile", "smoke", "--results", "results"]


# SIGTERM in the default run; the other two take the same path through the handler (-m slow)
@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow),
                                    pytest.param(signal.SIGHUP, marks=pytest.mark.slow)], ids=lambda s: s.name)
def test_a_grid_told_to_stop_ends_its_workers_says_one_line_and_a_rerun_goes_on(tmp_path: Path, signum: int) -> None:
    results = tmp_path / "results"
    first = _start([*GRID, "--jobs", "2"], tmp_path, cell_s=0.5)
    _wait_for(lambda: len(_records(results)) >= 2 or first.poll() is not None, 180, "two records")
    code, err, _ = _stop(first, signum)
    assert code == CODES[signum], err
    kept = len(_records(results))
    assert _lines(err)[-1] == f"interrupted: {kept} of 14 cells done and kept; run the same command again to go on", err
    assert "Traceback" not in err and len(_lines(err)) == 1, err
    assert _running(results) == [], "the interrupted cells are still claimed"
    assert [p.name for p in results.rglob(".tmp-*")] == []
    again = subprocess.run([*GRID, "--jobs", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(REPO), "STAMPLIB_TEST_CELL_S": "0"})
    assert again.returncode == 0, again.stderr
    assert "done 14, missing 0" in again.stdout and len(_records(results)) == 14


def test_a_grid_in_one_process_is_stopped_in_the_middle_of_a_cell(tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = _start([*GRID, "--jobs", "1"], tmp_path)
    _wait_for(lambda: _marks(tmp_path) >= 1 or proc.poll() is not None, 180, "a cell to start")
    assert len(_running(results)) == 1
    code, err, _ = _stop(proc, signal.SIGTERM)
    assert code == 143 and _lines(err) == ["interrupted: 0 of 14 cells done and kept; run the same command again "
                                           "to go on"], err
    assert _running(results) == []


def test_a_signal_to_the_whole_group_ends_it_too(tmp_path: Path) -> None:
    """A Ctrl-C in a terminal reaches every process of the group at once: the workers leave it
    to the grid, which ends them."""
    results = tmp_path / "results"
    proc = _start([*GRID, "--jobs", "2"], tmp_path)
    _wait_for(lambda: _marks(tmp_path) >= 2 or proc.poll() is not None, 180, "two cells to start")
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=WITHIN_S)
    _wait_for(lambda: not _group(proc.pid), WITHIN_S - (time.monotonic() - started), "the group to end")
    assert proc.returncode == 130 and _lines(err)[-1].startswith("interrupted: 0 of 14 cells"), err
    assert "Traceback" not in err and _running(results) == []


def test_a_ctrl_c_while_the_workers_still_import_is_one_line(tmp_path: Path) -> None:
    """The workers had not left SIGINT to the grid yet: each printed its import's traceback, 30-40
    lines under the grid's one line (issue 83). They now start with it held."""
    results = tmp_path / "results"
    proc = _start([*GRID, "--jobs", "2"], tmp_path)
    # the grid, its resource tracker and both workers exist: the workers are importing
    _wait_for(lambda: len(_group(proc.pid)) >= 4 or proc.poll() is not None, 180, "the workers to start")
    time.sleep(0.2)
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=WITHIN_S)
    _wait_for(lambda: not _group(proc.pid), WITHIN_S - (time.monotonic() - started), "the group to end")
    assert proc.returncode == 130, err
    assert _lines(err) == ["interrupted: 0 of 14 cells done and kept; run the same command again to go on"], err
    assert _running(results) == []


# -- run ----------------------------------------------------------------------------------------------


RUN = ["run", "--method", "source", "--dataset", "digits", "--profile", "smoke", "--results", "results"]


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_run_told_to_stop_releases_its_cell_and_says_one_line(tmp_path: Path, signum: int) -> None:
    proc = _start([sys.executable, str(PRETEND), *RUN], tmp_path)
    _wait_for(lambda: _marks(tmp_path) >= 1 or proc.poll() is not None, 120, "the cell to start")
    assert len(_running(tmp_path / "results")) == 1, "run claims its cell"
    code, err, _ = _stop(proc, signum)
    assert code == CODES[signum] and _lines(err) == ["interrupted: 0 of 1 cells done; its finished corruptions are "
                                                     "kept; run "
                                           "the same command again to go on"], err
    assert _running(tmp_path / "results") == []


@pytest.mark.slow
def test_run_of_a_real_cell_told_to_stop_keeps_nothing_half_written(tmp_path: Path) -> None:
    """A real cell (STAMP on the digits, smoke profile), stopped once it has claimed its cell."""
    results = tmp_path / "results"
    proc = _start([sys.executable, "-m", "stamplib", *RUN[:2], "stamp", *RUN[3:]], tmp_path)
    _wait_for(lambda: _running(results) or proc.poll() is not None, 300, "the cell to be claimed")
    code, err, _ = _stop(proc, signal.SIGTERM)
    if code == 0:
        pytest.skip("the cell was computed before the signal arrived")
    assert code == 143 and "Traceback" not in err and _lines(err)[-1].startswith("interrupted: 0 of 1 cells"), err
    assert _running(results) == [] and [p.name for p in results.rglob(".tmp-*")] == []


# -- notebooks and run_all.sh -------------------------------------------------------------------------


def _notebook(path: Path, body: str) -> Path:
    parameters = nbformat.v4.new_code_cell('profile = "quick"  # which profile\ndevice = "cpu"  # where')
    parameters.metadata["tags"] = ["parameters"]
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nbformat.v4.new_notebook(cells=[parameters, nbformat.v4.new_code_cell(body)],
                                            metadata={"kernelspec": kernel}), path)
    return path


_NOTEBOOKS_SCRIPT = """
import functools, sys
from pathlib import Path
from stamplib import cli, notebook_runner
chosen = sorted(Path(sys.argv[1]).glob("*.ipynb"))
notebook_runner.discover = lambda only=(): chosen
notebook_runner.run_notebooks = functools.partial(notebook_runner.run_notebooks, build_dir=Path(sys.argv[3]))
if __name__ == "__main__":
    sys.exit(cli.main(["notebooks", "--profile", "smoke", "--jobs", sys.argv[2]]))
"""


@pytest.mark.parametrize(("jobs", "signum"), [("1", signal.SIGTERM), ("2", signal.SIGHUP),
                                               pytest.param("2", signal.SIGINT, marks=pytest.mark.slow)],
                         ids=["1-SIGTERM", "2-SIGHUP", "2-SIGINT"])
def test_notebooks_told_to_stop_end_their_kernels(tmp_path: Path, jobs: str, signum: int) -> None:
    """Each notebook's kernel runs in a session of its own (jupyter_client starts it so), outside
    the command's group: it is counted by the file each kernel writes its process id to."""
    source = tmp_path / "notebooks"
    source.mkdir()
    for name in ("01_first", "02_second"):
        _notebook(source / f"{name}.ipynb", "import os, time\n"
                  f"open(r'{tmp_path}/marks/kernel-' + str(os.getpid()), 'w').close()\ntime.sleep(120)")
    script = tmp_path / "notebooks.py"
    script.write_text(_NOTEBOOKS_SCRIPT)
    build = tmp_path / "build"
    proc = _start([sys.executable, str(script), str(source), jobs, str(build)], tmp_path)
    _wait_for(lambda: _marks(tmp_path) >= int(jobs) or proc.poll() is not None, 240, "the kernels to start")
    kernels = [int(p.name.split("-")[1]) for p in (tmp_path / "marks").iterdir()]
    code, err, _ = _stop(proc, signum)
    _wait_for(lambda: not any(processes._alive(k) for k in kernels), 5, f"the kernels {kernels} to end")
    assert code == CODES[signum], err
    assert _lines(err)[-1].startswith("interrupted: 0 of 2 notebooks executed"), err
    assert list(build.rglob("*.ipynb")) == [], "a half-executed copy was left"


def _scratch_run_all(tmp_path: Path) -> Path:
    """run_all.sh in a scratch folder whose environment step does nothing and whose ``python``
    is the pretend command line: the script's own handling of signals, with a grid of seconds."""
    root = tmp_path / "checkout"
    (root / "tools").mkdir(parents=True)
    (root / "notebooks").mkdir()
    shutil.copy(REPO / "run_all.sh", root / "run_all.sh")
    (root / "tools" / "ensure_venv.sh").write_text("#!/usr/bin/env bash\nexit 0\n")
    (root / "tools" / "ensure_venv.sh").chmod(0o755)
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    # `python -m stamplib ARGS` → the pretend command line; anything else → the real interpreter
    python.write_text(f'#!/usr/bin/env bash\nif [[ "$1" == -m && "$2" == stamplib ]]; then shift 2; '
                      f'exec "{sys.executable}" "{PRETEND}" "$@"; fi\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return root


@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow),
                                    pytest.param(signal.SIGHUP, marks=pytest.mark.slow)], ids=lambda s: s.name)
def test_run_all_told_to_stop_ends_the_grid_and_its_workers(tmp_path: Path, signum: int) -> None:
    root = _scratch_run_all(tmp_path)
    results = tmp_path / "results"
    proc = _start(["bash", str(root / "run_all.sh"), "--profile", "smoke", "--only", "02", "--jobs", "2"], tmp_path,
                  STAMPLIB_RESULTS=str(results))
    _wait_for(lambda: _marks(tmp_path) >= 2 or proc.poll() is not None, 180, "the grid's cells to start")
    code, err, _ = _stop(proc, signum)
    assert code == CODES[signum], err
    assert _lines(err) == ["interrupted: 0 of 14 cells done and kept; run the same command again to go on"], err
    assert _running(results) == []


def test_the_one_line_is_the_same_everywhere() -> None:
    assert processes.interrupted_line("3 of 4 cells done and kept") == (
        "interrupted: 3 of 4 cells done and kept; run the same command again to go on")
    assert processes.exit_code(processes.Interrupted(signal.SIGHUP)) == 129
    assert processes.exit_code(KeyboardInterrupt()) == 130
