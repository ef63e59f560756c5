"""Every claim's verdict before and after, on both benchmarks, and what changed it: the rule, the
source networks, or both.

Before: ``docs/claims.md`` as committed at ``--before`` (default 0e2ba8d, the page before source
networks became replicates and the rule read the interval alone), read from git. After: the ledger
judged now on the committed records (:func:`stamplib.evidence.judge.judge_benchmark`). Between the
two stands the new rule on the old evidence — the designs of one network that decided before
(network 0 under its stream seeds) — so that a change is put down to

* **rule**: the old verdict differs from the new rule's on the old evidence;
* **networks**: the new rule reads otherwise on the source networks as replicates than on one
  network's streams;
* **both**.

A verdict whose word is the same before and after has not changed, even where the rule moved it
on the old evidence and the networks moved it back; its cause then reads ``none (rule → X,
networks back)`` and it is not counted among the changed.

"within the noise" before is the old rule's word for what now reads *undecided* or *smaller than
the paper's*: that change of words is the rule's.

``--per-network`` prints instead each claim's margin under each network of the benchmarks' designs of
several networks, decided or not: how far one network moves a claim before a design of three decides.

Usage: PYTHONPATH=$PWD .venv/bin/python tools/claims_before_after.py [--before 0e2ba8d] [--markdown]
       [--per-network]
"""

from __future__ import annotations

import argparse
import subprocess

from stamplib import paths
from stamplib.evidence import benchmarks, judge, ledger, pages
from stamplib.evidence.judge import Verdict

#: What a changed verdict is put down to.
CAUSES = ("rule", "networks", "both")


def before_verdicts(commit: str) -> dict[str, tuple[str, str]]:
    """Per claim's words, (built-in verdict, reference verdict) from ``docs/claims.md`` at ``commit``."""
    text = subprocess.run(["git", "show", f"{commit}:docs/claims.md"], cwd=paths.repo_root(), check=True,
                          capture_output=True, text=True).stdout
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    built = next(i for i, c in enumerate(header) if c.startswith("built-in") and "paired" not in c)
    ref = next(i for i, c in enumerate(header) if c.startswith("reference") and "paired" not in c)
    found = {}
    for line in rows[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > max(built, ref):
            found[cells[0]] = (_word(cells[built]), _word(cells[ref]))
    return found


def _word(cell: str) -> str:
    """The bare verdict of an old cell: ``**within the noise** (1 of 5 seeds hold, …)`` → ``within the noise``."""
    return cell.split("**")[1] if cell.startswith("**") else cell


def _bare(word: str) -> str:
    return word.split(" (")[0]


def old_evidence(benchmark: benchmarks.Benchmark) -> tuple[benchmarks.Design, ...]:
    """The benchmark's designs of one network: what decided before networks became replicates."""
    return tuple(d for d in benchmark.designs if not d.varies_networks)


def cause(before: str, on_old: Verdict, now: Verdict) -> str:
    """One of :data:`CAUSES`, ``none (…)`` or empty (module docstring)."""
    old, mid, new = _bare(before), _bare(on_old.label), _bare(now.label)
    if old == new:
        return "" if mid == old else f"none (rule → {mid}, networks back)"
    if old == mid:
        return "networks"
    return "rule" if mid == new else "both"


def reading(verdict: Verdict) -> str:
    if verdict.needs_data or verdict.needs_stream or len(verdict.margins) < 2:
        return verdict.label
    return f"{verdict.label} [{verdict.design.title}]"


def per_network_table() -> str:
    """Markdown: each claim's margin under each network of every benchmark's designs of several networks."""
    root = paths.repo_root()
    columns = []  # (benchmark, design, network)
    judged = {}
    for benchmark in benchmarks.BENCHMARKS:
        store = pages.RecordsSnapshot(root / benchmark.store).records_by_key()
        for design in (d for d in benchmark.designs if d.varies_networks):
            verdicts = [judge.judge(claim, design, store) for claim in ledger.LEDGER]
            found = sorted({r.network for v in verdicts for r in v.margins})
            columns += [(benchmark, design, k) for k in found]
            judged[(benchmark.name, design.name)] = verdicts
    head = ["claim", "the paper's margin"] + [f"{b.title}, {d.title}: network {k}" for b, d, k in columns]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for i, claim in enumerate(ledger.LEDGER):
        cells, paper = [], None
        for b, d, k in columns:
            verdict = judged[(b.name, d.name)][i]
            margin = {r.network: m for r, m in verdict.margins.items()}.get(k)
            cells.append("—" if margin is None else f"{margin:+.1f}")
            paper = verdict.paper_size if verdict.paper_size is not None else paper
        if any(c != "—" for c in cells):
            size = "—" if paper is None else f"{paper:+.1f}".replace("-0.0", "+0.0")
            lines.append(f"| `{claim.key}` | {size} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="0e2ba8d", help="the commit whose docs/claims.md is 'before'")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--per-network", action="store_true",
                        help="print each claim's margin under each network instead (Markdown)")
    args = parser.parse_args()
    if args.per_network:
        print(per_network_table())
        return
    old = before_verdicts(args.before)
    root = paths.repo_root()
    rows = []
    per_benchmark = []
    for benchmark in benchmarks.BENCHMARKS:
        store = pages.RecordsSnapshot(root / benchmark.store)
        now = judge.judge_benchmark(benchmark, store)
        earlier = judge.judge_benchmark(benchmarks.Benchmark(benchmark.name, benchmark.title, benchmark.store,
                                                             old_evidence(benchmark)), store)
        per_benchmark.append((now, earlier))
    (built, built_old), (ref, ref_old) = per_benchmark
    for b, bo, r, ro in zip(built, built_old, ref, ref_old):
        was = old.get(b.claim.words) or old.get(judge.claim_text(b.claim))
        if was is None:
            rows.append((b.claim.key, "—", reading(b), "new claim", "—", reading(r), "new claim"))
            continue
        rows.append((b.claim.key, was[0], reading(b), cause(was[0], bo, b), was[1], reading(r), cause(was[1], ro, r)))
    head = ("claim", "built-in before", "built-in after", "cause", "reference before", "reference after", "cause")
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in rows:
            print(" · ".join(row))
    causes = [c for row in rows for c in (row[3], row[6]) if c in CAUSES]
    print(f"\n{len(rows)} claims; {len(causes)} of {2 * len(rows)} verdicts changed: "
          + ", ".join(f"{causes.count(c)} by {c}" for c in CAUSES if c in causes))


if __name__ == "__main__":
    main()
