"""The last raw tracebacks (issue 83): each of these is one line and the exit code a user expects.

* a STAMPLIB_HOME this user cannot write (a path through a file, a read-only or forbidden place);
* a range of replicates or seeds too long to hold (``--replicates 0-9999999999``);
* ``grid --time-min -1``, ``--mem-gb nan``;
* ``doctor`` exits non-zero when it finds damage;
* records honour the umask."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stamplib import cli

REPO = Path(__file__).resolve().parents[2]


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_stamplib_home_through_a_file_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**os.environ, "STAMPLIB_HOME": str(blocker / "home"), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "stamplib", "run", "--method", "source", "--dataset", "digits",
                           "--profile", "smoke", "--results", str(tmp_path / "results")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot write {blocker / 'home'}"), done.stderr[-2000:]
    assert "STAMPLIB_HOME" in lines[0]


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS, errno.EPERM])
def test_a_home_this_user_may_not_write_is_one_line(tmp_path: Path, monkeypatch, capsys, code: int) -> None:
    """As root every folder is writable, so the refusal of a read-only or forbidden one is raised here
    where the command would first write there."""
    import stamplib

    home = tmp_path / "home"
    monkeypatch.setenv("STAMPLIB_HOME", str(home))

    def refused(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code), str(home / "checkpoints"))

    monkeypatch.setattr(stamplib, "run", refused)
    assert cli.main(["run", "--method", "source", "--dataset", "digits", "--profile", "smoke", "--results",
                     str(tmp_path / "results")]) == 2
    err = _one_error(capsys)
    assert f"cannot write {home / 'checkpoints'} ({os.strerror(code)})" in err and "STAMPLIB_HOME" in err


def test_an_error_elsewhere_keeps_its_traceback(tmp_path: Path, monkeypatch) -> None:
    """Only the places stamplib chose are the user's to fix; another OSError is a bug to see."""
    import stamplib

    monkeypatch.setenv("STAMPLIB_HOME", str(tmp_path / "home"))

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "/somewhere/else")

    monkeypatch.setattr(stamplib, "run", refused)
    with pytest.raises(PermissionError):
        cli.main(["run", "--method", "source", "--dataset", "digits", "--profile", "smoke", "--results",
                  str(tmp_path / "results")])


@pytest.mark.parametrize("argv", [
    ["claims", "compute", "--benchmark", "builtin", "--design", "networks", "--replicates", "0-9999999999"],
    ["claims", "diagnose", "--benchmark", "builtin", "--design", "networks", "--replicates", "0,1-99999999999"],
    ["claims", "judge", "--seeds", "0-9999999999", "--results", "results/reference"],
])
def test_a_range_too_long_to_hold_is_one_line(argv: list[str], capsys) -> None:
    """Not a MemoryError: the range is refused before a list of it is made."""
    assert cli.main(argv) == 2
    err = _one_error(capsys)
    assert "names more than 10,000 numbers" in err


@pytest.mark.parametrize("flag, value", [("--time-min", "-1"), ("--time-min", "0"), ("--mem-gb", "nan"),
                                         ("--mem-gb", "-2"), ("--mem-gb", "inf"), ("--cpus-per-task", "0"),
                                         ("--array-parallelism", "-3"), ("--cells-per-job", "-1")])
def test_grid_refuses_a_time_limit_or_memory_that_is_no_amount(flag: str, value: str, capsys) -> None:
    assert cli.main(["grid", "--notebook", "02", "--executor", "submitit", flag, value, "--dry-run"]) == 2
    assert f"{flag} must be a" in _one_error(capsys)
