"""List in a committed evidence store's manifest (MANIFEST.sha256) the records it holds but does
not list yet, after checking that each is a whole, consistent record of the cell its file name
says. Nothing else is changed: a listed record is never re-listed under another digest.

    PYTHONPATH=$PWD .venv/bin/python tools/seal_evidence.py STORE [STORE ...]
    PYTHONPATH=$PWD .venv/bin/python tools/seal_evidence.py --check STORE [STORE ...]

Normally no one runs this: the commands that compute records (``run``, ``grid``, ``benchmark
compute``, ``reference compute``) give each record they write into a sealed store its entry in
the same step (``ResultsStore.put``). It is for two maintainer's cases:

* the bootstrap: a store with no manifest yet gets one listing every record it holds (this is how
  ``results/builtin_benchmark`` and ``results/reference`` were sealed);
* records computed elsewhere by code that does not write manifest entries: e.g. cells computed in
  the background by a clone of an older commit into a store of its own, then copied into the
  committed store. Copy the new ``*.json`` records (and, for ``results/reference``, their
  ``.outputs.npz`` files) in, run this on the store, check what it says it added, and commit the
  records with the manifest. Until then, ``claims render`` refuses them as "not in the manifest".

It refuses (and lists nothing for) a record that is unreadable, inconsistent, or named for
another cell, and reports entries whose file is absent or differs from its digest: restore those
files from git (``git checkout -- FILE``); it never rewrites an entry. ``--check`` only reports.
Exit status: 0 when the store agrees with its manifest afterwards, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stamplib.evaluation import manifest
from stamplib.evaluation.store import file_problem


def seal(root: Path, check_only: bool) -> list[str]:
    """Add the unlisted, consistent records of the store at ``root`` to its manifest (unless
    ``check_only``); returns one line per problem left, after a summary line printed here."""
    problems: list[str] = []
    with manifest.locked(root):
        entries = manifest.read(root) if manifest.is_sealed(root) else {}
        present = {name: manifest.file_digest(root / name) for name in manifest.record_names(root)}
        added = {}
        for difference in manifest.differences(entries, present):
            if difference.kind == "absent":
                problems.append(f"{difference.name}: listed but absent; restore it (git checkout -- {root / difference.name})")
            elif difference.kind == "changed":
                problems.append(f"{difference.name}: differs from its listed digest (edited); restore it "
                                f"(git checkout -- {root / difference.name})")
            elif (why := file_problem(root, root / difference.name)) is not None:
                problems.append(f"{difference.name}: not sealed: {why}")
            else:
                added[difference.name] = present[difference.name]
        if added and not check_only:
            manifest.write(root, {**entries, **added})
    verb = "unlisted, would be added" if check_only else "added"
    print(f"{root}: {len(entries)} listed, {len(added)} {verb}, {len(problems)} problem(s)")
    if check_only and added:
        problems += [f"{name}: not in the manifest" for name in sorted(added)]
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", nargs="+", type=Path, help="a results store's folder, e.g. results/reference")
    parser.add_argument("--check", action="store_true", help="only report; write nothing")
    args = parser.parse_args(argv)
    problems = 0
    for root in args.stores:
        if not root.is_dir():
            print(f"error: no results store at {root}", file=sys.stderr)
            return 2
        try:
            lines = seal(root, args.check)
        except manifest.EvidenceError as err:  # a damaged manifest
            print(f"error: {err}", file=sys.stderr)
            return 2
        for line in lines:
            print(f"  {line}")
            problems += 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
