"""Seconds of a quick-profile cell's first corruption on one CPU thread, STAMP's and CoTTA's
views one per forward against the automatic choice of ``blocks.bn.views_per_forward`` (several
views per forward when a batch holds only a few images): the measurement behind that rule.

Per method and batch size: the built-in benchmark's stream (gaussian_noise, Noise outliers,
quick profile, seed 0) through ``runner.run_stream``, channels-last as a record on a CPU runs
it, with ``view_chunk=1`` and with ``view_chunk=0`` (automatic), ``--repeats`` times in
alternation (the machine's drift hits both alike); the median seconds of each, their ratio, and
the largest difference between the two runs' predictions (every view keeps its own BN
statistics, so that is float rounding at most).

Usage: .venv/bin/python benchmarks/cpu_view_chunks.py [--cases stamp:4,cotta:4,stamp:16]
           [--repeats 2] [--out chunks.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics

import torch

from stamplib import data
from stamplib.blocks.bn import views_per_forward
from stamplib.evaluation.assembly import build_method, build_stream
from stamplib.evaluation.runner import StreamResult, run_stream
from stamplib.evaluation.spec import RunSpec

VIEWS = {"stamp": 16, "cotta": 32}
CHOICES = {"one view per forward": 1, "automatic": 0}


def one_run(method: str, batch_size: int, view_chunk: int) -> StreamResult:
    spec = RunSpec.make(method, dataset="cifar10_builtin", outliers="noise", corruptions=("gaussian_noise",),
                        profile="quick", seed=0, stream=data.StreamSpec(batch_size=batch_size),
                        overrides={"view_chunk": view_chunk})
    tta = build_method(spec, "cpu")
    tta.reset()
    return run_stream(tta, build_stream(spec), "cpu")


def measure(method: str, batch_size: int, repeats: int) -> dict[str, object]:
    seconds: dict[str, list[float]] = {name: [] for name in CHOICES}
    probs: dict[str, torch.Tensor] = {}
    for _ in range(repeats):
        for name, chunk in CHOICES.items():
            result = one_run(method, batch_size, chunk)
            seconds[name].append(result.seconds)
            probs[name] = result.probs
    median = {name: statistics.median(times) for name, times in seconds.items()}
    auto = views_per_forward(0, VIEWS[method], torch.device("cpu"), batch_size * 32 * 32)
    return {"method": method, "batch_size": batch_size, "automatic_views_per_forward": auto,
            "images": len(probs["automatic"]), "seconds": seconds, "median_seconds": median,
            "speedup": median["one view per forward"] / median["automatic"],
            "max_prob_difference": float((probs["one view per forward"] - probs["automatic"]).abs().max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="stamp:4,cotta:4,stamp:16",
                        help="comma-separated method:batch_size pairs (stamp or cotta)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per choice, alternating")
    parser.add_argument("--out", default="", help="also write the rows as JSON here")
    args = parser.parse_args()
    cases = [(m, int(b)) for m, b in (case.split(":") for case in args.cases.split(","))]
    unknown = sorted({m for m, _ in cases} - set(VIEWS))
    if unknown:
        parser.error(f"--cases: methods with views are {sorted(VIEWS)}, not {unknown}")
    torch.set_num_threads(1)  # as a grid worker on a CPU core
    data.dataset("cifar10_builtin")  # an unknown data set fails before any timing
    rows = [measure(m, b, args.repeats) for m, b in cases]
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, one thread, channels-last")
    print(f"{'method':8s} {'batch':>5s} {'images':>6s} {'views/forward':>13s} {'one view s':>11s} "
          f"{'automatic s':>12s} {'speed-up':>9s} {'max |Δp|':>9s}")
    for row in rows:
        median = row["median_seconds"]
        print(f"{row['method']:8s} {row['batch_size']:5d} {row['images']:6d} {row['automatic_views_per_forward']:13d} "
              f"{median['one view per forward']:11.1f} {median['automatic']:12.1f} {row['speedup']:8.2f}x "
              f"{row['max_prob_difference']:9.1e}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"torch": torch.__version__, "machine": platform.machine(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
