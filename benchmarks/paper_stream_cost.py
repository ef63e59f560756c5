"""What the paper-stream claims cost: a tiny run of their cells, and the CPU-hours of the whole plan.

The claims on the step-size decay (``stream`` in the ledger) are decided at the paper's stream
length, on :data:`stamplib.evidence.benchmarks.BUILTIN`'s ``stream`` design: the compact built-in network on the 10,000
JPEG test images of ``shared/data``, 10,000 known-class images + 2,500 Noise outliers per
corruption. This script runs each distinct row of that plan (Table 5's rows the claims read) on
the first ``--batches`` batches of one corruption's paper-length stream, prints the CPU-seconds
per sample, and multiplies them into the plan: rows × seeds × 15 corruptions × 12,500 samples.
It writes no record (the stream is cut short, so it is no cell of the ledger).

Usage: PYTHONPATH=$PWD .venv/bin/python benchmarks/paper_stream_cost.py [--batches 4] [--threads 1]
           [--data-root ../shared/data]
"""

from __future__ import annotations

import argparse
import time

import torch

from stamplib import paths
from stamplib.evaluation.assembly import build_method, build_stream
from stamplib.evaluation.runner import run_stream
from stamplib.evidence import benchmarks

STREAM = benchmarks.BUILTIN.design("stream")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=4, help="batches of 64 to time per row (after one warm-up)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (a grid job runs one per core)")
    parser.add_argument("--data-root", default=str(paths.shared_data()))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    plan = benchmarks.ledger_cells(STREAM)
    rows = {s.overrides: s for s in plan}
    samples = 12_500 * len(STREAM.corruptions)
    total = 0.0
    for spec in rows.values():
        stream = build_stream(spec, max_id=64 * (args.batches + 1) * 4 // 5, data_root=args.data_root)
        method = build_method(spec, data_root=args.data_root)
        # CPU time of this process, not the wall clock: on a machine whose cores other jobs share,
        # the wall clock counts their time too.
        started = time.process_time()
        result = run_stream(method, stream)
        used = time.process_time() - started
        per_sample = used / len(result.labels)
        cells = sum(1 for s in plan if s.overrides == spec.overrides)
        total += per_sample * samples * cells
        print(f"{dict(spec.overrides) or 'full STAMP'}: {len(result.labels)} samples in {used:.1f} CPU-s "
              f"({result.seconds:.1f} s wall) = "
              f"{per_sample:.4f} CPU-s a sample ({result.batches} batches); {cells} cells of the plan")
    print(f"plan: {len(plan)} cells ({len(rows)} rows × seeds {STREAM.seeds}) × "
          f"{len(STREAM.corruptions)} corruptions × 12,500 samples ≈ {total / 3600:.1f} CPU-hours")


if __name__ == "__main__":
    main()
