"""``claims``: the paper's claims (the ledger) on a benchmark (docs/claims.md). ``render`` writes
every generated page, figure, table and README block of the checkout; ``status`` and ``compute``
are the committed benchmarks' cells (the reference run's notebook cells too, ``--cells``);
``diagnose`` their networks' Noise diagnostics; ``judge`` a store of one's own."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stamplib import flags, paths
from stamplib.cli import common

if TYPE_CHECKING:  # the evidence package imports torch; the command line imports it only when a command needs it
    from stamplib.evaluation.spec import RunSpec
    from stamplib.evaluation.store import ResultsStore
    from stamplib.evidence import benchmarks


def claims_parser(sub: Any) -> None:
    p = sub.add_parser("claims", help="the paper's claims: render the generated pages, compute, status, judge "
                                      "(docs/claims.md)")
    p.add_argument("action", choices=["render", "status", "compute", "diagnose", "judge"],
                   help="render: every generated page and table; status/compute/diagnose: a committed benchmark's "
                        "cells; judge: a store of your own")
    p.add_argument("--benchmark", default="", choices=["", "builtin", "reference", "full"],
                   help="a committed benchmark (builtin, reference), or full for judge")
    p.add_argument("--design", default="", help="compute/diagnose: the design whose cells to compute (claims status)")
    p.add_argument("--cells", default="", choices=["", "core", "extras", "all", "stress", "seeds"],
                   help="compute --benchmark reference: the reference notebooks' cells instead of a design "
                        "(docs/real_data.md)")
    p.add_argument("--replicates", default="", type=flags.read_number_list("--replicates"),
                   help="compute/diagnose: which networks or stream seeds of the design (default: all)")
    p.add_argument("--seeds", default="", type=flags.read_number_list("--seeds"),
                   help="judge --benchmark full: the seeds that decide (default 0-2)")
    p.add_argument("--methods", default=(), type=_method_list,
                   help="compute --design: only these methods' cells (comma-separated), in the order named")
    p.add_argument("--jobs", type=common.worker_count(), default=1, help="compute: local worker processes")
    p.add_argument("--write", default=None, metavar="PAGE", help="judge: also write the verdicts as a page")
    common.into_committed_flag(p)
    flags.add(p, results="judge: the store to judge; else the benchmark's committed store", device=True,
              data_root="default: shared/data beside the checkout")
    p.set_defaults(func=cmd_claims)


def _method_list(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"name at least one method, comma-separated (e.g. eata,sar), got {text!r}")
    return names


def cmd_claims(args: argparse.Namespace) -> int:
    """The ledger's claims: render the committed pages, report status, compute cells, judge a store."""
    from stamplib.evidence import pages

    if args.action == "render":
        # render_all reads both committed stores whole before writing: a record that differs from
        # its store's manifest is refused there (EvidenceError, one line, exit 2) and nothing is written
        for path in pages.render_all(paths.repo_root() or Path.cwd()):
            print(f"wrote {path}")
        return 0
    if args.cells and (args.action not in ("compute", "status") or args.benchmark != "reference" or args.design):
        raise ValueError("--cells names the reference notebooks' cells: give it to claims compute or status "
                         "--benchmark reference, without --design")
    if args.cells and args.action == "compute":
        return compute_reference_cells(args, args.cells)
    if args.methods and (args.action != "compute" or not args.design):
        raise ValueError("--methods chooses the cells claims compute computes: give it with --design")
    if args.action in ("compute", "status", "diagnose"):
        return _claims_compute(args)
    return _claims_judge(args)


def _claims_judge(args: argparse.Namespace) -> int:
    """``claims judge``: every claim's verdict on a store."""
    from stamplib.evidence import benchmarks, judge, pages

    if not args.results:
        raise ValueError("claims judge needs the store to judge: give --results DIR (e.g. --results results/reference)")
    store = Path(args.results)
    if not store.is_dir() or not any(store.glob("*.json")):
        raise ValueError(f"no results store at {store} (no record there): give --results the folder of a store's "
                         "JSON records, e.g. results/reference")
    if args.benchmark in ("builtin", "reference"):
        benchmark = dataclasses.replace(benchmarks.by_name(args.benchmark), store=store)
    elif not args.benchmark and (committed := benchmarks.for_store(store)) is not None:
        benchmark = dataclasses.replace(committed, store=store)
    else:
        benchmark = benchmarks.full_benchmark(benchmarks.parse_numbers(args.seeds or "0-2"), store)
    snapshot = pages.RecordsSnapshot(store)
    verdicts = judge.judge_benchmark(benchmark, snapshot)
    for verdict in verdicts:
        print(f"{verdict.claim.key}: {verdict.label} — {judge.ours_text(verdict)}")
    if not any(verdict.margins for verdict in verdicts):
        print(f"no claim could be judged: {store} holds none of the cells of benchmark {benchmark.name}'s designs; "
              "name the benchmark its records belong to with --benchmark (builtin, reference, full)", file=sys.stderr)
    if args.write:
        page = pages.verdict_page(benchmark, snapshot)
        paths.atomic_write_bytes(Path(args.write), (page.text + "\n").encode())
        print(f"wrote {args.write}")
    return 0


def _claims_compute(args: argparse.Namespace) -> int:
    """``claims status``, ``claims compute`` and ``claims diagnose`` on a committed benchmark's store."""
    from stamplib.evaluation.store import ResultsStore
    from stamplib.evidence import benchmarks
    from stamplib.experiments import grid

    if args.benchmark == "full" or (args.action in ("compute", "diagnose") and not args.benchmark):
        raise ValueError(f"claims {args.action}: give --benchmark builtin or --benchmark reference (the committed "
                         "benchmarks; a store of your own is judged with claims judge --results DIR)")
    if args.action == "status":
        for benchmark in [benchmarks.by_name(args.benchmark)] if args.benchmark else benchmarks.BENCHMARKS:
            root = Path(args.results) if args.results else (paths.repo_root() or Path.cwd()) / benchmark.store
            store = ResultsStore(root)
            for design in benchmark.designs:
                state = store.status(benchmarks.ledger_cells(design))
                print(f"{benchmark.name}/{design.name} ({design.title}; {design.replicates_text()}, "
                      f"{design.corruptions_text()}): {len(state.done)} of {len(state.done) + len(state.missing)} "
                      f"cells{_kept_text(store, state.missing)}")
            if benchmark.name == "reference" and args.cells:
                from stamplib.experiments import reference

                print("\n".join(reference.status_lines(store)))
        return 0
    benchmark = benchmarks.by_name(args.benchmark)
    if not args.design:
        names = ", ".join(d.name for d in benchmark.designs)
        raise ValueError(f"claims {args.action}: name the design with --design ({names})"
                         + ("; or the reference notebooks' cells with "
                            "--cells" if benchmark.name == "reference" else ""))
    design = benchmark.design(args.design)
    chosen = benchmarks.chosen_replicates(design, args.replicates) if args.replicates else design.replicates
    context = common.context(
        args, (paths.repo_root() or Path.cwd()) / benchmark.store, paths.shared_data(), writes=True, evidence=True
    )
    if args.action == "diagnose":
        if not design.varies_networks:
            raise ValueError(
                f"claims diagnose: {benchmark.name}/{design.name} holds one network; name a design of "
                "several networks (networks)"
            )
        common.refuse_absent_networks(benchmarks.networks_of(design, chosen), context.results)
        _write_diagnostics(design, chosen, context, args.command_line)
        return 0
    cells = benchmarks.evidence_cells(design, ResultsStore(context.results), context.device, chosen)
    if args.methods:
        cells = benchmarks.of_methods(cells, args.methods, design)
    # every network the missing cells or the diagnostics need is here, before any work
    common.refuse_absent_networks(
        [(s.dataset, s.network) for s in cells]
        + (benchmarks.networks_of(design, chosen) if design.varies_networks else []),
        context.results,
    )
    try:
        report = grid.run_grid(cells, context, grid.ExecutorOptions(jobs=common.jobs(args.jobs)), keep_order=True)
    except KeyboardInterrupt as stop:
        return common.interrupted(stop, common.cells_kept(context.results, cells))
    print(
        f"{benchmark.name}/{design.name} into {context.results}: {len(report.done)} done, {len(report.missing)} "
        f"missing, {len(report.failed)} failed jobs, of {len(cells)} cells"
    )
    if design.varies_networks:
        _write_diagnostics(design, chosen, context, args.command_line)
    return 0 if report.ok else 1


def _kept_text(store: ResultsStore, unfinished: Sequence[RunSpec]) -> str:
    """How far the unfinished cells got: their finished corruptions that the store keeps."""
    kept = {spec.key(): len(store.kept_corruptions(spec)) for spec in unfinished}
    started = [n for n in kept.values() if n]
    if not started:
        return ""
    total = sum(len(spec.corruptions) for spec in unfinished if kept[spec.key()])
    return (f"; {len(started)} unfinished cell(s) have {sum(started)} of their {total} corruptions kept "
            "(claims compute resumes there)")


def _write_diagnostics(
    design: benchmarks.Design, chosen: Sequence[benchmarks.Replicate], context: paths.RunContext, command_line: str
) -> None:
    """The Noise diagnostic of every network of ``chosen`` (``stamplib.evidence.networks``), into the store."""
    from stamplib.evidence import benchmarks, networks

    for dataset, network in benchmarks.networks_of(design, chosen):
        diagnostic = networks.diagnose(dataset, network, context.data_root)
        written = networks.put(context.results, diagnostic, command_line)
        where = networks.path(context.results, diagnostic.checkpoint)
        print(f"wrote {where}" if written else f"unchanged {where} (its numbers are the same; not rewritten)")


def compute_reference_cells(args: argparse.Namespace, group: str) -> int:
    """The reference notebooks' cells of ``group`` (:func:`stamplib.experiments.reference.cells_of`)
    into the reference store: the missing ones, in their order."""
    from stamplib.evaluation.store import ResultsStore
    from stamplib.experiments import reference

    context = common.context(args, reference.reference_dir(), reference.default_data_root(), writes=True, evidence=True)
    todo = reference.cells_of(group)
    try:
        report = reference.compute(todo, context, jobs=common.jobs(args.jobs))
    except KeyboardInterrupt as stop:
        return common.interrupted(stop, common.cells_kept(context.results, todo))
    print(reference.compute_line(report, ResultsStore(context.results)))
    return 0 if report.ok else 1
