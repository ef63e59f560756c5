"""Every claim's verdict before and after, on both benchmarks, and which changed and why.

Before: ``docs/claims.md`` as committed at ``--before`` (default 038b858, the page before the
ledger was held to the paper's protocol), read from git. After: the ledger judged now on the
committed records (:func:`stamplib.evidence.judge.judge_all` over each benchmark's evidence, the
fifteen corruptions first). A claim is matched by its words (a reworded one through
:data:`RENAMED`). "Within the seed spread" before and "within the noise" after are the same
verdict under two names. Why a verdict changed, in order: the claim is new or removed; it needs
the paper's stream length; it now rests on fifteen corruptions; STAMP's records from another CPU
kind change it; a seed's margin is a tie under the new rule; otherwise the rule (yes / no now
need the 95 % interval, a t-interval, to exclude zero).

Usage: PYTHONPATH=$PWD .venv/bin/python tools/claims_before_after.py [--before 038b858] [--markdown]
"""

from __future__ import annotations

import argparse
import subprocess

from stamplib import paths
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import judge, ledger

#: Old words → the claim's key, where the words changed.
RENAMED = {"Self-weighting raises AUROC over S.A.+D.S.": "ablation_self_weight_auroc"}
#: Claims the page had that the paper does not make, and why they left.
REMOVED = {"STAMP's H-score drops least as the outlier share grows from 5 % to 50 %":
           "removed: Table 6 shows STAMP alone, so the paper makes no such comparison",
           "Each row of the ablation adds to the one before it (H rises down Table 5)":
           "removed: Table 5's rows are not nested and the paper claims no such order"}
SAME = {"within the seed spread": judge.NOISE}


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
        found[cells[0]] = (cells[built].strip("*"), cells[ref].strip("*"))
    return found


def reading_now(verdict: judge.Verdict) -> str:
    """The verdict now, with what it rests on where it rests on records (:meth:`judge.Verdict.evidence`)."""
    if verdict.needs_data or verdict.needs_stream or not verdict.decided_seeds:
        return verdict.answer
    return f"{verdict.answer} [{verdict.evidence()}]"


def why(before: str, verdict: judge.Verdict) -> str:
    after = verdict.verdict
    if SAME.get(before, before) == after and (verdict.complete or verdict.needs_data):
        return ""
    if verdict.needs_stream:
        return "stream length: a short stream cannot decide it"
    if len(verdict.benchmark.corruptions) > 3:
        return f"corruptions: now over {len(verdict.benchmark.corruptions)} ({verdict.evidence()})"
    if verdict.cpu_note:
        return f"CPU: {verdict.cpu_note}"
    if after == judge.TIE:
        return "rule: every seed's margin rounds to zero (tie)"
    if not verdict.complete:
        return f"seeds: {verdict.answer}"
    if before in ("yes", "no") and after == judge.NOISE:
        low, high = verdict.interval
        return (f"rule: every seed {'holds' if before == 'yes' else 'fails'}, but the 95 % t-interval "
                f"{low:+.1f} to {high:+.1f} reaches zero")
    return "rule"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="038b858", help="the commit whose docs/claims.md is 'before'")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    old = before_verdicts(args.before)
    root = paths.repo_root()
    built = judge.judge_all(ResultsStore(root / "results" / "builtin_benchmark"), ledger.BUILTIN_EVIDENCE)
    ref = judge.judge_all(ResultsStore(root / "results" / "reference"), ledger.REFERENCE_EVIDENCE)
    by_words = {RENAMED.get(w, ""): v for w, v in old.items() if w in RENAMED}
    rows = []
    for b, r in zip(built, ref):
        was = old.get(b.claim.words) or by_words.get(b.claim.key)
        if was is None:
            rows.append((b.claim.key, "—", reading_now(b), "new claim", "—", reading_now(r), "new claim"))
            continue
        rows.append((b.claim.key, was[0], reading_now(b), why(was[0], b), was[1], reading_now(r), why(was[1], r)))
    for words, reason in REMOVED.items():
        was = old.get(words, ("—", "—"))
        rows.append((words, was[0], "—", reason, was[1], "—", reason))
    head = ("claim", "built-in before", "built-in after", "why", "reference before", "reference after", "why")
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in rows:
            print(" · ".join(row))
    changed = sum(1 for row in rows for w in (row[3], row[6]) if w)
    print(f"\n{len(rows)} claims; {changed} of {2 * len(rows)} verdicts changed or are new or removed")


if __name__ == "__main__":
    main()
