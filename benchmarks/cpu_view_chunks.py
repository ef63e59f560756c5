"""Seconds of a quick-profile cell's first corruption on one CPU thread for STAMP's and CoTTA's
views at several views per forward: the measurement behind ``blocks.bn.views_per_forward``'s
CPU rule (one view per forward, several when a batch holds only a few images).

Per method and batch size: the built-in benchmark's stream (gaussian_noise, Noise outliers,
quick profile, seed 0) through ``runner.run_stream``, channels-last as a record on a CPU runs
it, once per ``--chunks`` value (``view_chunk``: views per forward, 0 = the automatic choice),
``--repeats`` times in alternation (the machine's drift hits all alike); the median seconds of
each, each one's speed-up over the first, and the largest difference of its predictions from
the first's (every view keeps its own BN statistics, so that is float rounding at most).

Usage: .venv/bin/python benchmarks/cpu_view_chunks.py [--cases stamp:4,cotta:4,stamp:16]
           [--chunks 1,0] [--repeats 2] [--out chunks.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_layout import alternating, quick_stream_spec  # noqa: E402

from stamplib import data, methods  # noqa: E402
from stamplib.blocks.bn import views_per_forward  # noqa: E402
from stamplib.evaluation.assembly import build_method, build_stream  # noqa: E402
from stamplib.evaluation.runner import StreamResult, run_stream  # noqa: E402

VIEWS = {"stamp": 16, "cotta": 32}


def one_run(method: str, batch_size: int, view_chunk: int) -> StreamResult:
    spec = quick_stream_spec(method, stream=data.StreamSpec(batch_size=batch_size))
    tta = build_method(spec, "cpu", execution=methods.Execution(view_chunk=view_chunk))
    tta.reset()
    return run_stream(tta, build_stream(spec), "cpu")


def chunk_name(chunk: int, method: str, batch_size: int) -> str:
    if chunk:
        return str(chunk)
    return f"0 (auto: {views_per_forward(0, VIEWS[method], torch.device('cpu'), batch_size * 32 * 32)})"


def measure(method: str, batch_size: int, chunks: list[int], repeats: int) -> dict[str, object]:
    names = [chunk_name(c, method, batch_size) for c in chunks]
    seconds, probs = alternating(
        {name: partial(one_run, method, batch_size, chunk) for name, chunk in zip(names, chunks)}, repeats)
    median = {name: statistics.median(times) for name, times in seconds.items()}
    first = names[0]
    return {"method": method, "batch_size": batch_size, "images": len(probs[first]), "seconds": seconds,
            "median_seconds": median, "speedup_over_first": {n: median[first] / median[n] for n in names},
            "max_prob_difference_from_first": {n: float((probs[n] - probs[first]).abs().max()) for n in names}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="stamp:4,cotta:4,stamp:16",
                        help="comma-separated method:batch_size pairs (stamp or cotta)")
    parser.add_argument("--chunks", default="1,0", help="comma-separated views per forward (0 = automatic)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per choice, alternating")
    parser.add_argument("--out", default="", help="also write the rows as JSON here")
    args = parser.parse_args()
    cases = [(m, int(b)) for m, b in (case.split(":") for case in args.cases.split(","))]
    chunks = [int(c) for c in args.chunks.split(",")]
    unknown = sorted({m for m, _ in cases} - set(VIEWS))
    if unknown:
        parser.error(f"--cases: methods with views are {sorted(VIEWS)}, not {unknown}")
    if any(c < 0 for c in chunks):
        parser.error("--chunks: views per forward are positive, or 0 for the automatic choice")
    torch.set_num_threads(1)  # as a grid worker on a CPU core
    data.dataset("cifar10_builtin")  # an unknown data set fails before any timing
    rows = [measure(m, b, chunks, args.repeats) for m, b in cases]
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, one thread, channels-last")
    print(f"{'method':8s} {'batch':>5s} {'images':>6s} {'views/forward':>14s} {'seconds':>8s} {'speed-up':>9s} "
          f"{'max |Δp|':>9s}")
    for row in rows:
        for name, median in row["median_seconds"].items():
            print(f"{row['method']:8s} {row['batch_size']:5d} {row['images']:6d} {name:>14s} {median:8.1f} "
                  f"{row['speedup_over_first'][name]:8.2f}x {row['max_prob_difference_from_first'][name]:9.1e}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"torch": torch.__version__, "machine": platform.machine(), "chunks": chunks, "rows": rows},
                      fh, indent=1)


if __name__ == "__main__":
    main()
