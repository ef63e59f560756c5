"""A full disk is one line, at any moment: no traceback and no empty log file, with one or two
jobs, and the records stay whole.

The unit tests make writes fail as a full disk does (``OSError`` ENOSPC) wherever they are; the
command-line tests run a grid whose cells only pretend to compute (``pretend_cli.py``) and fail
their write, and, where this machine lets a test mount one, fill a small tmpfs in the middle of
a grid."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stamplib import cli
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import OutOfSpace, ResultsStore, disk_full
from stamplib.experiments import grid
from tests.support import context_for

REPO = Path(__file__).resolve().parents[2]
PRETEND = Path(__file__).with_name("pretend_cli.py")
GRID = [sys.executable, str(PRETEND), "grid", "--notebook", "02", "--profile", "smoke", "--results"]


def _enospc(path: object = "somewhere") -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def _cells(n: int) -> list[RunSpec]:
    return [RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke", seed=s) for s in range(n)]


def _errors(err: str) -> list[str]:
    return [line for line in err.replace("\r", "\n").splitlines() if line.startswith("error:")]


def _empty_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.stat().st_size == 0
                  and p.name != "claims.lock")


def _whole(root: Path) -> int:
    """How many records the store holds, each checked whole (its outputs file there and matching
    its digest); a record that is not would be set aside with a warning, which fails the test."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return len(ResultsStore(root).records())


# -- units: wherever the write is --------------------------------------------------------------------


def test_a_full_disk_anywhere_in_a_chain_is_one_line() -> None:
    assert disk_full(ValueError("no")) is None and disk_full(OSError(errno.EACCES, "denied")) is None
    full = disk_full(_enospc("/results/x.json"))
    assert isinstance(full, OutOfSpace) and "\n" not in str(full) and "while writing /results/x.json" in str(full)
    try:
        try:
            raise _enospc()
        except OSError as exc:
            raise RuntimeError("torch.save failed") from exc
    except RuntimeError as chained:
        assert isinstance(disk_full(chained), OutOfSpace)
    own = OutOfSpace("no space left on the disk of /r")
    assert disk_full(own) is own


@pytest.mark.parametrize("where", ["the cell", "the log"])
def test_a_job_stops_at_a_full_disk_in_one_line_and_releases_its_cells(tmp_path: Path, where: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The cell's own write fails, or a cell fails for another reason and its log cannot be
    written: either way the job stops with one OutOfSpace, leaves no log (empty or not) and holds
    no cell."""
    from stamplib import paths

    store = ResultsStore(tmp_path / "results")
    ran = []

    def cell(spec: RunSpec, context: object, **kwargs: object) -> None:
        ran.append(spec)
        raise _enospc() if where == "the cell" else ValueError("a cell that fails for its own reason")

    def no_room(path: Path, payload: bytes) -> None:
        raise _enospc(path)

    monkeypatch.setattr(grid, "run", cell)
    monkeypatch.setattr(paths, "atomic_write_bytes", no_room)
    log = tmp_path / "results" / ".grid" / "logs" / "local" / "x.err"
    with pytest.raises(OutOfSpace) as caught:
        grid.run_group([s.to_dict() for s in _cells(3)], context_for(store), log_file=str(log))
    assert "\n" not in str(caught.value) and len(ran) == 1, "the job went on after the disk was full"
    assert not log.exists() and list((store.grid_dir / "running").glob("*.json")) == []


def test_a_grid_in_this_process_says_a_full_disk_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from stamplib.experiments import registry

    monkeypatch.setattr(grid, "run", lambda spec, context, **kw: (_ for _ in ()).throw(_enospc()))
    monkeypatch.setattr(grid, "_prepare_sources", lambda specs: None)
    monkeypatch.setattr(registry, "cells_by_notebook", lambda chosen, **params: {"02": _cells(3)})
    results = tmp_path / "results"
    assert cli.main(["grid", "--notebook", "02", "--profile", "smoke", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(_errors(err)) == 1 and "no space left" in _errors(err)[0], err
    assert _empty_files(results) == [] and list((results / ".grid" / "running").glob("*")) == []


def test_the_command_line_says_any_full_disk_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A write outside the store (a checkpoint's copy, an executed notebook) fails with the raw
    OSError: the command line says it in one line too; any other OSError keeps its traceback."""
    def full(args: object) -> int:
        raise _enospc("/home/me/.cache/stamplib/checkpoints/x.pt")

    def denied(args: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(cli.setup, "cmd_methods", full)  # the parser takes the command when it is built
    assert cli.main(["methods"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: no space left on the disk while writing /home/me/"), err
    monkeypatch.setattr(cli.setup, "cmd_methods", denied)
    with pytest.raises(PermissionError):
        cli.main(["methods"])


# -- the command line, workers included -----------------------------------------------------------------


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_grid_whose_writes_fail_says_one_line_and_leaves_no_empty_log(tmp_path: Path, jobs: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "STAMPLIB_TEST_CELL_S": "0", "STAMPLIB_TEST_ENOSPC": "1"}
    results = tmp_path / "results"
    proc = subprocess.run([*GRID, str(results), "--jobs", jobs], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(_errors(proc.stderr)) == 1 and "no space left" in _errors(proc.stderr)[0], proc.stderr
    assert _empty_files(results) == [] and not (results / ".grid" / "logs").exists()
    assert list((results / ".grid" / "running").glob("*")) == []


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 8 MiB, mounted for the test (needs root and a system that lets it mount)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("filling a small disk needs a tmpfs, which only root can mount")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"this system does not let the test mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(disk: Path, leave: int) -> None:
    """Write a file that leaves ``leave`` bytes free on ``disk``."""
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "ab") as fh:
        fh.write(b"\0" * max(0, free - leave))


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_disk_that_fills_in_the_middle_of_a_grid_is_one_line(small_disk: Path, tmp_path: Path, jobs: str) -> None:
    """Each cell checks the free space (1.05 MB for a smoke cell) and then writes an outputs file
    of about 1.2 MB. Once the first record is stored, the disk is filled up to 1.1 MB: the next
    write starts with enough room by the check and runs out in the middle."""
    results = small_disk / "results"
    env = {**os.environ, "PYTHONPATH": str(REPO), "STAMPLIB_TEST_CELL_S": "1", "STAMPLIB_TEST_SAMPLES": "300000"}
    proc = subprocess.Popen([*GRID, str(results), "--jobs", jobs], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not list(results.glob("*.json")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        _fill(small_disk, leave=1_100_000)
        _, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert len(_errors(err)) == 1 and "no space left" in _errors(err)[0], err
    assert _empty_files(results) == [] and list((results / ".grid" / "running").glob("*")) == []
    stored = _whole(results)
    assert 1 <= stored < 14 and len(list(results.glob("*.outputs.npz"))) == stored  # records in whole pairs
    assert [p.name for p in results.rglob(".tmp-*")] == []
