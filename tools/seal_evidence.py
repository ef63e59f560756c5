"""List in a committed evidence store's manifest (MANIFEST.sha256) the records (and network
diagnostics, and records of its cells from another CPU kind in ``other_cpus/``) it holds but does not
list yet, after checking that each is a whole, consistent record
of one of its benchmark's cells, the one its file name says. Nothing else is changed: a listed file
is never re-listed under another digest.

    PYTHONPATH=$PWD .venv/bin/python tools/seal_evidence.py STORE [STORE ...]
    PYTHONPATH=$PWD .venv/bin/python tools/seal_evidence.py --check STORE [STORE ...]

Normally no one runs this: the commands that compute records (``claims compute``, and
``run``/``grid`` given ``--into-committed``) give each record and diagnostic they write into a
sealed store its entry in the same step (``ResultsStore.put``, ``ResultsStore.put_file``). It is
for two maintainer's cases:

* the bootstrap: a store with no manifest yet gets one listing every record it holds (this is how
  ``results/builtin_benchmark`` and ``results/reference`` were sealed);
* records computed elsewhere by code that does not write manifest entries: e.g. cells computed in
  the background by a clone of an older commit into a store of its own, then copied into the
  committed store. Copy the new ``*.json`` records (and, for ``results/reference``, their
  ``.outputs.npz`` files) in, run this on the store, check what it says it added, and commit the
  records with the manifest. Until then, ``claims render`` refuses them as "not in the manifest".

It lists only what belongs to the store's benchmark (``stamplib.evidence.benchmarks``): a record
must be one of the cells of the benchmark's designs (or, for ``results/reference``, of the
reference run's own), whole and consistent, with its rows recomputed from its per-sample outputs
where the store keeps them and its mean recomputed from its rows; a network diagnostic
(``networks/<checkpoint>.json``) must be one of the designs' networks. It refuses (and lists nothing
for) anything else — a smoke-profile record copied in is not a cell of any design — and reports
entries whose file is absent or differs from its digest: restore those files from git
(``git checkout -- FILE``); it never rewrites an entry. ``--check`` only reports.
Exit status: 0 when the store agrees with its manifest afterwards, 1 otherwise, 2 for a folder that
is no committed benchmark's store.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

from stamplib.evaluation import manifest
from stamplib.evaluation.outputs import NoOutputsError, rescore
from stamplib.evaluation.store import file_problem, read_record


def planned_keys(benchmark: object) -> set[str]:
    """The keys of every cell ``benchmark`` (a :class:`stamplib.evidence.benchmarks.Benchmark`)
    plans: each design's claim and headline cells and Table 6's rows, and for the reference run its
    own cells (notebooks' core and optional cells)."""
    from stamplib.evaluation.store import ResultsStore
    from stamplib.evidence import benchmarks
    from stamplib.experiments import reference

    empty = ResultsStore(Path("/nonexistent"))  # every cell counts as missing, so every one is listed
    keys: set[str] = set()
    for design in benchmark.designs:  # type: ignore[attr-defined]
        keys |= {s.key() for s in benchmarks.evidence_cells(design, empty, "cpu")}
        keys |= {s.key() for s in benchmarks.table6_rows(design)}
    if benchmark is benchmarks.REFERENCE:
        keys |= {s.key() for s in reference.specs() + reference.extra_specs()}
    return keys


def planned_networks(benchmark: object) -> set[tuple[str, int]]:
    """The (data set, network) pairs of ``benchmark``'s designs that vary the source network."""
    from stamplib.evidence import benchmarks

    return {pair for design in benchmark.designs if design.varies_networks  # type: ignore[attr-defined]
            for pair in benchmarks.networks_of(design)}


def _rows_problem(root: Path, name: str) -> str | None:
    """Where the store keeps the record's per-sample outputs: a row whose metrics its outputs do
    not give (recomputed, as the store's re-scoring does)."""
    record = read_record(root / name)
    if isinstance(record, str):
        return record
    try:
        again = rescore(record, root)
    except NoOutputsError:
        return None  # a store that does not keep outputs (results/builtin_benchmark): the mean check stands
    for corruption, row in record.per_corruption.items():
        for metric, value in row.scores.items():
            other = again.per_corruption[corruption].scores.get(metric, value)
            if not (math.isnan(value) and math.isnan(other)) and not math.isclose(value, other, abs_tol=1e-9):
                return f"its {corruption} {metric} is {value:.6g}, but its outputs give {other:.6g}"
    return None


def problem_of(root: Path, name: str, keys: set[str], networks_planned: set[tuple[str, int]]) -> str | None:
    """Why the file ``name`` of the store at ``root`` may not be sealed, or None."""
    if name.startswith(f"{manifest.OTHER_CPUS}/"):  # a record of one of its cells from another CPU kind
        folder = root / manifest.OTHER_CPUS
        why = file_problem(folder, root / name)
        if why is not None:
            return why
        record = read_record(root / name)
        assert not isinstance(record, str)
        if record.key in keys:
            return None
        return "it is not a cell of the benchmark's designs: only their cells are sealed"
    if "/" in name:  # a network diagnostic
        from stamplib.evidence import networks
        from stamplib.models import checkpoints

        try:
            found = networks.read_one(root / name)
        except ValueError as err:
            return str(err)
        if (found.dataset, found.network) not in networks_planned:
            return f"network {found.network} of {found.dataset} is none of the benchmark's designs' networks"
        from stamplib import data

        expected = checkpoints.network_name(data.dataset(found.dataset).checkpoint, found.network)
        if found.checkpoint != expected or name != f"{networks.FOLDER}/{expected}.json":
            return (f"it names checkpoint {found.checkpoint}, but network {found.network} of {found.dataset} "
                    f"is {expected}")
        return None
    why = file_problem(root, root / name)  # whole, consistent (the mean recomputed from its rows), named for its cell
    if why is not None:
        return why
    record = read_record(root / name)
    assert not isinstance(record, str)
    if record.key not in keys:
        return (f"it is not a cell of the benchmark's designs (profile {record.spec.profile}, {record.spec.dataset}, "
                f"seed {record.spec.seed}, network {record.spec.network}): only their cells are sealed")
    return _rows_problem(root, name)


def seal(root: Path, check_only: bool, benchmark: object | None = None,
         report: Callable[[str], None] = print) -> list[str]:
    """Add the unlisted files of the store at ``root`` that belong to its benchmark to its
    manifest (unless ``check_only``); returns one line per problem left, after a summary line
    given to ``report``."""
    if benchmark is None:
        from stamplib.evidence import benchmarks

        benchmark = benchmarks.for_store(root)
        if benchmark is None:
            raise ValueError(f"{root} is no committed benchmark's store (" + ", ".join(
                str(b.store) for b in benchmarks.BENCHMARKS) + "): only their records are sealed")
    keys, pairs = planned_keys(benchmark), planned_networks(benchmark)
    problems: list[str] = []
    with manifest.locked(root):
        entries = manifest.read(root) if manifest.is_sealed(root) else {}
        present = {name: manifest.file_digest(root / name) for name in manifest.guarded_names(root)}
        added = {}
        for difference in manifest.differences(entries, present):
            if difference.kind == "absent":
                problems.append(f"{difference.name}: listed but absent; restore it "
                                f"(git checkout -- {root / difference.name})")
            elif difference.kind == "changed":
                problems.append(f"{difference.name}: differs from its listed digest (edited); restore it "
                                f"(git checkout -- {root / difference.name})")
            elif (why := problem_of(root, difference.name, keys, pairs)) is not None:
                problems.append(f"{difference.name}: not sealed: {why}")
            else:
                added[difference.name] = present[difference.name]
        if added and not check_only:
            manifest.write(root, {**entries, **added})
    verb = "unlisted, would be added" if check_only else "added"
    report(f"{root}: {len(entries)} listed, {len(added)} {verb}, {len(problems)} problem(s)")
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
        except ValueError as err:  # a damaged manifest (EvidenceError), or no committed benchmark's store
            print(f"error: {err}", file=sys.stderr)
            return 2
        for line in lines:
            print(f"  {line}")
            problems += 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
