"""Grids (stamplib.experiments.grid): grouping, executors, failures and retries, a killed job."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

import stamplib
from stamplib import processes
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import grid
from tests.experiments import faults
from tests.support import context_for, pretend_gpus

REPO = Path(__file__).resolve().parents[2]


def _fake_record(store: ResultsStore, spec: RunSpec) -> None:
    store.put(Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "mean": {}, "per_corruption": {},
                                "collapsed": []}))


def _smoke(method: str, **kw) -> RunSpec:
    return RunSpec(method=method, dataset="digits", outlier_set="noise", profile="smoke", **kw)


def _metrics(record: Record) -> tuple:
    """What a cell measured, without its timings."""
    per = {c: dataclasses.replace(row, seconds=None) for c, row in record.per_corruption.items()}
    return per, record.mean, record.collapsed


# -- cells ------------------------------------------------------------------------------------------------


# -- status -----------------------------------------------------------------------------------------------


# -- grouping ---------------------------------------------------------------------------------------------
def test_cells_per_job_and_grouping():
    full = [RunSpec(method=m, dataset="cifar10_c", outlier_set=o, profile="full", corruptions=("fog",))
            for m in ("source", "tent") for o in ("noise", "svhn", "lsun", "tiny")] * 20
    # Full cells (~30 min): at most half the 240-minute limit per job, spread over the slots.
    assert grid.default_cells_per_job(full, time_min=240, slots=32) == 4
    assert grid.default_cells_per_job(full[:8], time_min=240, slots=32) == 1
    assert grid.default_cells_per_job(full, time_min=60, slots=32) == 1
    # Smoke cells (seconds): they share one job rather than each waiting in the queue.
    smoke = [_smoke("source", seed=s) for s in range(10)]
    assert grid.default_cells_per_job(smoke, time_min=240, slots=32) >= 10
    mixed = [_smoke("tent", seed=1), _smoke("source", seed=0), _smoke("tent", seed=0), _smoke("bn_stats")]
    groups = grid.group_cells(mixed, 3)
    assert [len(g) for g in groups] == [3, 1]
    assert sorted(s.key() for g in groups for s in g) == sorted(s.key() for s in mixed)
    assert [s.method for s in groups[0]] == ["bn_stats", "source", "tent"]  # same method stays together
    with pytest.raises(ValueError, match="at least 1"):
        grid.group_cells(mixed, 0)


# -- executors --------------------------------------------------------------------------------------------
def test_local_failure_is_reported_with_its_cell_and_log_then_retried_alone(tmp_path, monkeypatch, digits_model):
    store = ResultsStore(tmp_path / "results")
    good, bad = _smoke("source"), _smoke("bn_stats")
    real_run, flag = grid.run, tmp_path / "fault-once"

    def fails_once(spec, context, **kwargs):
        if spec.key() == bad.key() and not flag.exists():
            flag.touch()
            raise RuntimeError(f"injected fault in cell {spec.key()}")
        return real_run(spec, context, **kwargs)

    monkeypatch.setattr(grid, "run", fails_once)
    report = grid.run_grid([good, bad], context_for(store), progress=False)
    assert report.done == [good] and report.missing == [bad] and not report.ok
    [failed] = report.failed
    assert failed.specs == [bad] and failed.log is not None and "injected fault" in failed.log.read_text()
    assert bad.key() in failed.summary() and str(failed.log) in failed.summary()
    assert store.failure(bad)["log"] == str(failed.log)
    stamp_of_good = store.path(good).stat().st_mtime_ns
    retry = grid.run_grid([good, bad], context_for(store), progress=False, retry_failed=True)
    assert retry.ok and len(retry.done) == 2 and retry.jobs and len(retry.jobs) == 1
    assert store.path(good).stat().st_mtime_ns == stamp_of_good  # never recomputed
    assert store.failure(bad) is None


@pytest.mark.slow  # a minute of job subprocesses; submitit is an extra (a cluster), the local grid is tested above
def test_submitit_grid_survives_a_killed_job_and_matches_in_process_runs(tmp_path, monkeypatch, digits_model):
    """Acceptance: a grid through submitit's local executor (job subprocesses); one job is
    SIGKILLed after its first cell; re-running computes only what is missing, and every cell
    is stored exactly once with the metrics of an in-process stamplib.run."""
    store = ResultsStore(tmp_path / "results")
    specs = [_smoke("source"), _smoke("bn_stats"), _smoke("tent"), _smoke("tent", seed=1)]
    victim = grid.group_cells(specs, 2)[0][1]  # the second cell of the first job
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv(faults.VICTIM, f"{victim.key()}:{tmp_path / 'fault-once'}")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.setattr(grid, "CellGroup", faults.KilledAtCell)  # submitit's jobs import it from tests/
    executor = grid.ExecutorOptions("submitit-local", jobs=2, cells_per_job=2, cpus_per_task=1, time_min=5)
    options = dict(progress=False)

    first = grid.run_grid(specs, context_for(store), executor, **options)
    assert len(first.jobs) == 2 and len(first.done) == 3 and first.missing == [victim]
    [failed] = first.failed
    assert failed.specs == [victim] and "without a result" in failed.error
    assert failed.log is not None and failed.log.is_file() and failed.log.parent.parent == store.root / ".grid" / "logs"
    assert (store.root / ".grid" / "running" / f"{victim.key()}.json").is_file()  # left by the killed job …
    assert store.status(specs).missing == [victim]  # … and seen as stale

    stamps = {s.key(): store.path(s).stat().st_mtime_ns for s in first.done}
    second = grid.run_grid(specs, context_for(store), executor, **options)
    assert second.ok and len(second.jobs) == 1 and len(second.done) == 4
    assert all(store.path(s).stat().st_mtime_ns == t for s, t in ((s, stamps[s.key()]) for s in first.done))
    assert sorted(p.name for p in store.root.glob("*.json")) == sorted(store.path(s).name for s in specs)
    assert not list(store.root.glob(".tmp-*")) and not list((store.root / ".grid" / "running").iterdir())

    reference = ResultsStore(tmp_path / "reference")
    for spec in specs:
        assert _metrics(store.get(spec)) == _metrics(stamplib.run(spec, context_for(reference))), spec.method


@pytest.mark.slow  # two spawned workers each import torch: about 20 s on two busy cores
def test_local_process_pool_matches_in_process_runs(tmp_path, digits_model):
    specs = [_smoke("source"), _smoke("tent")]
    store = ResultsStore(tmp_path / "pool")
    report = grid.run_grid(specs, context_for(store), grid.ExecutorOptions(jobs=2), progress=False)
    assert report.ok and report.jobs == ["local-pool-0", "local-pool-1"]
    reference = ResultsStore(tmp_path / "reference")
    for spec in specs:
        assert _metrics(store.get(spec)) == _metrics(stamplib.run(spec, context_for(reference))), spec.method


def test_slurm_jobs_are_one_array_with_the_requested_resources(tmp_path, monkeypatch):
    """No SLURM here: stand-in srun/sbatch commands show the job array submitit would submit."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\n")
    (fake / "sbatch").write_text("#!/bin/sh\necho 'Submitted batch job 4242'\n")
    for tool in fake.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    store = ResultsStore(tmp_path / "results")
    specs = [_smoke("source"), _smoke("bn_stats"), _smoke("tent")]
    _fake_record(store, specs[0])  # stored cells are never submitted
    pretend_gpus(monkeypatch)  # a GPU machine's command line
    options = grid.ExecutorOptions("submitit", cells_per_job=1, partition="gpu", gpus_per_job=1, cpus_per_task=6,
                                   time_min=90, array_parallelism=8, mem_gb=24)
    report = grid.run_grid(specs, context_for(store, device="cuda"), options, wait=False, progress=False)
    assert report.jobs == ["4242_0", "4242_1"] and len(report.pending) == 2 and report.done == [specs[0]]
    [script] = (store.root / ".grid" / "logs").glob("4242/*submission.sh")
    text = script.read_text()
    for line in ("--array=0-1%2", "--partition=gpu", "--gpus-per-node=1", "--cpus-per-task=6", "--time=90",
                 "--mem=24GB", "--job-name=stamplib", f"--error={store.root / '.grid' / 'logs'}"):
        assert f"#SBATCH {line}" in text, line


# -- one worker per device --------------------------------------------------------------------------------
@pytest.fixture
def four_gpus(monkeypatch):
    """torch sees four GPUs (no GPU is touched: only the count is asked)."""
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)


def test_cuda_workers_take_the_gpus_in_turn(four_gpus):
    assert [grid.worker_device("cuda", i) for i in range(6)] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:0",
                                                                 "cuda:1"]
    assert grid.worker_device("cpu", 5) == "cpu" and grid.worker_device("cuda:2", 0) == "cuda:2"
    assert grid.default_jobs("cuda") == 4 and grid.default_jobs("cpu") == processes.cores()
    assert grid.worker_threads("cpu", 4) == 1 and grid.worker_threads("cuda", 4) == max(1, (os.cpu_count() or 1) // 4)


def test_with_one_gpu_the_default_is_one_job_and_without_one_cuda_is_refused(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert grid.default_jobs("cuda") == 1 and grid.worker_device("cuda", 3) == "cuda:0"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(ValueError, match="no GPU"):
        grid.worker_device("cuda", 0)


def test_each_pool_worker_runs_its_cells_on_its_own_device(four_gpus, monkeypatch, tmp_path):
    """What each spawned worker does at start (numbered by a shared counter) and per group,
    here in this process: worker i runs every group it takes on cuda:(i mod 4)."""
    import multiprocessing

    import torch

    ran = []
    monkeypatch.setattr(grid, "run_group", lambda specs, context, *rest: ran.append(context.device))
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    monkeypatch.setattr(grid, "_WORKER_DEVICE", None)  # back to None afterwards: this is no worker
    counter = multiprocessing.get_context("spawn").Value("i", 0)
    for _ in range(5):  # five workers start, each takes two groups
        grid._pool_init(counter, "cuda", 1)
        for _ in range(2):
            grid._pool_run_group([], context_for(tmp_path, device="cuda"), 1, "log")
    assert ran == [f"cuda:{i % 4}" for i in range(5) for _ in range(2)]
