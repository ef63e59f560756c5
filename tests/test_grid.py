"""Grids (stamplib.grid): cells of notebooks, status, grouping, executors, failures, the CLI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

import stamplib
from stamplib import experiments, grid
from stamplib.cli import main
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore


def _smoke(method: str, **kw) -> RunSpec:
    return RunSpec(method=method, dataset="digits", outliers="noise", profile="smoke", **kw)


def _metrics(record: dict) -> dict:
    """What a cell measured, without its timings."""
    per = {c: {k: v for k, v in m.items() if k != "seconds"} for c, m in record["per_corruption"].items()}
    return {"per_corruption": per, "mean": record["mean"], "collapsed": record["collapsed"]}


def _fake_record(store: ResultsStore, spec: RunSpec) -> None:
    store.put({"key": spec.key(), "spec": spec.to_dict(), "mean": {}, "per_corruption": {}, "collapsed": []})


def _marker(store: ResultsStore, spec: RunSpec, **fields) -> None:
    path = store.root / ".grid" / "running" / f"{spec.key()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"job_id": "test", "started": time.time(), **fields}))


# -- cells ------------------------------------------------------------------------------------------------
def test_dry_run_counts_every_notebook_of_the_full_profile(tmp_path, capsys):
    assert main(["grid", "--all", "--profile", "full", "--dry-run", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    distinct = {}
    for nb in experiments.EXPERIMENTS:
        specs = experiments.plan(nb, profile="full").specs
        distinct.update((s.key(), s) for s in specs)
        row = next(line.split() for line in out.splitlines() if line.startswith(nb))
        assert row[1:] == [str(len(specs)), "0", "0", str(len(specs)), "0"], row
    total = next(line.split() for line in out.splitlines() if line.startswith("distinct cells"))
    assert int(total[2]) == len(distinct) == len(grid.cells(list(experiments.EXPERIMENTS), profile="full"))
    assert "would compute" in out and not tmp_path.joinpath(".grid").exists()  # a dry run writes nothing


def test_cells_are_deduplicated_across_notebooks():
    per = grid.cells_by_notebook(["06", "07"], profile="smoke")
    both = grid.cells(["06", "07"], profile="smoke")
    keys = [s.key() for s in both]
    assert len(keys) == len(set(keys)) == len({s.key() for specs in per.values() for s in specs})
    assert len(both) < sum(len(s) for s in per.values())  # STAMP's default row is in both
    with pytest.raises(ValueError, match="no planned notebook"):
        grid.cells(["99"], profile="smoke")


# -- status -----------------------------------------------------------------------------------------------
def test_status_done_missing_running(tmp_path):
    store = ResultsStore(tmp_path)
    specs = [_smoke("source", seed=s) for s in range(7)]
    _fake_record(store, specs[0])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host, now = socket.gethostname(), time.time()
    _marker(store, specs[1], host=host, pid=os.getpid(), deadline=None)  # this live process
    _marker(store, specs[2], host=host, pid=dead.pid, deadline=now + 3600)  # killed job: stale
    _marker(store, specs[3], host="node-17", pid=1, deadline=now + 3600)  # a job on another node
    _marker(store, specs[4], host="node-17", pid=1, deadline=now - 1)  # past its time limit: stale
    _marker(store, specs[5], host=host, pid=os.getpid(), deadline=now - 1)  # pid reused after the limit
    done, missing, running = grid.status(specs, store)
    assert done == [specs[0]]
    assert running == [specs[1], specs[3]]
    assert missing == [specs[2], specs[4], specs[5], specs[6]]


# -- grouping ---------------------------------------------------------------------------------------------
def test_cells_per_job_and_grouping():
    full = [RunSpec(method=m, dataset="cifar10_c", outliers=o, profile="full", corruptions=("fog",))
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
    monkeypatch.setenv(grid.FAULT_ENV, f"raise:{bad.key()}:{tmp_path / 'fault-once'}")
    report = grid.run_grid([good, bad], executor="local", store=store, progress=False)
    assert report.done == [good] and report.missing == [bad] and not report.ok
    [failed] = report.failed
    assert failed.specs == [bad] and failed.log is not None and "injected fault" in failed.log.read_text()
    assert bad.key() in failed.summary() and str(failed.log) in failed.summary()
    assert grid.failure_record(store, bad)["log"] == str(failed.log)
    stamp_of_good = store.path(good).stat().st_mtime_ns
    retry = grid.run_grid([good, bad], executor="local", store=store, progress=False, retry_failed=True)
    assert retry.ok and len(retry.done) == 2 and retry.jobs and len(retry.jobs) == 1
    assert store.path(good).stat().st_mtime_ns == stamp_of_good  # never recomputed
    assert grid.failure_record(store, bad) is None


def test_cli_grid_computes_the_missing_cells_of_a_notebook(tmp_path, capsys, digits_model):
    argv = ["grid", "--notebook", "02", "--profile", "smoke", "--param", "methods=source,bn_stats",
            "--results", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "done 2, missing 0" in out
    assert main([*argv, "--dry-run"]) == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("02_"))
    assert row[1:] == ["2", "2", "0", "0", "0"]
    assert main([*argv, "--param", "method=tent"]) == 2  # a misspelt parameter is refused
    assert "no chosen notebook takes it" in capsys.readouterr().err


def test_submitit_grid_survives_a_killed_job_and_matches_in_process_runs(tmp_path, monkeypatch, digits_model):
    """Acceptance: a grid through submitit's local executor (job subprocesses); one job is
    SIGKILLed after its first cell; re-running computes only what is missing, and every cell
    is stored exactly once with the metrics of an in-process stamplib.run."""
    store = ResultsStore(tmp_path / "results")
    specs = [_smoke("source"), _smoke("bn_stats"), _smoke("tent"), _smoke("tent", seed=1)]
    victim = grid.group_cells(specs, 2)[0][1]  # the second cell of the first job
    monkeypatch.setenv(grid.FAULT_ENV, f"kill:{victim.key()}:{tmp_path / 'fault-once'}")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    options = dict(executor="submitit-local", store=store, cells_per_job=2, cpus_per_task=1, time_min=5,
                   progress=False, jobs=2)

    first = grid.run_grid(specs, **options)
    assert len(first.jobs) == 2 and len(first.done) == 3 and first.missing == [victim]
    [failed] = first.failed
    assert failed.specs == [victim] and "without a result" in failed.error
    assert failed.log is not None and failed.log.is_file() and failed.log.parent.parent == store.root / ".grid" / "logs"
    assert (store.root / ".grid" / "running" / f"{victim.key()}.json").is_file()  # left by the killed job …
    assert grid.status(specs, store).missing == [victim]  # … and seen as stale

    stamps = {s.key(): store.path(s).stat().st_mtime_ns for s in first.done}
    second = grid.run_grid(specs, **options)
    assert second.ok and len(second.jobs) == 1 and len(second.done) == 4
    assert all(store.path(s).stat().st_mtime_ns == t for s, t in ((s, stamps[s.key()]) for s in first.done))
    assert sorted(p.name for p in store.root.glob("*.json")) == sorted(store.path(s).name for s in specs)
    assert not list(store.root.glob(".tmp-*")) and not list((store.root / ".grid" / "running").iterdir())

    reference = ResultsStore(tmp_path / "reference")
    for spec in specs:
        assert _metrics(store.get(spec)) == _metrics(stamplib.run(spec, store=reference)), spec.method


@pytest.mark.slow  # two spawned workers each import torch: about 20 s on two busy cores
def test_local_process_pool_matches_in_process_runs(tmp_path, digits_model):
    specs = [_smoke("source"), _smoke("tent")]
    store = ResultsStore(tmp_path / "pool")
    report = grid.run_grid(specs, executor="local", store=store, jobs=2, progress=False)
    assert report.ok and report.jobs == ["local-pool-0", "local-pool-1"]
    reference = ResultsStore(tmp_path / "reference")
    for spec in specs:
        assert _metrics(store.get(spec)) == _metrics(stamplib.run(spec, store=reference)), spec.method


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
    report = grid.run_grid(specs, executor="submitit", store=store, device="cuda", wait=False, progress=False,
                           cells_per_job=1, partition="gpu", gpus_per_job=1, cpus_per_task=6, time_min=90,
                           array_parallelism=8, mem_gb=24)
    assert report.jobs == ["4242_0", "4242_1"] and len(report.pending) == 2 and report.done == [specs[0]]
    [script] = (store.root / ".grid" / "logs").glob("4242/*submission.sh")
    text = script.read_text()
    for line in ("--array=0-1%2", "--partition=gpu", "--gpus-per-node=1", "--cpus-per-task=6", "--time=90",
                 "--mem=24GB", "--job-name=stamplib", f"--error={store.root / '.grid' / 'logs'}"):
        assert f"#SBATCH {line}" in text, line
