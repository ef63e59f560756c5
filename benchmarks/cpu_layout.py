"""Seconds of a quick-profile cell's first corruption on one CPU thread, the network in the
contiguous (NCHW) layout against channels-last: the measurement behind
``stamplib.evaluation.assembly.network_layout``.

Per method: the built-in benchmark's stream (gaussian_noise, Noise outliers, quick profile,
seed 0) through ``runner.run_stream``, the loop a table's cell runs, once per layout and
``--repeats`` times in alternation (the machine's drift hits both alike); the median seconds
per layout, their ratio, and the largest difference between the two layouts' predictions
(float rounding, amplified by the adaptation over the stream).

Usage: .venv/bin/python benchmarks/cpu_layout.py [--methods stamp,cotta,tent] [--repeats 2]
           [--out layout.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from stamplib import data
from stamplib.evaluation.assembly import build_method, build_stream, layout_name
from stamplib.evaluation.runner import StreamResult, run_stream
from stamplib.evaluation.spec import RunSpec

LAYOUTS = (torch.contiguous_format, torch.channels_last)


def quick_stream_spec(method: str, **fields: Any) -> RunSpec:
    """The cell these CPU benchmarks time: the built-in benchmark's first corruption with Noise
    outliers, quick profile, seed 0 (``fields``: more RunSpec fields, e.g. stream, overrides)."""
    return RunSpec.make(method, dataset="cifar10_builtin", outlier_set="noise", corruptions=("gaussian_noise",),
                        profile="quick", seed=0, **fields)


def alternating(runs: dict[str, Callable[[], StreamResult]], repeats: int
                ) -> tuple[dict[str, list[float]], dict[str, torch.Tensor]]:
    """Each run ``repeats`` times in alternation (the machine's drift hits all alike): the
    seconds of every repeat per name, and each name's predictions of its last repeat."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    probs: dict[str, torch.Tensor] = {}
    for _ in range(repeats):
        for name, run in runs.items():
            result = run()
            seconds[name].append(result.seconds)
            probs[name] = result.probs
    return seconds, probs


def one_run(spec: RunSpec, layout: torch.memory_format) -> StreamResult:
    method = build_method(spec, "cpu", layout=layout)
    method.reset()
    return run_stream(method, build_stream(spec), "cpu")


def measure(method: str, repeats: int) -> dict[str, object]:
    spec = quick_stream_spec(method)
    seconds, probs = alternating(
        {layout_name(layout): partial(one_run, spec, layout) for layout in LAYOUTS}, repeats)
    median = {name: statistics.median(times) for name, times in seconds.items()}
    return {"method": method, "images": len(probs["contiguous"]), "seconds": seconds, "median_seconds": median,
            "speedup": median["contiguous"] / median["channels_last"],
            "max_prob_difference": float((probs["contiguous"] - probs["channels_last"]).abs().max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default="stamp,cotta,tent", help="comma-separated method names")
    parser.add_argument("--repeats", type=int, default=2, help="runs per layout, alternating")
    parser.add_argument("--out", default="", help="also write the rows as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as a grid worker on a CPU core
    data.dataset("cifar10_builtin")  # an unknown data set fails before any timing
    rows = [measure(name, args.repeats) for name in args.methods.split(",")]
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, one thread")
    print(f"{'method':10s} {'images':>6s} {'contiguous s':>13s} {'channels-last s':>16s} {'speed-up':>9s} "
          f"{'max |Δp|':>9s}")
    for row in rows:
        median = row["median_seconds"]
        print(f"{row['method']:10s} {row['images']:6d} {median['contiguous']:13.1f} {median['channels_last']:16.1f} "
              f"{row['speedup']:8.2f}x {row['max_prob_difference']:9.1e}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"torch": torch.__version__, "machine": platform.machine(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
