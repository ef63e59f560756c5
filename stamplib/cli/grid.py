"""``grid`` and ``tune``: many cells at once, here, in local processes or on SLURM
(docs/cluster.md); ``tune`` selects a method's hyperparameters by the paper's protocol
(docs/tuning.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from stamplib import flags
from stamplib.cli import common
from stamplib.cli.cells import adapted_dataset


def grid_parser(sub: Any) -> None:
    p = sub.add_parser(
        "grid", help="compute every cell of notebooks: here, in local processes, or on SLURM (docs/cluster.md)"
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--notebook", nargs="+", default=[], metavar="NAME", help="names or prefixes, e.g. 02 06")
    which.add_argument("--all", action="store_true", help="every notebook with cells (docs/notebooks.md)")
    flags.add(p, profile=True, data_root=True, device=True, results=True)
    flags.add_pairs(p, "--param", "a notebook parameter, e.g. methods=source,stamp or seeds=0,1,2")
    common.executor_flags(
        p,
        executor_default="local",
        executor_help=None,
        jobs_help="worker processes or parallel jobs (0: one per GPU, else per core)",
    )
    p.add_argument(
        "--cells-per-job",
        type=flags.read_positive("--cells-per-job", least=0),
        default=0,
        help="cells per job (0: sized from the profile)",
    )
    p.add_argument("--dry-run", action="store_true", help="print cell counts and status, submit nothing")
    p.add_argument("--wait", action="store_true", help="submitit: wait for the jobs with a progress bar")
    p.add_argument("--retry-failed", action="store_true", help="submit only the cells whose last job failed")
    common.into_committed_flag(p)
    p.set_defaults(func=cmd_grid)


def _computes_itself(name: str) -> str:
    """The notebook that ``name`` names, if no experiment is registered under it and the notebook
    declares that it computes what it shows itself (01, 11); "" where an experiment is registered
    under it or no notebook file matches (the registry decides). A notebook file that neither
    has an experiment nor declares so is one ValueError naming the entry-point group."""
    from stamplib.experiments import registry
    from stamplib.notebook_runner import COMPUTES_ITSELF, computes_itself, discover

    if any(nb == name or nb.startswith(name) for nb in registry.registered()):
        return ""
    try:
        found = discover([name])
    except ValueError:
        return ""
    orphans = [nb.stem for nb in found if not computes_itself(nb)]
    if not orphans:
        return ", ".join(nb.stem for nb in found)
    raise ValueError(
        f"notebook {', '.join(orphans)} has no registered experiment: register one "
        f"(stamplib.experiments.registry.register) in a module that an installed package names "
        f"under the entry-point group {registry.ENTRY_POINT_GROUP!r} (docs/architecture.md), or "
        f"declare in the notebook's metadata that it computes what it shows itself "
        f"(stamplib.{COMPUTES_ITSELF}: true)"
    )


def cmd_grid(args: argparse.Namespace) -> int:
    """Every cell of the chosen notebooks: status per notebook, then compute or submit the missing."""
    from stamplib.evaluation.store import ResultsStore
    from stamplib.experiments import grid, registry

    context = common.context(args, writes=True)
    store = ResultsStore(context.results)
    chosen: list[registry.Experiment] = list(registry.registered().values()) if args.all else []
    for name in [] if args.all else args.notebook:
        if itself := _computes_itself(name):
            print(f"{itself}: no grid cells (the notebook computes what it shows itself)")
        else:
            chosen += [e for e in registry.resolve_notebooks([name]) if e not in chosen]
    if not chosen:
        print("nothing to compute")
        return 0
    params = flags.pairs(args.param)  # read as the notebooks read --param; the plans parse them
    registry.check_parameter_names(chosen, params, flags=("profile", "data_root"))
    params.update(profile=args.profile, data_root=args.data_root or "")
    per_notebook = registry.cells_by_notebook(chosen, **params)
    distinct = registry.distinct(s for specs in per_notebook.values() for s in specs)
    print(f"profile {args.profile}, results in {store.root}")
    print("\n".join(grid.status_lines(per_notebook, store)))
    options = common.executor_options(args)
    if args.dry_run:
        if line := grid.dry_run_line(distinct, store, options):
            print(line)
        return 0
    try:
        report = grid.run_grid(
            distinct, context, options, wait=args.wait, progress=True, retry_failed=args.retry_failed
        )
    except KeyboardInterrupt as stop:
        return common.interrupted(
            stop, common.cells_kept(context.results, distinct), submitted=options.executor != "local"
        )
    print("\n".join(report.summary_lines(store)))
    return 0 if report.pending else (1 if report.failed or report.missing else 0)


_TUNE_EPILOG = (
    "grid syntax, presets and output files: docs/tuning.md\n"
    "e.g. python -m stamplib tune stamp --grid lr=0.01,0.05,0.1 --grid alpha=0.25,0.3,0.4"
)


def tune_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tune",
        help="select hyperparameters by the paper's protocol (App. A; docs/tuning.md)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_TUNE_EPILOG,
    )
    p.add_argument("method", nargs="?", default=None, help="a registered method name, e.g. stamp")
    p.add_argument("--dataset", default="cifar10_builtin", type=adapted_dataset)
    p.add_argument("--outlier-set", default="noise", help="outlier set (the protocol uses noise)")
    common.old_flag(p, "--outliers", "--outlier-set")
    p.add_argument("--corruption", default="gaussian_noise", help="the selection corruption (the protocol: the first)")
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="NAME=V1,V2,...",
        type=flags.read_grid_dimension,
        help="one dimension of the grid, e.g. --grid lr=0.01,0.05,0.1 (repeat for more)",
    )
    p.add_argument("--preset", default=None, help="a named grid (see --list-presets)")
    p.add_argument("--list-presets", action="store_true", help="list the presets and exit")
    p.add_argument("--criterion", default="h", help="the metric to select by: h, acc, auroc, fpr95 (lowest wins), ...")
    p.add_argument("--hyperparameter-set", default="", metavar="NAME",
                   help="the methods' hyperparameter set, one of the paper's five, e.g. imagenet_c (default: the "
                        "data set's own)")
    common.old_flag(p, "--setting", "--hyperparameter-set")
    p.add_argument("--seed", type=flags.read_seed, default=0)
    flags.add(p, profile=True, data_root=True, device=True, results=True)
    p.add_argument("--out", default=None, help="folder of the table and heatmap files (default: figures/tune)")
    common.into_committed_flag(p)
    common.executor_flags(
        p,
        executor_default=None,
        executor_help="compute the cells as grid does (default: here)",
        jobs_help="with --executor: worker processes or parallel jobs (0: one per core or GPU)",
    )
    p.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    """Select a method's hyperparameters by the paper's protocol (App. A): its grid on the first
    corruption with the outliers mixed in, best cell by the criterion."""
    from stamplib.evaluation.store import ResultsStore
    from stamplib.experiments import tune
    from stamplib.report import tuning

    if args.list_presets:
        print("\n".join(tune.preset_lines()))
        return 0
    if not args.method:
        raise ValueError(
            "name the METHOD to tune, e.g. python -m stamplib tune stamp --dataset cifar10_builtin --outlier-set noise"
        )
    context = common.context(args, writes=True)
    job = tune.make_job(
        args.method,
        grid_items=args.grid,
        preset=args.preset,
        dataset=args.dataset,
        outlier_set=args.outlier_set,
        corruption=args.corruption,
        profile=args.profile,
        seed=args.seed,
        hyperparameter_set=args.hyperparameter_set,
        criterion=args.criterion,
    )
    store = ResultsStore(context.results)
    print(tune.status_line(job, store))
    try:
        tune.compute(job, context, common.executor_options(args) if args.executor is not None else None, progress=True)
    except KeyboardInterrupt as stop:
        return common.interrupted(stop, common.cells_kept(context.results, job.specs()))
    result = tune.select(job, store)
    print(tuning.format_result(result))
    for path in tuning.write_outputs(result, Path(args.out) if args.out else context.figures / "tune"):
        print(f"wrote {path}")
    return 1 if result.missing else 0
