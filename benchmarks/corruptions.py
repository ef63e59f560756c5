"""Throughput of stamplib.data.corruptions vs a plain per-image transcription.

For every corruption this prints images/s of the batched suite (`corrupt`) and of the plain
per-image transcription of the Hendrycks code (protocol.md §7.1) that the tests use as the
suite's oracle (``tests/oracles/corruptions.py``), plus the max absolute difference between
the two outputs (0 = identical bytes; tests/data/test_corruptions.py asserts it).

Usage: .venv/bin/python benchmarks/corruptions.py [--n 256] [--size 32] [--severity 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

from stamplib.data import corruptions as C
from stamplib.data.corruptions import CORRUPTIONS, corrupt, parameters

# The oracle is the test suite's (tests/oracles/): a benchmark runs from the checkout that holds it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.oracles.corruptions import reference  # noqa: E402

SEED = 0


def _timed(fn, *args, repeats: int = 3) -> tuple[np.ndarray, float]:
    """Best of ``repeats`` wall-clock runs (the machine is shared), after a 2-image warm-up."""
    fn(args[0][:2], *args[1:])  # warm caches (frost textures, imports)
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - t)
    return out, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--size", type=int, default=32, choices=C.SUPPORTED_SIZES)
    ap.add_argument("--severity", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(2024)
    # smooth random images (8×8 blocks of colour + noise), closer to natural images than noise
    s = args.size
    base = rng.integers(0, 256, (args.n, s // 4, s // 4, 3)).astype(np.float64)
    x = np.kron(base, np.ones((1, 4, 4, 1))) + rng.normal(0, 20, (args.n, s, s, 3))
    x = np.clip(x, 0, 255).astype(np.uint8)
    print(f"{args.n} images {s}x{s}, severity {args.severity}, seed {SEED}")
    print(
        f"{'corruption':<18} {'suite img/s':>12} {'reference img/s':>16} {'speed-up':>9} {'max |diff|':>11}"
    )
    for name in CORRUPTIONS:
        _ = parameters(name, args.severity, s)
        ys, ts = _timed(corrupt, x, name, args.severity, repeats=args.repeats)
        yr, tr = _timed(reference, x, name, args.severity, repeats=args.repeats)
        diff = int(np.abs(ys.astype(np.int16) - yr).max())
        print(f"{name:<18} {args.n / ts:>12.0f} {args.n / tr:>16.0f} {tr / ts:>8.1f}x {diff:>11d}")


if __name__ == "__main__":
    main()
