"""CPU seconds of notebook 13's batch-size cells in the quick profile, on a machine that may be busy.

On a shared machine a cell's wall time (its record's ``seconds``) says more about the other jobs
than about the cell. The process time of a single-threaded run does not: this script runs each
chosen cell with one torch thread into a scratch store (``force``: always computed) and prints,
per cell, its process time, its wall time and H. Beside each method's batch of 64 (the paper's
batch, on gaussian noise alone) it prints the gaussian-noise seconds of the committed seed-0
record of notebook 02 (``results/builtin_benchmark``, computed by ``./run_all.sh`` on a quiet
2-core machine): their ratio turns process seconds into the committed records' seconds, the
unit in which issue 41 added up the quick profile
(results/quick_profile_cost/2026-11-26-issue41-estimate.json).

Usage: .venv/bin/python benchmarks/stress_batch_cpu_seconds.py --methods cotta,stamp --batch-sizes 64,1,4,16
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from stamplib.evaluation.runner import run
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import plans, registry
from stamplib.paths import RunContext

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", required=True, help="comma-separated method names")
    parser.add_argument("--batch-sizes", default="1,4,16,64", help="comma-separated batch sizes")
    parser.add_argument("--scratch", default=None, help="scratch results folder (default: a temporary one)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    committed = ResultsStore(REPO / "results" / "builtin_benchmark")
    scratch = RunContext.build(results=Path(args.scratch) if args.scratch else Path(tempfile.mkdtemp()),
                               command="benchmarks/stress_batch_cpu_seconds.py")
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    # the full profile's batch axis (1, 4, 16, 64) on the quick profile's cells
    plan = registry.plan("13_stress_streams", profile="quick", batch_sizes="1,4,16,64", methods=args.methods)
    for cell in plan.cells:
        if not cell.variant.startswith(f"{plans.BATCH_AXIS}="):
            continue
        size = int(cell.variant.split("=")[1])
        if size not in sizes:
            continue
        # the batch of 64 is notebook 02's cell read on gaussian noise: run that corruption alone
        spec = cell.spec.with_(corruptions=list(cell.corruptions)) if cell.corruptions else cell.spec
        wall, cpu = time.perf_counter(), time.process_time()
        record = run(spec, scratch, force=True)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        row = {"method": spec.method, "batch": size, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
               "record_s": record.seconds, "h": round(record.mean.h, 2)}
        if cell.corruptions:
            seed0 = committed.get(cell.spec)
            row["quiet_committed_gaussian_s"] = (
                None if seed0 is None else seed0.per_corruption["gaussian_noise"].seconds
            )
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
