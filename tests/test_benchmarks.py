"""The GPU throughput benchmark's CPU smoke run, as CI makes it: every method of the tables on
both shapes, and a report that names the device, the versions and the options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stamplib import methods

REPO = Path(__file__).resolve().parents[1]


def test_gpu_throughput_runs_small_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "throughput.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_throughput.py", "--device", "cpu", "--small", "--threads", "1", "--out",
         str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert {"device", "device_name", "torch", "cuda", "cudnn", "bf16", "channels_last", "tf32"} <= set(report)
    assert report["device"] == "cpu" and report["small"] and report["tf32"] == {"matmul": False, "cudnn": False}
    rows = report["rows"]
    assert [(r["hyperparameter_set"], r["method"]) for r in rows] == [
        (shape, name) for shape in ("cifar10_c", "imagenet_c") for name in methods.TABLE_ORDER]
    for row in rows:
        assert row["error"] is None and row["images"] == 16 and row["images_per_s"] > 0, row
        assert row["hours_per_corruption"] > 0 and row["peak_gpu_memory_mib"] is None
    assert set(report["table_hours"]) == {"Table 1, CIFAR-10", "Table 2"}
    assert all(h > 0 for h in report["table_hours"].values())
    assert "estimate for Table 2 (14 methods × 2 outlier sets × 15 corruptions)" in done.stdout


def test_launch_count_counts_operators_and_synchronisations_on_the_cpu(tmp_path: Path) -> None:
    """The operator counts behind issue 42 (benchmarks/launch_count.py), on the tiny network:
    CoTTA's views in one forward dispatch fewer operators than its loop of forwards."""
    out = tmp_path / "counts.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/launch_count.py", "--small", "--methods", "source,cotta", "--steps", "1",
         "--override", "cotta:aug_threshold=1.01", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    loop = {r["method"]: r for r in json.loads(out.read_text())["rows"]}
    done = subprocess.run(
        [sys.executable, "benchmarks/launch_count.py", "--small", "--methods", "cotta", "--steps", "1",
         "--override", "cotta:aug_threshold=1.01", "--override", "cotta:view_chunk=32", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    [batched] = json.loads(out.read_text())["rows"]
    assert loop["source"]["syncs_per_step"] == 0 and loop["source"]["ops_per_step"] > 0
    assert batched["ops_per_step"] < loop["cotta"]["ops_per_step"] / 1.5


@pytest.mark.slow  # half a minute; the masked view paths' outputs are checked in tests/blocks/test_views.py
def test_launch_count_counts_the_gpu_paths_on_the_cpu(tmp_path: Path) -> None:
    """``--gpu-paths`` (issue 51): STAMP's views take their masked GPU paths, and a STAMP step
    then has no device synchronisation, where the CPU's index-list paths have some."""
    counts = {}
    for flag in ([], ["--gpu-paths"]):
        out = tmp_path / f"counts{len(flag)}.json"
        done = subprocess.run(
            [sys.executable, "benchmarks/launch_count.py", "--small", "--methods", "stamp", "--steps", "1",
             *flag, "--out", str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(out.read_text())
        assert report["gpu_paths"] == bool(flag)
        [counts[bool(flag)]] = report["rows"]
    assert counts[False]["device_syncs_per_step"] > 0 and counts[True]["device_syncs_per_step"] == 0


def test_gpu_profile_runs_small_on_the_cpu(tmp_path: Path) -> None:
    """benchmarks/gpu_profile.py (issue 51 item 3) on the tiny network: per method a wall time,
    the operators it dispatched and its top host operators; no device kernels on a CPU."""
    out = tmp_path / "profile.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_profile.py", "--device", "cpu", "--small", "--methods", "tent,cotta",
         "--steps", "1", "--warmup", "1", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    rows = {row["method"]: row for row in report["methods"]}
    assert set(rows) == {"tent", "cotta"} and report["environment"]["tf32"] == {"matmul": False, "cudnn": False}
    for row in rows.values():
        assert row["wall_ms_per_step"] > 0 and row["device_busy_ms_per_step"] == 0 and row["top_host"]
    assert rows["cotta"]["aten_ops_per_step"] > rows["tent"]["aten_ops_per_step"]  # 32 views against none
