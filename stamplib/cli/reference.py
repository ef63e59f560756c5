"""``reference``: what only the committed reference run on real images has (docs/real_data.md):
``recompute`` its cells into a scratch store and compare them with the committed records, and
``render`` its notebooks from those records. Its cells are computed and counted by ``claims
compute/status --benchmark reference``; ``reference compute/status`` still lead there."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from stamplib import flags
from stamplib.cli import claims, common


def reference_parser(sub: Any) -> None:
    p = sub.add_parser("reference", help="the reference run on real images: recompute and compare, render its "
                                         "notebooks (docs/real_data.md)")
    p.add_argument("action", choices=["recompute", "render", "compute", "status"],
                   help="recompute: every cell again, compared with the committed records; render: its notebooks "
                        "from the committed records")
    p.add_argument("--cells", choices=["core", "extras", "all", "stress", "seeds"], default="core",
                   help="recompute: which cells (docs/real_data.md)")
    p.add_argument("--extras", action="store_true", help=argparse.SUPPRESS)  # the old spelling of --cells all
    flags.add(p, device=True, data_root="default: shared/data beside the checkout",
              results="reference store (default: results/reference)")
    p.add_argument("--scratch", default="results/recompute", help="recompute: where the new records go")
    common.into_committed_flag(p)
    p.add_argument("--jobs", type=common.worker_count(), default=1, help="worker processes, or notebooks at once")
    p.add_argument("--methods", default="", help="recompute: only these methods' cells (or 'deterministic')")
    p.add_argument("--settings", default="", help="recompute: only these outlier settings (a, b, c)")
    p.set_defaults(func=cmd_reference)


def cmd_reference(args: argparse.Namespace) -> int:
    """The committed reference run on real images: recompute, render (compute and status: the
    old spellings of claims compute/status --benchmark reference)."""
    from stamplib.evaluation.store import ResultsStore
    from stamplib.experiments import reference

    group = args.cells if not args.extras or args.cells != "core" else "all"
    if args.action in ("compute", "status"):
        new = "claims status --benchmark reference" if args.action == "status" else \
            f"claims compute --benchmark reference --cells {group}"
        common.renamed(f"reference {args.action}", new)
        args.benchmark, args.design, args.replicates = "reference", "", ""
        args.cells = group if args.action == "compute" else "all"
        return claims.cmd_claims(args)
    context = common.context(args, reference.reference_dir(), reference.default_data_root())
    store = ResultsStore(context.results)
    if args.action == "render":
        from stamplib.evidence import benchmarks, pages, tables
        from stamplib.notebook_runner import run_notebooks

        store.verify()  # committed evidence that differs from its manifest: refused before anything is written
        # the page's headline figure, from the same records; the README's of this name is claims render's
        # (both benchmarks, from the committed records), so this one goes to build/figures there
        folder = pages.figure_folder(context.figures, benchmarks.REFERENCE.figure)
        tables.write_figure(benchmarks.REFERENCE, tables.setting_tables(benchmarks.REFERENCE, store.records_by_key()),
                            folder)
        print(reference.render_line(store, reference.specs()))
        with context.exported():  # the kernels read this store only
            return run_notebooks(profile=reference.PROFILE, only=reference.NOTEBOOKS, data_root=str(context.data_root),
                                 extra={"compute_missing": False}, jobs=common.jobs(args.jobs))
    flags.writable(Path(args.scratch), "--scratch")  # tried before any cell
    chosen = reference.select_settings(reference.select_methods(store.status(reference.cells_of(group)).done,
                                                                args.methods), args.settings)
    try:
        result = reference.recompute(chosen, context, args.scratch, jobs=common.jobs(args.jobs))
    except KeyboardInterrupt as stop:
        return common.interrupted(stop, common.cells_kept(Path(args.scratch), chosen))
    print("\n".join(reference.comparison_lines(result, context.device)))
    return 1 if result.differences else 0
