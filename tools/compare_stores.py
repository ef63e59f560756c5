"""Compare two results stores record by record (a behaviour-preserving change must not move a bit).

    python tools/compare_stores.py BEFORE_DIR AFTER_DIR [--ignore-method sar,sotta]

Same set of record keys; for every record the same spec and the same per-corruption metrics
(acc, auroc, h, n_id, n_outliers, collapsed, collapse_reason) and means, compared as exact
floats (their JSON text). Timings (``seconds``), ``device`` and ``versions`` are not compared.
Exits 1 on any difference, printing each. Reads JSON only: no stamplib import.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TIMINGS = {"seconds"}


def records(root: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(root.glob("*.json")):
        if path.name.startswith("."):
            continue
        record = json.loads(path.read_text())
        out[record["key"]] = record
    return out


def numbers(record: dict) -> dict:
    """Everything a record measured, without timings."""
    per = {c: {k: v for k, v in m.items() if k not in TIMINGS} for c, m in record["per_corruption"].items()}
    return {"spec": record["spec"], "config": record.get("config"), "per_corruption": per,
            "mean": record["mean"], "collapsed": record.get("collapsed")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--ignore-method", default="", help="comma-separated methods left out of the comparison")
    args = parser.parse_args(argv)
    ignored = {m for m in args.ignore_method.split(",") if m}
    before = {k: r for k, r in records(args.before).items() if r["spec"]["method"] not in ignored}
    after = {k: r for k, r in records(args.after).items() if r["spec"]["method"] not in ignored}
    problems = [f"only before: {k} {before[k]['spec']['method']}" for k in sorted(before.keys() - after.keys())]
    problems += [f"only after: {k} {after[k]['spec']['method']}" for k in sorted(after.keys() - before.keys())]
    same = 0
    for key in sorted(before.keys() & after.keys()):
        a, b = numbers(before[key]), numbers(after[key])
        if json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True):
            same += 1
            continue
        for part in a:
            if json.dumps(a[part], sort_keys=True) != json.dumps(b[part], sort_keys=True):
                problems.append(f"differs: {key} {a['spec']['method']} {part}: {a[part]} != {b[part]}")
    print(f"{len(before)} records before, {len(after)} after, {same} identical (metrics bit for bit)"
          + (f"; ignored methods: {', '.join(sorted(ignored))}" if ignored else ""))
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
