"""The maintainer's commands, out of the user's listing: ``maintain build-benchmark`` rebuilds the
built-in CIFAR-10 benchmark's package data, its compact source networks included
(docs/builtin_benchmark.md). ``benchmark`` is the user's door to that benchmark's figure: it draws
a quick run's headline figure from a results store (``benchmark build``: the old spelling of
``maintain build-benchmark``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from stamplib import flags, paths
from stamplib.cli import common


def _build_flags(p: Any) -> None:
    flags.add(p, data_root="folder holding cifar10-jpeg.tar.gz or cifar10-jpeg/")
    p.add_argument("--checkpoints", default=None,
                   help="folder of the compact networks (default: where train-source writes)")
    p.add_argument("--out", default=None, help="default: the package's data/builtin_cifar10 folder")


def maintain_parser(sub: Any) -> None:
    p = sub.add_parser("maintain", help="maintainers: rebuild package data (docs/builtin_benchmark.md)")
    actions = p.add_subparsers(dest="action", required=True)
    _build_flags(actions.add_parser("build-benchmark", help="rebuild the built-in CIFAR-10 benchmark's package data"))
    p.set_defaults(func=cmd_maintain)


def cmd_maintain(args: argparse.Namespace) -> int:
    """Rebuild the built-in CIFAR-10 benchmark's package data from the photographs and networks."""
    from stamplib.data import builtin_cifar10
    from stamplib.data.catalog import cifar10_jpeg_folder

    context = common.context(args)
    photographs = cifar10_jpeg_folder(context.data_root, "test").parent
    out = Path(args.out) if args.out else builtin_cifar10.FOLDER
    checkpoint_dir = Path(args.checkpoints) if args.checkpoints else paths.checkpoints_dir()
    for path in builtin_cifar10.build(photographs, checkpoint_dir, out=out):
        print(f"{path.stat().st_size:>10,} B  {path}")
    return 0


def benchmark_parser(sub: Any) -> None:
    p = sub.add_parser("benchmark", help="draw the built-in benchmark's headline figure from a quick run's records")
    p.add_argument("action", choices=["render", "build"], help="render: the figure, into build/figures")
    flags.add(p, results="results folder of the quick run (default: results/)")
    _build_flags(p)
    p.set_defaults(func=cmd_benchmark)


def cmd_benchmark(args: argparse.Namespace) -> int:
    """Draw the quick run's headline figure from the results store, beside the reference run."""
    if args.action == "build":
        common.renamed("benchmark build", "maintain build-benchmark")
        return cmd_maintain(args)
    from stamplib.evaluation.store import ResultsStore
    from stamplib.evidence import benchmarks, pages, tables
    from stamplib.experiments import reference

    context = common.context(args)
    stores = ResultsStore(context.results), ResultsStore(reference.reference_dir())
    for store in stores:  # committed evidence that differs from its manifest: refused before drawing
        store.verify()
    records = [store.records_by_key() for store in stores]
    ours, theirs = (tables.setting_tables(b, r) for b, r in zip(benchmarks.BENCHMARKS, records))
    # the README's figure of this name is claims render's, from the committed records: this one,
    # from whatever store was given, goes to build/figures there
    folder = pages.figure_folder(context.figures, benchmarks.BUILTIN.figure)
    for path in tables.write_figure(benchmarks.BUILTIN, ours, folder, theirs, benchmarks.REFERENCE.title):
        print(f"wrote {path}")
    if folder != context.figures:
        print(f"({context.figures / benchmarks.BUILTIN.figure}.png, the README's, is drawn from the committed records "
              "by python -m stamplib claims render)")
    if not any(r.spec.profile == "quick" and r.spec.dataset.startswith("cifar10_builtin") for r in records[0].values()):
        print(f"note: {context.results} holds no quick-profile record of the built-in benchmark yet, so the figure's "
              "panels are empty: ./run_all.sh computes them", file=sys.stderr)
    return 0
