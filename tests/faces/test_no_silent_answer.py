"""No silent wrong answer: each input that used to be served a wrong answer without a word is now
taken as given or refused in one line.

* ``--relative-speed 0`` is a value (C(g) measured in the run), not the flag left out;
* ``run`` claims its cell as a grid job does: a second ``run`` of it waits and reads the record;
* ``--results ""`` (and ``--data-root ""``) names no folder and is refused;
* ``--jobs`` is held to the machine's cores with a line, and ``grid --dry-run`` says the number
  of worker processes the grid starts;
* ``doctor`` checks the package data against its recorded digests;
* ``claims judge`` on a committed store judges that store's own benchmarks;
* ``run --dataset npz:…`` is refused (such a data set has no source network), and no message of
  ``run`` advertises ``npz:`` as a data set."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

import stamplib
from stamplib import cli, processes
from stamplib.data import StreamSpec
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import grid
from tests.support import context_for

REPO = Path(__file__).resolve().parents[2]
PRETEND = Path(__file__).with_name("pretend_cli.py")


def _record(spec: RunSpec) -> Record:
    return Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "mean": {}})


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


# -- --relative-speed 0 --------------------------------------------------------------------------------


def test_relative_speed_zero_is_the_realistic_protocol_with_c_measured(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from stamplib.evaluation import runner

    seen: list[RunSpec] = []
    monkeypatch.setattr(stamplib, "run", lambda spec, context, **kw: seen.append(spec))
    monkeypatch.setattr(runner, "summary_lines", lambda record: [])
    base = ["run", "--method", "tent", "--profile", "smoke", "--results", str(tmp_path)]
    for given in (["--relative-speed", "0"], ["--stream", "relative_speed=0"], ["--realistic"], []):
        assert cli.main([*base, *given]) == 0
    measured = StreamSpec(realistic=True, relative_speed=0)
    assert [s.stream for s in seen] == [measured, measured, measured, StreamSpec()]
    assert len({s.key() for s in seen[:3]}) == 1 and seen[0].key() != seen[3].key(), "0 served the plain record"


# -- run claims its cell ---------------------------------------------------------------------------------


def test_a_run_of_a_cell_another_process_holds_waits_and_reads_its_record(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    spec = RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke")
    other = {"job_id": "the-other-run", "host": os.uname().nodename, "pid": os.getpid(), "deadline": None}
    assert store.claim(spec, other) is None

    def the_other_finishes() -> None:
        time.sleep(0.5)
        store.put(_record(spec))
        store.unmark_running(spec)

    def compute(*args: Any, **kwargs: Any) -> Record:
        raise AssertionError("the cell was computed twice")

    told: list[dict[str, Any]] = []
    threading.Thread(target=the_other_finishes).start()
    record = grid.run_claimed(spec, context_for(store), compute, on_wait=told.append, poll_s=0.05)
    assert record.key == spec.key() and [t["job_id"] for t in told] == ["the-other-run"]
    assert store.running_marker(spec) is None


def test_a_run_whose_holder_stored_nothing_computes_the_cell_and_releases_it(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    spec = RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    store.mark_running(spec, {"job_id": "stopped", "host": os.uname().nodename, "pid": gone.pid, "deadline": None})
    held: list[dict[str, Any] | None] = []

    def compute(spec: RunSpec, context: Any, **kwargs: Any) -> Record:
        held.append(store.running_marker(spec))
        return store.put(_record(spec))

    assert grid.run_claimed(spec, context_for(store), compute).key == spec.key()
    assert held[0] is not None and held[0]["pid"] == os.getpid(), "it computed without claiming the cell"
    assert store.running_marker(spec) is None
    with pytest.raises(RuntimeError):  # however the computation ends, the cell is released
        grid.run_claimed(spec, context_for(store), lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x")),
                         force=True)
    assert store.running_marker(spec) is None


def test_two_runs_of_one_cell_at_once_compute_it_once(tmp_path: Path) -> None:
    marks, go = tmp_path / "marks", tmp_path / "go"
    marks.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "STAMPLIB_TEST_MARKS": str(marks), "STAMPLIB_TEST_CELL_S": "0",
           "STAMPLIB_TEST_GO": str(go)}
    argv = [sys.executable, str(PRETEND), "run", "--method", "source", "--dataset", "digits", "--profile", "smoke",
            "--results", str(tmp_path / "results")]
    first = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = None
    try:
        deadline = time.monotonic() + 180
        while not list(marks.iterdir()) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        second = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        told = second.stderr.readline()  # the first computes until `go` exists: the second must wait for it
        go.touch()
        out, err = first.communicate(timeout=300)
        second_out, second_err = second.communicate(timeout=300)
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.kill()
    assert first.returncode == 0 and second.returncode == 0, (err, second_err)
    assert told.startswith("cell ") and "is being computed by another process (run-" in told, told + second_err
    assert len(list(marks.iterdir())) == 1, "both runs computed the cell"
    assert second_out == out


# -- --results "" ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--results", "--data-root"])
def test_an_empty_folder_name_is_refused(flag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(stamplib, "run", lambda *a, **k: pytest.fail("it ran"))
    for empty in ("", " "):
        assert cli.main(["run", "--method", "tent", "--profile", "smoke", flag, empty]) == 2
        assert f"{flag} names no folder" in _one_error(capsys)


# -- --jobs is held to the cores, and the dry run says what the grid starts -----------------------------


class _Pool:
    """A process pool that starts nothing and says how many workers it was asked for."""

    started: list[int] = []

    def __init__(self, max_workers: int, **kwargs: Any) -> None:
        _Pool.started.append(max_workers)
        self._processes: dict[int, Any] = {}

    def submit(self, fn: Any, *args: Any) -> Future:
        future: Future = Future()
        future.set_result({})
        return future

    def shutdown(self, **kwargs: Any) -> None:
        pass


@pytest.mark.parametrize("cells", [3, 40])
def test_jobs_beyond_the_cores_are_cut_with_a_line_and_the_dry_run_says_what_starts(
        cells: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import concurrent.futures

    from stamplib.experiments import registry

    specs = [RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke",
                     seed=s) for s in range(cells)]
    monkeypatch.setattr(registry, "cells_by_notebook", lambda chosen, **params: {"02": specs})
    monkeypatch.setattr(grid, "_prepare_sources", lambda specs: None)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", _Pool)
    monkeypatch.setattr(_Pool, "started", [])
    argv = ["grid", "--notebook", "02", "--profile", "smoke", "--results", str(tmp_path), "--jobs", "100000"]
    assert cli.main([*argv, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    cores = processes.cores()
    assert err == f"--jobs 100000 is more than this machine's {cores} CPU core(s): using {cores}, one per core\n"
    workers = min(cores, cells)
    said = [line for line in out.splitlines() if line.startswith("dry run")]
    expected = "in this process" if workers == 1 else f"with {workers} worker process(es)"
    assert said == [f"dry run: would compute {cells} cells here{',' if workers == 1 else ''} {expected}"]
    if workers > 1:
        cli.main(argv)  # the pool computes nothing: every cell is reported missing
        assert _Pool.started == [workers]


def test_jobs_within_the_cores_are_kept_without_a_word() -> None:
    assert processes.capped_jobs(1) == (1, "")
    assert processes.capped_jobs(processes.cores()) == (processes.cores(), "")
    assert processes.capped_jobs(processes.cores() + 1)[0] == processes.cores()
    assert grid.local_workers(8, 3) == 3 and grid.local_workers(2, 14) == 2


# -- doctor checks the package data ----------------------------------------------------------------------


@pytest.fixture
def damaged_package_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Copies of the built-in benchmark's folder and of the shipped digits model, one byte of the
    photographs, of a network and of the digits model changed."""
    from stamplib.data import builtin_cifar10
    from stamplib.models import builtin

    folder = tmp_path / "builtin_cifar10"
    shutil.copytree(builtin_cifar10.FOLDER, folder)
    shipped = tmp_path / "shipped"
    shutil.copytree(builtin.SHIPPED, shipped)
    for path in (
        folder / builtin_cifar10.IMAGES_FILE,
        folder / "ResNetTiny_10_jpeg.pt",
        shipped / f"{builtin.DIGITS_CHECKPOINT}.pt",
    ):
        payload = bytearray(path.read_bytes())
        payload[len(payload) // 2] ^= 0xFF
        path.write_bytes(bytes(payload))
    monkeypatch.setattr(builtin_cifar10, "FOLDER", folder)
    monkeypatch.setattr(builtin, "SHIPPED", shipped)
    builtin_cifar10.load.cache_clear()
    return folder


def test_the_doctor_reports_damaged_package_data_as_damaged(damaged_package_data: Path, tmp_path: Path) -> None:
    from stamplib.evaluation.provenance import doctor_lines, package_data_lines

    lines = package_data_lines()
    state = {line.split()[0]: line.split()[1] for line in lines[1:]}
    damaged = {"cifar10_subset.npz", "ResNetTiny_10_jpeg.pt", "digits_resnet_cifar_tiny.pt"}
    # Networks 1-4 ship in pairs as they are trained: whatever else ships must still read "ok".
    assert {"ResNetTiny_10_jpeg.json", "ResNetTiny_8_jpeg.pt", "ResNetTiny_8_jpeg.json"} <= set(state)
    assert state == {name: "DAMAGED" if name in damaged else "ok" for name in state}
    assert damaged <= set(state)
    assert "git checkout --" in next(line for line in lines if "cifar10_subset.npz" in line)
    doctor = doctor_lines(context_for(tmp_path / "results", tmp_path))
    listing = {line.split()[0]: line.split()[1] for line in doctor if line.startswith("  cifar10_builtin")}
    assert listing == {"cifar10_builtin": "DAMAGED", "cifar10_builtin_8_2": "DAMAGED"}
    assert "REFUSED" in next(line for line in doctor if line.strip().startswith("ResNetTiny_10_jpeg "))


def test_the_doctor_exits_non_zero_when_it_finds_damage(
    damaged_package_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed DAMAGED and exited 0 (issue 83): a script could not tell."""
    assert cli.main(["doctor", "--data-root", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "DAMAGED" in out and err.count("\n") == 1 and err.startswith("doctor: ")
    assert "cifar10_subset.npz" in err and "ResNetTiny_10_jpeg" in err


def test_the_doctor_reports_intact_package_data_as_ok() -> None:
    from stamplib.evaluation.provenance import package_data_lines

    assert all(" ok " in line for line in package_data_lines()[1:])


# -- claims judge reads the benchmark of a committed store ------------------------------------------------


@pytest.mark.parametrize(
    ("store", "name"), [("results/reference", "reference"), ("results/builtin_benchmark", "builtin")]
)
def test_claims_judge_on_a_committed_store_judges_its_own_benchmarks(
    store: str, name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stamplib.evidence import judge, pages

    judged: list[Any] = []
    monkeypatch.setattr(pages, "RecordsSnapshot", lambda root: root)
    monkeypatch.setattr(judge, "judge_benchmark", lambda benchmark, snapshot: judged.append(benchmark) or [])
    assert cli.main(["claims", "judge", "--results", str(REPO / store)]) == 0
    assert judged[-1].name == name and judged[-1].store == REPO / store
    assert cli.main(["claims", "judge", "--results", str(REPO / store), "--benchmark", "full"]) == 0
    assert judged[-1].name == "full" and "no claim could be judged" in capsys.readouterr().err


@pytest.mark.slow
def test_claims_judge_on_the_reference_store_prints_what_the_readme_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["claims", "judge", "--results", str(REPO / "results" / "reference")]) == 0
    answers = [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert sum(a.startswith("yes") for a in answers) > 0 and not all("pending" in a for a in answers)


# -- npz: data sets ----------------------------------------------------------------------------------------


def test_run_refuses_a_data_set_read_from_files_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(stamplib, "run", lambda *a, **k: pytest.fail("it ran"))
    for scheme in ("npz", "folder"):
        assert (
            cli.main(["run", "--method", "tent", "--dataset", f"{scheme}:{tmp_path}/x", "--results", str(tmp_path)])
            == 2
        )
        err = _one_error(capsys)
        assert "has no source network to adapt" in err and "--outlier-set" in err and "hyperparameter_set=" not in err
    assert cli.main(["run", "--method", "tent", "--dataset", "mnist", "--results", str(tmp_path)]) == 2
    err = _one_error(capsys)
    assert "unknown dataset 'mnist'; choose one of" in err and "npz:" not in err
    assert cli.main(["tune", "tent", "--dataset", f"npz:{tmp_path}/x", "--results", str(tmp_path)]) == 2
    assert "has no source network to adapt" in _one_error(capsys)
