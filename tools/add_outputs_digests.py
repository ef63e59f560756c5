"""Give the records of results stores the SHA-256 of their outputs files (``outputs_sha256``),
changing nothing else in them: records written before records carried it. A record whose
outputs file is absent here (results/builtin_benchmark keeps none) is left as it is.

    PYTHONPATH=$PWD .venv/bin/python tools/add_outputs_digests.py [STORE ...]

Without arguments: the committed stores, results/reference and results/builtin_benchmark.
Prints how many records of each store got a digest, already had one, or have no outputs file here.
A sealed store (one with MANIFEST.sha256, as both committed stores now are) is left as it is: its
records are listed by digest, so changing one would make every page refuse it.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from stamplib.evaluation.store import add_outputs_digest

COMMITTED = ("results/reference", "results/builtin_benchmark")


def main(stores: list[str]) -> int:
    root = Path(__file__).resolve().parents[1]
    refused = 0
    for store in stores or [str(root / s) for s in COMMITTED]:
        counts: Counter[str] = Counter()
        for path in sorted(Path(store).glob("*.json")):
            if path.name.startswith("."):
                continue
            outcome = add_outputs_digest(path)
            counts[outcome] += 1
            if outcome in ("damaged outputs file", "not in the store's format"):
                print(f"  left as it is: {path.name} ({outcome})")
                refused += 1
        print(f"{store}: " + ", ".join(f"{n} {what}" for what, n in sorted(counts.items())))
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
