"""Command line: ``python -m stamplib {run,doctor,notebooks,methods,train-source,benchmark,grid,tune,…}``.

A face that parses and dispatches: each command has a parser builder (``_<command>_parser``)
and a function that builds the run context from its flags (:meth:`stamplib.paths.RunContext.build`,
which checks it: a bad device or data root is one line and exit code 2 before anything is
looked up), makes one call into the layers and prints the lines they return. The work, and
how its results read, live in ``stamplib.evaluation`` (runs), ``stamplib.experiments`` (plans,
grids, tuning, the reference run), ``stamplib.data`` and ``stamplib.models``."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stamplib import flags, paths, processes
from stamplib.extras import MissingExtra

if TYPE_CHECKING:  # the evidence package imports torch; the command line imports it only when a command needs it
    from stamplib.evidence import benchmarks


def _context(args: argparse.Namespace, results: str | Path | None = None,
             default_data_root: Path | None = None, writes: bool = False, evidence: bool = False) -> paths.RunContext:
    """The run context of a command's shared flags (:mod:`stamplib.flags`: ``--data-root``,
    ``--results``, ``--device``; a command without one of them gets the default, or the
    command's own), naming the command for its records; a dry run's is not checked (it computes
    nothing). ``writes``: the command stores records, so its results folder is tried now, before
    anything is computed, and a committed store is written only as :func:`_into_committed` allows
    (``evidence``: computing into ``results``, the command's own committed store, is its purpose)."""
    dry_run = getattr(args, "dry_run", False)
    context = paths.RunContext.build(getattr(args, "data_root", None), getattr(args, "results", None) or results,
                                     device=getattr(args, "device", "cpu"), command=args.command_line,
                                     default_data_root=default_data_root, check=not dry_run)
    if writes and not dry_run:
        flags.writable(context.results)
        own = evidence and results is not None and context.results.resolve() == Path(results).resolve()
        _into_committed(args, context.results, own)
    return context


def _into_committed(args: argparse.Namespace, results: Path, own: bool) -> None:
    """A command writes into a committed evidence store (``results/builtin_benchmark``,
    ``results/reference``: a manifest, or files git has committed) only when its command line says
    so: the command's own store (``claims compute``, ``reference compute``: ``own``) or
    ``--into-committed``; then one line says so. Any other is refused, before anything is computed."""
    from stamplib.evaluation.store import ResultsStore

    store = ResultsStore(results)
    if not store.sealed:
        return
    if not own and not getattr(args, "into_committed", False):
        raise ValueError(f"{results} is committed evidence (its records are listed in its MANIFEST.sha256 and "
                         "committed to git): this command would write into it; give another --results folder, or "
                         "say so with --into-committed")
    print(f"note: writing into the committed evidence store {results}: each record computed gets its entry in its "
          "MANIFEST.sha256 (git status shows what changed)", file=sys.stderr)


def _into_committed_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--into-committed", action="store_true",
                        help="write into a committed evidence store (results/builtin_benchmark, results/reference) "
                             "given as --results: each record gets its manifest entry; without it such a store is "
                             "refused")


def _worker_count(allow_auto: bool = False) -> Any:
    """``--jobs``'s reading: a whole number of worker processes, at least 1 (``allow_auto``: or 0,
    one per GPU with CUDA, else one per CPU core)."""
    least = 0 if allow_auto else 1

    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(
                f"--jobs must be a whole number of at least 1{' (or 0: one per GPU, else per core)' if allow_auto else ''}"
                f", got {text!r}")
        return value

    return read


def _jobs(requested: int, flag: str = "--jobs") -> int:
    """``requested`` processes held to one per CPU core of this machine, saying so in a line when
    that cuts them (:func:`stamplib.processes.capped_jobs`)."""
    jobs, line = processes.capped_jobs(requested, flag)
    if line:
        print(line, file=sys.stderr)
    return jobs


def _executor_options(args: argparse.Namespace) -> Any:
    """The grid's executor options from the flags ``grid`` and ``tune`` share (jobs 0: one per
    GPU with CUDA, else one per CPU core); the processes of this machine (executor local and
    submitit-local) held to one per core."""
    from stamplib.experiments import grid

    executor = args.executor or "local"
    jobs = args.jobs if args.jobs > 0 else grid.default_jobs(args.device)
    return grid.ExecutorOptions(
        executor=executor, jobs=_jobs(jobs) if executor != "submitit" else jobs,
        cells_per_job=getattr(args, "cells_per_job", 0) or None, partition=args.partition,
        gpus_per_job=args.gpus_per_job, cpus_per_task=args.cpus_per_task, time_min=args.time_min,
        array_parallelism=args.array_parallelism, mem_gb=args.mem_gb)


def _cells_kept(results: Path, cells: Any) -> str:
    """How many of ``cells`` (RunSpecs) the store at ``results`` holds, for the line of an
    interrupted command; counted from the files alone, so that it is said at once."""
    from stamplib.evaluation.store import ResultsStore

    store = ResultsStore(results)
    unique = {s.key(): s for s in cells}.values()
    return f"{sum(store.path(s).is_file() for s in unique)} of {len(unique)} cells done and kept"


def _interrupted(stop: KeyboardInterrupt, kept: str = "every finished cell is kept", submitted: bool = False) -> int:
    """Print the one line of a command that a signal stopped (what it ``kept``) and return its exit
    code, 128 + the signal: 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP)."""
    print("\n" + processes.interrupted_line(kept + ("; the submitted jobs keep running" if submitted else "")),
          file=sys.stderr)
    return processes.exit_code(stop)


def _stream_flags(parser: argparse.ArgumentParser) -> None:
    """How the stream is made and fed: the flags of :class:`stamplib.data.StreamSpec`'s fields
    (a flag left out keeps the field's default), and ``--stream NAME=VALUE`` for any field."""
    p = parser.add_argument_group("the stream (stamplib.data.StreamSpec)")
    p.add_argument("--continual", action="store_true",
                   help="no reset between the corruptions, which run in the order given")
    p.add_argument("--mixed-domains", action="store_true",
                   help="all corruptions in one shuffled stream, no reset (metrics per corruption and in all)")
    p.add_argument("--gradual", action="store_true",
                   help="CoTTA's gradual setting: per corruption, severity 1 up to --severity and back to 1, "
                        "no reset")
    p.add_argument("--dirichlet", type=float, default=None,
                   help="non-i.i.d. label order with Dirichlet concentration δ (e.g. 0.1; 0 = i.i.d.)")
    p.add_argument("--outlier-burst", type=int, default=None,
                   help="outliers arrive in runs of this length (0 = spread uniformly)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="samples per batch (the paper's 64; down to 1, where the method supports it)")
    p.add_argument("--label-shift", default=None, metavar="SHIFT",
                   help="'imbalance:R' long-tailed known classes (largest class over the smallest = R), 'sorted' "
                        "class-by-class order, or 'imbalance:R+sorted'")
    p.add_argument("--realistic", action="store_true",
                   help="the realistic online protocol (Alfarra et al. 2024): the stream does not wait, so the "
                        "method adapts on every C(g)-th batch only; C(g) is measured in the run")
    p.add_argument("--relative-speed", type=int, default=None, metavar="C",
                   help="C(g) of the realistic protocol (implies --realistic): e.g. 17 fixes it, so that the record "
                        "does not depend on the machine; 0 measures it in the run, as --realistic alone does")
    flags.add_pairs(p, "--stream", "any option of the stream by its field name, e.g. --stream schedule=continual")


def _stream_of(args: argparse.Namespace) -> Any:
    """The StreamSpec of the stream flags (a flag named after a field sets it; the schedule
    comes from its three switches) and the ``--stream`` items; one option given both ways is
    an error."""
    from stamplib.data import SCHEDULE_FLAGS, StreamSpec

    switched = StreamSpec.from_key_fields(**{flag: True for flag in SCHEDULE_FLAGS.values() if getattr(args, flag)})
    given = {name: value for name in StreamSpec.key_names() - {"schedule", "realistic", *SCHEDULE_FLAGS.values()}
             if (value := getattr(args, name, None)) is not None}
    if switched.schedule != "episodic":
        given["schedule"] = switched.schedule
    named = flags.pairs(args.stream)
    # A relative speed given at all is a run of the realistic protocol, 0 (C(g) measured in the
    # run) included: 0 is a value here, not the flag left out.
    speed_given = args.relative_speed is not None or "relative_speed" in named
    if args.realistic or (speed_given and "realistic" not in named):
        given["realistic"] = True
    if twice := sorted(set(named) & set(given)):
        raise ValueError(f"stream option(s) {twice} given twice: by a flag and by --stream")
    return StreamSpec.parse({**given, **named})


def _adapted_dataset(text: str) -> str:
    """``--dataset``'s reading where a source network is adapted (``run``, ``tune``): a data set
    read from files (``npz:``, ``folder:``) has no source network of its own, so it is refused here,
    in one line that says what works, rather than after a hint these commands cannot follow."""
    from stamplib import validation
    from stamplib.data.lookup import DATASETS, parse_scheme

    if parse_scheme(text) is not None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is a data set read from files, which has no source network to adapt: register it with "
            "its checkpoint (docs/architecture.md, Adding a data set) and give its name, or give the files as "
            "--outliers")
    try:
        return validation.check_choice("dataset", text, DATASETS)  # the registered ones only
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _run_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="compute one RunSpec and store its record")
    p.add_argument("--method", required=True)
    p.add_argument("--dataset", default="cifar10_builtin", type=_adapted_dataset,
                   help="ID data set (default: the built-in CIFAR-10 photographs; digits is the smoke one)")
    p.add_argument("--outliers", default="noise", help="outlier set, or 'none' for closed-set")
    p.add_argument("--corruptions", default="gaussian_noise", help="comma-separated names")
    p.add_argument("--severity", type=int, default=5)
    p.add_argument("--ratio", type=float, default=0.2, help="outliers / (ID + outliers)")
    p.add_argument("--seed", type=flags.read_seed, default=0)
    flags.add(p, profile=True, data_root=True, device=True, results=True)
    flags.add_pairs(p, "--set", "hyperparameter override, typed as its config field says (e.g. lr=0.001, sam=false)")
    _stream_flags(p)
    p.add_argument("--force", action="store_true", help="recompute even if stored")
    _into_committed_flag(p)
    p.add_argument("--json", action="store_true", help="also print the whole record")
    p.add_argument("--deterministic", action="store_true",
                   help="deterministic GPU kernels (bitwise-reproducible on CUDA, slower; CPU runs already are)")
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from stamplib import RunSpec, run
    from stamplib.evaluation.runner import summary_lines

    context = _context(args, writes=True)
    if args.deterministic:
        from stamplib.determinism import set_deterministic

        set_deterministic()
    spec = RunSpec.make(args.method, overrides=flags.pairs(args.set), dataset=args.dataset, outliers=args.outliers,
                        corruptions=tuple(args.corruptions.split(",")), severity=args.severity,
                        outlier_ratio=args.ratio, seed=args.seed, profile=args.profile, stream=_stream_of(args))
    from stamplib.experiments import grid

    def waiting(holder: dict[str, Any]) -> None:
        print(f"cell {spec.key()} is being computed by another process ({holder.get('job_id', '?')}): waiting for "
              "its record", file=sys.stderr, flush=True)

    try:
        # Claimed as a grid job claims its cells: a second run of this cell at the same time
        # waits for this one's record instead of computing it again.
        record = grid.run_claimed(spec, context, run, force=args.force, progress=True, on_wait=waiting)
    except KeyboardInterrupt as stop:
        return _interrupted(stop, "0 of 1 cells done; its finished corruptions are kept")
    except RuntimeError as err:
        from stamplib.determinism import refusal

        reason = refusal(err) if args.deterministic else None
        if reason is None:
            raise
        raise ValueError(f"--deterministic cannot serve method {args.method!r} on {args.device}: {reason}") from err
    print("\n".join(summary_lines(record)))
    if args.json:
        print(json.dumps(record.to_json(), indent=1))
    return 0


def _doctor_parser(sub: Any) -> None:
    p = sub.add_parser("doctor", help="versions, device, where data and checkpoints are found")
    flags.add(p, data_root=True)
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    """What is found where; exit 1 when a file is damaged (a data set, package data or a checkpoint
    whose SHA-256 is not its recorded one), so that a script can tell."""
    from stamplib.evaluation.provenance import doctor_lines

    lines = doctor_lines(_context(args))
    print("\n".join(lines))
    damaged = [line.split()[0] for line in lines if line.startswith("  ") and len(line.split()) > 1
               and line.split()[1] in ("DAMAGED", "REFUSED")]
    if damaged:
        print(f"doctor: {len(damaged)} damaged file(s) ({', '.join(damaged)}): each line above says how to restore "
              "it", file=sys.stderr)
        return 1
    return 0


def _checkpoints_parser(sub: Any) -> None:
    p = sub.add_parser("checkpoints", help="registered source models: where each is found; import a folder of them")
    p.add_argument("action", choices=["list", "import"])
    p.add_argument("folder", nargs="?", default=None, help="import: the folder holding <name>.pt and <name>.json")
    p.set_defaults(func=cmd_checkpoints)


def cmd_checkpoints(args: argparse.Namespace) -> int:
    """List the registered checkpoints with where they were found, or import a folder of them."""
    from stamplib.models import checkpoints

    if args.action == "list":
        print("\n".join(checkpoints.status_lines()))
        return 0
    if not args.folder:
        raise ValueError("checkpoints import needs the folder that holds <name>.pt and <name>.json")
    for path in checkpoints.import_dir(args.folder):
        print(f"imported {path} (SHA-256 checked)")
    return 0


def _methods_parser(sub: Any) -> None:
    p = sub.add_parser("methods", help="list methods and their hyperparameters")
    p.add_argument("--dataset", default="cifar10_builtin")
    p.set_defaults(func=cmd_methods)


def cmd_methods(args: argparse.Namespace) -> int:
    from stamplib import data, methods

    print("\n".join(methods.listing_lines(data.setting_of(args.dataset))))
    return 0


def _check_method_parser(sub: Any) -> None:
    p = sub.add_parser("check-method", help="check the method contract on one method")
    p.add_argument("name", help="a registered name or package.module:Class")
    p.set_defaults(func=cmd_check_method)


def cmd_check_method(args: argparse.Namespace) -> int:
    """Check the method contract (stamplib.methods.contract) on one method, on the digits
    benchmark's tiny ResNet: one line per check, then the counts."""
    from functools import partial

    from stamplib import models
    from stamplib.methods import contract

    results = contract.check_method(args.name, partial(models.create, "resnet_cifar_tiny"))
    print("\n".join([*map(str, results), contract.counts_line(results)]))
    return 1 if any(r.outcome == "failed" for r in results) else 0


def _notebooks_parser(sub: Any) -> None:
    p = sub.add_parser("notebooks", help="execute notebooks with papermill")
    flags.add(p, profile=True, data_root=True, device=True)
    p.add_argument("--only", nargs="*", default=[], metavar="NAME")
    flags.add_pairs(p, "--param", "a notebook parameter, e.g. methods=source,stamp or seeds=0,1,2")
    p.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds")
    p.add_argument("--jobs", type=_worker_count(), default=1,
                   help="notebooks executed at once, each in its own process (run_all.sh: as many as the grid's "
                        "workers, once the grid has computed every cell)")
    p.set_defaults(func=cmd_notebooks)


def cmd_notebooks(args: argparse.Namespace) -> int:
    from stamplib.notebook_runner import run_notebooks

    with _context(args, writes=True).exported():  # the kernels build their context from it, naming this command
        return run_notebooks(profile=args.profile, only=args.only, data_root=args.data_root, device=args.device,
                             extra=flags.pairs(args.param), timeout=args.timeout, jobs=_jobs(args.jobs))


def _site_parser(sub: Any) -> None:
    p = sub.add_parser("site", help="build the executed notebooks (./run_all.sh) into a website, build/site")
    flags.add(p, profile="whose executed notebooks: build/notebooks/<profile>")
    p.add_argument("--out", default=None, help="default: build/site")
    p.add_argument("--verbose", action="store_true", help="show Sphinx's output")
    p.set_defaults(func=cmd_site)


def cmd_site(args: argparse.Namespace) -> int:
    """The executed notebooks of one profile as a website in build/site."""
    from stamplib.site import build_site

    index = build_site(args.profile, _context(args).figures, out=Path(args.out) if args.out else None,
                       quiet=not args.verbose)
    print(f"site built: open {index}")
    return 0


def _train_source_parser(sub: Any) -> None:
    p = sub.add_parser("train-source", help="train the source network of an ID dataset (resumable)")
    p.add_argument("--dataset", required=True, help="e.g. cifar10_jpeg, cifar10_jpeg_8_2, cifar10_c")
    p.add_argument("--recipe", default=None, choices=["paper", "fast", "compact"],
                   help="paper: protocol.md §4.2 (200 epochs); fast: our 10-epoch CPU recipe "
                        "(default: the checkpoint's own, fast for the cifar10_jpeg models); compact: "
                        "the built-in benchmark's compact ResNet (30 epochs, written as ResNetTiny_*_jpeg)")
    p.add_argument("--epochs", type=int, default=0, help="shorten the recipe (0: its full length)")
    p.add_argument("--bf16", action="store_true",
                   help="bfloat16 autocast (faster only on CPUs with native bf16, e.g. AVX512-BF16/AMX; "
                        "far slower on AVX2-only CPUs)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the training forward (about 25%% faster on a 2-core CPU)")
    p.add_argument("--seed", type=flags.read_seed, default=0)
    flags.add(p, data_root=True, device=True)
    p.set_defaults(func=cmd_train_source)


def cmd_train_source(args: argparse.Namespace) -> int:
    """Train (or resume, or reuse) the source network of an ID dataset with its §4.2 recipe."""
    from stamplib.models import train_source_for

    context = _context(args)
    result = train_source_for(args.dataset, recipe=args.recipe, epochs=args.epochs, seed=args.seed,
                              device=context.device, bf16=args.bf16, compile=args.compile,
                              data_root=context.data_root)
    print(result.summary())
    return 0


def _benchmark_parser(sub: Any) -> None:
    p = sub.add_parser("benchmark", help="the built-in CIFAR-10 benchmark: rebuild its package data (build), or draw "
                                          "the quick run's headline figure (render); its evidence: claims compute")
    p.add_argument("action", choices=["build", "render"])
    flags.add(p, data_root="build: folder holding cifar10-jpeg.tar.gz or cifar10-jpeg/",
              results="render: results folder of the quick run (default: results/)")
    p.add_argument("--checkpoints", default=None,
                   help="build: folder of the compact networks ResNetTiny_{10,8}_jpeg[_seedK].pt and .json "
                        "(default: where train-source writes)")
    p.add_argument("--out", default=None, help="build: default the package's data/builtin_cifar10 folder")
    p.set_defaults(func=cmd_benchmark)


def cmd_benchmark(args: argparse.Namespace) -> int:
    """The built-in CIFAR-10 benchmark: rebuild its package data, or draw the quick run's headline
    figure from the results store."""
    from stamplib.data import builtin_cifar10
    from stamplib.evaluation.store import ResultsStore

    context = _context(args)
    if args.action == "build":
        from stamplib.data.catalog import cifar10_jpeg_folder

        photographs = cifar10_jpeg_folder(context.data_root, "test").parent
        out = Path(args.out) if args.out else builtin_cifar10.FOLDER
        checkpoint_dir = Path(args.checkpoints) if args.checkpoints else paths.checkpoints_dir()
        for path in builtin_cifar10.build(photographs, checkpoint_dir, out=out):
            print(f"{path.stat().st_size:>10,} B  {path}")
        return 0
    from stamplib.evidence import benchmarks, pages, tables
    from stamplib.experiments import reference

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


def _executor_flags(parser: argparse.ArgumentParser, *, executor_default: str | None,
                    executor_help: str | None, jobs_help: str) -> None:
    """Where grid cells run (here, local processes, SLURM through submitit): shared by ``grid``
    and ``tune`` so that the two commands keep the same names, defaults and help
    (:func:`_executor_options` reads them)."""
    parser.add_argument("--executor", default=executor_default, choices=["local", "submitit", "submitit-local"],
                        help=executor_help)
    parser.add_argument("--jobs", type=_worker_count(allow_auto=True), default=1, help=jobs_help)
    parser.add_argument("--partition", default=None, help="SLURM partition (--executor submitit)")
    parser.add_argument("--gpus-per-job", type=flags.read_positive("--gpus-per-job"), default=1,
                        help="GPUs per job (with --device cuda)")
    parser.add_argument("--cpus-per-task", type=flags.read_positive("--cpus-per-task"), default=4,
                        help="CPUs per job (its torch threads)")
    parser.add_argument("--time-min", type=flags.read_positive("--time-min"), default=240,
                        help="job time limit in minutes (requeued past it)")
    parser.add_argument("--mem-gb", type=flags.read_positive("--mem-gb", float, 0.001), default=None,
                        help="memory per job")
    parser.add_argument("--array-parallelism", type=flags.read_positive("--array-parallelism"), default=32,
                        help="SLURM jobs of the array running at once")


def _grid_parser(sub: Any) -> None:
    p = sub.add_parser("grid", help="compute every cell of notebooks: here, in local processes, or on SLURM")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--notebook", nargs="+", default=[], metavar="NAME", help="names or prefixes, e.g. 02 06")
    which.add_argument("--all", action="store_true",
                       help="every notebook with cells (every registered experiment: 00, 02-10, 12, 13)")
    flags.add(p, profile=True, data_root=True, device=True, results=True)
    flags.add_pairs(p, "--param", "a notebook parameter, e.g. methods=source,stamp or seeds=0,1,2")
    _executor_flags(p, executor_default="local", executor_help=None,
                    jobs_help="local: worker processes (with --device cuda, worker i uses cuda:(i mod GPUs)); "
                              "submitit-local: parallel jobs; 0: one per GPU with --device cuda, else one per "
                              "CPU core")
    p.add_argument("--cells-per-job", type=flags.read_positive("--cells-per-job", least=0), default=0,
                   help="cells per job (0: sized from the profile)")
    p.add_argument("--dry-run", action="store_true", help="print cell counts and status, submit nothing")
    p.add_argument("--wait", action="store_true", help="submitit: wait for the jobs with a progress bar")
    p.add_argument("--retry-failed", action="store_true", help="submit only the cells whose last job failed")
    _into_committed_flag(p)
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
    raise ValueError(f"notebook {', '.join(orphans)} has no registered experiment: register one "
                     f"(stamplib.experiments.registry.register) in a module that an installed package names "
                     f"under the entry-point group {registry.ENTRY_POINT_GROUP!r} (docs/architecture.md), or "
                     f"declare in the notebook's metadata that it computes what it shows itself "
                     f"(stamplib.{COMPUTES_ITSELF}: true)")


def cmd_grid(args: argparse.Namespace) -> int:
    """Every cell of the chosen notebooks: status per notebook, then compute or submit the missing."""
    from stamplib.evaluation.store import ResultsStore
    from stamplib.experiments import grid, registry

    context = _context(args, writes=True)
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
    options = _executor_options(args)
    if args.dry_run:
        if line := grid.dry_run_line(distinct, store, options):
            print(line)
        return 0
    try:
        report = grid.run_grid(distinct, context, options, wait=args.wait, progress=True,
                               retry_failed=args.retry_failed)
    except KeyboardInterrupt as stop:
        return _interrupted(stop, _cells_kept(context.results, distinct), submitted=options.executor != "local")
    print("\n".join(report.summary_lines(store)))
    return 0 if report.pending else (1 if report.failed or report.missing else 0)


_TUNE_EPILOG = """grid syntax:
  --grid NAME=V1,V2,...   one hyperparameter of the method's config and its values, comma-separated;
                          repeat --grid for each dimension (the first varies slowest). Values are typed
                          as the config field expects: numbers, true/false, a choice's name, none.
  e.g. python -m stamplib tune stamp --dataset cifar10_builtin --outliers noise --grid lr=0.01,0.05,0.1 --grid alpha=0.25,0.3,0.4

presets (--preset NAME; --list-presets names them): the authors' grids of test-time-val.sh for STAMP and
the paper's baselines, per hyperparameter setting, and the newer methods' grids. Without --grid or
--preset a method's own preset is used; a --grid given with a preset replaces that dimension.

outputs: the table is printed (the chosen row and the config's current values marked) and written as
<out>/tune__<method>__<dataset>__<outliers>__<setting>__<profile>.csv and .md, and .png (a heatmap)
when the grid has two dimensions; <out> defaults to figures/tune."""


def _tune_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tune", help="select hyperparameters by the paper's protocol (H-score on gaussian noise + Noise outliers)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Select a method's hyperparameters as STAMP's App. A does: run a grid on the first corruption "
                    "(gaussian_noise) with the outliers mixed in and choose the cell with the best criterion "
                    "(default: the H-score). Cells go through the results store: a second call computes nothing.",
        epilog=_TUNE_EPILOG)
    p.add_argument("method", nargs="?", default=None, help="a registered method name, e.g. stamp")
    p.add_argument("--dataset", default="cifar10_builtin", type=_adapted_dataset)
    p.add_argument("--outliers", default="noise", help="outlier set (the protocol uses noise)")
    p.add_argument("--corruption", default="gaussian_noise", help="the selection corruption (the protocol: the first)")
    p.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...", type=flags.read_grid_dimension,
                   help="one dimension of the grid, e.g. --grid lr=0.01,0.05,0.1 (repeat for more)")
    p.add_argument("--preset", default=None, help="a named grid (see --list-presets)")
    p.add_argument("--list-presets", action="store_true", help="list the presets and exit")
    p.add_argument("--criterion", default="h", help="the metric to select by: h, acc, auroc, fpr95 (lowest wins), ...")
    p.add_argument("--setting", default="", help="hyperparameter setting (default: the data set's own)")
    p.add_argument("--seed", type=flags.read_seed, default=0)
    flags.add(p, profile=True, data_root=True, device=True, results=True)
    p.add_argument("--out", default=None, help="folder of the table and heatmap files (default: figures/tune)")
    _into_committed_flag(p)
    _executor_flags(p, executor_default=None,
                    executor_help="compute the cells as `python -m stamplib grid` does (default: one after "
                                  "another here)",
                    jobs_help="with --executor: local worker processes or parallel submitit-local jobs (0: one "
                              "per CPU core, or per GPU with --device cuda)")
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
        raise ValueError("name the METHOD to tune, e.g. python -m stamplib tune stamp --dataset cifar10_builtin --outliers noise")
    context = _context(args, writes=True)
    job = tune.make_job(args.method, grid_items=args.grid, preset=args.preset, dataset=args.dataset,
                        outliers=args.outliers, corruption=args.corruption, profile=args.profile, seed=args.seed,
                        setting=args.setting, criterion=args.criterion)
    store = ResultsStore(context.results)
    print(tune.status_line(job, store))
    try:
        tune.compute(job, context, _executor_options(args) if args.executor is not None else None, progress=True)
    except KeyboardInterrupt as stop:
        return _interrupted(stop, _cells_kept(context.results, job.specs()))
    result = tune.select(job, store)
    print(tuning.format_result(result))
    for path in tuning.write_outputs(result, Path(args.out) if args.out else context.figures / "tune"):
        print(f"wrote {path}")
    return 1 if result.missing else 0


def _reference_parser(sub: Any) -> None:
    p = sub.add_parser("reference", help="the committed reference run on real images (results/reference)")
    p.add_argument("action", choices=["status", "compute", "recompute", "render"],
                   help="render: the notebooks' tables/figures from the committed records; compute: the missing "
                        "cells; recompute: every cell again, compared with the committed records (its page and "
                        "headline figure: claims render)")
    p.add_argument("--extras", action="store_true",
                   help="compute: after the 44 cells, the optional ones (15 corruptions for Source, BN Stats, "
                        "Tent and STAMP in (a); STAMP with K = 1; the ablation rows; the realistic protocol); "
                        "the same as --cells all")
    p.add_argument("--cells", choices=["core", "extras", "all", "stress", "seeds"], default="core",
                   help="compute/recompute: the 44 cells (core), the optional ones only (extras), or both in "
                        "that order (all); stress: of the optional ones, only Fig. 3's weights, Table 6's "
                        "outlier proportions and notebook 13's streams (a CPU's share: the realistic "
                        "protocol's cells belong on a GPU); seeds: of the optional ones, the paper's ten "
                        "over seeds 1 and 2 in setting (a). The ledger's claims: claims compute --benchmark "
                        "reference")
    flags.add(p, device="compute/recompute: cpu, cuda or cuda:N (each record names the device it ran on)",
              data_root="default: shared/data beside the checkout", results="reference store (default: results/reference)")
    p.add_argument("--scratch", default="results/recompute", help="recompute: where the new records go")
    _into_committed_flag(p)
    p.add_argument("--jobs", type=_worker_count(), default=1, help="compute/recompute: worker processes; render: notebooks at once")
    p.add_argument("--methods", default="", help="recompute: only these methods' committed cells (comma-separated; "
                                                 "'deterministic' = those without test-time randomness)")
    p.add_argument("--settings", default="", help="recompute: only these settings (comma-separated: a = Noise "
                                                  "outliers, b = the 8:2 split, c = the closed set)")
    p.set_defaults(func=cmd_reference)


def cmd_reference(args: argparse.Namespace) -> int:
    """The committed reference run on real images: status, compute, recompute, render."""
    from stamplib.evaluation.store import ResultsStore
    from stamplib.experiments import reference

    context = _context(args, reference.reference_dir(), reference.default_data_root())
    store = ResultsStore(context.results)
    cells = reference.specs()
    if args.action == "render":
        from stamplib.evidence import benchmarks, pages, tables
        from stamplib.notebook_runner import run_notebooks

        store.verify()  # committed evidence that differs from its manifest: refused before anything is written
        # the page's headline figure, from the same records; the README's of this name is claims render's
        # (both benchmarks, from the committed records), so this one goes to build/figures there
        folder = pages.figure_folder(context.figures, benchmarks.REFERENCE.figure)
        tables.write_figure(benchmarks.REFERENCE, tables.setting_tables(benchmarks.REFERENCE, store.records_by_key()),
                            folder)
        print(reference.render_line(store, cells))
        with context.exported():  # the kernels read this store only
            return run_notebooks(profile=reference.PROFILE, only=reference.NOTEBOOKS, data_root=str(context.data_root),
                                 extra={"compute_missing": False}, jobs=_jobs(args.jobs))
    if args.action == "status":
        print("\n".join(reference.status_lines(store)))
        return 0
    # compute writes into the reference store, recompute into --scratch: tried before any cell
    flags.writable(*((context.results, "--results") if args.action == "compute" else (Path(args.scratch), "--scratch")))
    if args.action == "compute":
        _into_committed(args, context.results, context.results.resolve() == reference.reference_dir().resolve())
    group = args.cells if not args.extras or args.cells != "core" else "all"
    todo = reference.cells_of(group)
    if args.action == "compute":
        try:
            report = reference.compute(todo, context, jobs=_jobs(args.jobs))
        except KeyboardInterrupt as stop:
            return _interrupted(stop, _cells_kept(context.results, todo))
        print(reference.compute_line(report, store))
        return 0 if report.ok else 1
    chosen = reference.select_settings(reference.select_methods(store.status(todo).done, args.methods),
                                       args.settings)
    try:
        result = reference.recompute(chosen, context, args.scratch, jobs=_jobs(args.jobs))
    except KeyboardInterrupt as stop:
        return _interrupted(stop, _cells_kept(Path(args.scratch), chosen))
    print("\n".join(reference.comparison_lines(result, context.device)))
    return 1 if result.differences else 0


def _course_parser(sub: Any) -> None:
    p = sub.add_parser("course", help="the course's lab (docs/course_lab.md): hand out the student copies (release), "
                                      "grade the notebooks handed in (grade)")
    actions = p.add_subparsers(dest="action", required=True)
    release = actions.add_parser("release", help="write the student copies of notebooks 00 and 14-17 and a README")
    release.add_argument("out", help="the folder to write them to (new or empty)")
    release.add_argument("--force", action="store_true", help="write into a folder that is not empty (overwrites "
                                                              "the release's files there)")
    grade = actions.add_parser("grade", help="run each submitted lesson in a fresh kernel with the package's checks; "
                                             "write grades.csv and print a summary per exercise")
    grade.add_argument("submissions", help="the folder of the handed-in notebooks (searched at any depth)")
    grade.add_argument("--timeout", type=float, default=120,
                       help="seconds per notebook for the student's code and the checks together (the kernel's "
                            "start and imports not counted)")
    grade.add_argument("--jobs", type=_worker_count(), default=1, help="notebooks graded at once, each in its own kernel")
    grade.add_argument("--out", default=None, help="the grades file (default: SUBMISSIONS/grades.csv)")
    grade.add_argument("--executed", default=None, metavar="FOLDER",
                       help="also keep the notebooks the grader executed, to see why a row failed")
    p.set_defaults(func=cmd_course)


def cmd_course(args: argparse.Namespace) -> int:
    """Release the student copies, or grade the submitted notebooks (stamplib.teaching.lab)."""
    import time

    from stamplib.teaching import lab

    if args.action == "release":
        written = lab.release(Path(args.out), force=args.force)
        print(f"wrote {len(written)} files to {args.out}: " + ", ".join(p.name for p in written))
        return 0
    out = Path(args.out) if args.out else Path(args.submissions) / "grades.csv"
    earlier = [p for p in lab.earlier_grades(Path(args.submissions)) if p.resolve() != out.resolve()]
    if earlier:  # said, not graded: a grades file is no hand-in
        print(f"not graded: {', '.join(map(str, earlier))}, the grades of an earlier grading", file=sys.stderr)
    started = time.perf_counter()
    rows = lab.grade(Path(args.submissions), out, args.timeout, jobs=_jobs(args.jobs),
                     executed=Path(args.executed) if args.executed else None)
    print("\n".join(lab.summary(rows)))
    print(f"done in {time.perf_counter() - started:.0f} s: {len(rows)} rows for {len({r.file for r in rows})} files in "
          f"{out}")
    return 0


def _claims_parser(sub: Any) -> None:
    p = sub.add_parser("claims", help="the paper's claims (the ledger) on a benchmark: compute their cells, report "
                                      "status, render every generated page from the committed stores, or judge a "
                                      "store of your own")
    p.add_argument("action", choices=["render", "status", "compute", "diagnose", "judge"],
                   help="render: every generated page, figure and README block from the committed stores "
                        "(docs/claims.md first; refused, exit 2, when a record differs from its store's "
                        "MANIFEST.sha256); status: how many cells each design of a committed benchmark has; "
                        "compute: the missing cells of one design of a committed benchmark, the cheapest claim "
                        "first, into its store (and, for a design of several networks, their Noise diagnostics); "
                        "diagnose: only those Noise diagnostics, without the cells; "
                        "judge: every claim's verdict on the store --results")
    p.add_argument("--benchmark", default="", choices=["", "builtin", "reference", "full"],
                   help="status/compute/diagnose: a committed benchmark (builtin, reference; status: default both); judge: "
                        "whose designs decide (default: the committed benchmark whose store --results is, else full: "
                        "a full-profile store of the paper's data)")
    p.add_argument("--design", default="",
                   help="compute/diagnose: the design whose cells to compute (builtin: networks, streams, stream; reference: "
                        "networks, fifteen, three; `claims status` lists them)")
    p.add_argument("--replicates", default="", type=flags.read_number_list("--replicates"),
                   help="compute/diagnose: which of the design's replicates: network numbers on a design of several networks, "
                        "stream seeds on a design of one network (e.g. 1-4; default: all of them)")
    p.add_argument("--seeds", default="", type=flags.read_number_list("--seeds"),
                   help="judge --benchmark full: the seeds that decide (default 0-2)")
    p.add_argument("--jobs", type=_worker_count(), default=1, help="compute: local worker processes (one core each)")
    p.add_argument("--write", default=None, metavar="PAGE", help="judge: also write the verdicts as a page")
    _into_committed_flag(p)
    flags.add(p, results="judge: the store to judge (required); status/compute/diagnose: default the benchmark's committed "
                         "store", device="compute: cpu, cuda or cuda:N",
              data_root="compute: where the data sets are (default: shared/data beside the checkout)")
    p.set_defaults(func=cmd_claims)


def cmd_claims(args: argparse.Namespace) -> int:
    """The ledger's claims: render the committed pages, report status, compute cells, judge a store."""
    from stamplib.evidence import pages

    if args.action == "render":
        # render_all reads both committed stores whole before writing: a record that differs from
        # its store's manifest is refused there (EvidenceError, one line, exit 2) and nothing is written
        for path in pages.render_all(paths.repo_root() or Path.cwd()):
            print(f"wrote {path}")
        return 0
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
                      "cells")
        return 0
    benchmark = benchmarks.by_name(args.benchmark)
    if not args.design:
        raise ValueError(f"claims {args.action}: name the design with --design ({', '.join(d.name for d in benchmark.designs)})")
    design = benchmark.design(args.design)
    chosen = benchmarks.chosen_replicates(design, args.replicates) if args.replicates else design.replicates
    context = _context(args, (paths.repo_root() or Path.cwd()) / benchmark.store, paths.shared_data(), writes=True,
                       evidence=True)
    if args.action == "diagnose":
        if not design.varies_networks:
            raise ValueError(f"claims diagnose: {benchmark.name}/{design.name} holds one network; name a design of "
                             "several networks (networks)")
        _refuse_absent_networks(benchmarks.networks_of(design, chosen), context.results)
        _write_diagnostics(design, chosen, context, args.command_line)
        return 0
    cells = benchmarks.evidence_cells(design, ResultsStore(context.results), context.device, chosen)
    # every network the missing cells or the diagnostics need is here, before any work
    _refuse_absent_networks([(s.dataset, s.network) for s in cells]
                            + (benchmarks.networks_of(design, chosen) if design.varies_networks else []),
                            context.results)
    try:
        report = grid.run_grid(cells, context, grid.ExecutorOptions(jobs=_jobs(args.jobs)), keep_order=True)
    except KeyboardInterrupt as stop:
        return _interrupted(stop, _cells_kept(context.results, cells))
    print(f"{benchmark.name}/{design.name} into {context.results}: {len(report.done)} done, {len(report.missing)} "
          f"missing, {len(report.failed)} failed jobs, of {len(cells)} cells")
    if design.varies_networks:
        _write_diagnostics(design, chosen, context, args.command_line)
    return 0 if report.ok else 1


def _refuse_absent_networks(needed: Sequence[tuple[str, int]], results: Path) -> None:
    """One line, before any work, for the first source network of ``needed`` (data set, network)
    whose weights are not on this machine: its name, the SHA-256 the store's diagnostic or records
    name for it, and the command that trains it."""
    from stamplib import data
    from stamplib.evidence import networks
    from stamplib.models import checkpoints

    for dataset, network in dict.fromkeys(needed):
        name = checkpoints.network_name(data.dataset(dataset).checkpoint, network)
        if checkpoints.checkpoint_path(name).is_file():
            continue
        sha = networks.recorded_sha256(results, name)
        train = checkpoints.train_command(name)
        raise FileNotFoundError(
            f"source network {network} of {dataset}, {name} (SHA-256 {sha or 'not named by this store yet'}), is not "
            f"on this machine: {f'train it with `{train}`, or ' if train else ''}copy it in with `python -m stamplib "
            "checkpoints import FOLDER`; nothing was computed")


def _write_diagnostics(design: benchmarks.Design, chosen: Sequence[benchmarks.Replicate], context: paths.RunContext,
                       command_line: str) -> None:
    """The Noise diagnostic of every network of ``chosen`` (``stamplib.evidence.networks``), into the store."""
    from stamplib.evidence import benchmarks, networks

    for dataset, network in benchmarks.networks_of(design, chosen):
        diagnostic = networks.diagnose(dataset, network, context.data_root)
        written = networks.put(context.results, diagnostic, command_line)
        where = networks.path(context.results, diagnostic.checkpoint)
        print(f"wrote {where}" if written else f"unchanged {where} (its numbers are the same; not rewritten)")


#: Every command's parser builder, in the order ``--help`` lists them.
PARSERS: tuple[Callable[[Any], None], ...] = (
    _run_parser, _doctor_parser, _checkpoints_parser, _notebooks_parser, _train_source_parser, _benchmark_parser,
    _grid_parser, _tune_parser, _check_method_parser, _methods_parser, _site_parser, _reference_parser,
    _course_parser, _claims_parser,
)


#: The top-level ``--help``: what the tool is, each command in one line (:data:`COMMANDS`), examples.
ABOUT = """STAMP (ECCV 2024) and other test-time adaptation methods, on streams of corrupted images
mixed with outliers: compute cells, execute the notebooks, check the paper's claims. Records
go to the results store (results/ of the checkout, or --results DIR)."""

EXAMPLES = """examples:
  python -m stamplib run --method stamp --profile smoke   one cell, on the built-in CIFAR-10 images
  python -m stamplib methods                              every method and its hyperparameters
  python -m stamplib grid --notebook 02 --jobs 2          the cells notebook 02 shows, two at a time
  python -m stamplib notebooks --only 02                  execute notebook 02 into build/notebooks/
  python -m stamplib COMMAND --help                       one command's flags"""

#: Each command in one line, as the top-level ``--help`` lists it (the builder's longer help
#: becomes the command's own ``--help`` description).
COMMANDS = {
    "run": "compute one cell (a method on one stream), store it",
    "doctor": "versions, device, where data and models are found",
    "checkpoints": "list the source networks; import a folder of them",
    "notebooks": "execute the notebooks headless (build/notebooks/)",
    "train-source": "train the source network of a data set",
    "benchmark": "the built-in benchmark: rebuild data, draw figure",
    "grid": "compute every cell of notebooks, here or on SLURM",
    "tune": "select hyperparameters by the paper's protocol",
    "check-method": "check one method against the method contract",
    "methods": "list the methods and their hyperparameters",
    "site": "build the executed notebooks into a website",
    "reference": "the reference run on real images: status, compute",
    "course": "the course's lab: release student copies, grade",
    "claims": "the claims: compute, status, diagnose, render, judge",
}


class _Commands:
    """The subcommands as the parser builders add them: a command's one line in the top-level
    listing comes from :data:`COMMANDS`, its builder's ``help`` becomes its own ``--help``'s
    description (unless it gives one)."""

    def __init__(self, sub: Any) -> None:
        self._sub = sub

    def add_parser(self, name: str, *, help: str, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs.setdefault("description", help)
        return self._sub.add_parser(name, help=COMMANDS[name], **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line. Building it imports no torch (the commands import what they use
    when they run), so every ``--help`` answers at once."""
    # The commands are listed by hand: argparse's own listing wraps a long command name onto
    # a line of its own and adds a line for the COMMAND placeholder.
    listing = "\n".join(f"  {name:<14}{line}" for name, line in COMMANDS.items())
    parser = flags.Parser(prog="python -m stamplib", usage="%(prog)s [-h] COMMAND ...",
                          description=f"{ABOUT}\n\ncommands:\n{listing}", epilog=EXAMPLES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help=argparse.SUPPRESS,
                                prog=parser.prog)
    for add in PARSERS:
        add(_Commands(sub))
    return parser


def _closed_pipe() -> int:
    """The reader of our output has gone (``python -m stamplib methods | head -1``): stop without
    a word, as a program killed by SIGPIPE does (exit 128 + 13). Standard output is pointed at
    /dev/null first, so that the interpreter's last flush of what the reader will never read
    raises nothing either (the recipe of Python's ``signal`` documentation, "Note on SIGPIPE")."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor behind sys.stdout (a test's capture)
        pass
    return 141


#: The errors of a write into a place this user cannot write: permission, a read-only file system,
#: a path through a file, a missing parent that cannot be made.
_UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.ENOENT)


def _unusable_folder(err: OSError) -> str | None:
    """One line for an OSError raised by writing where this user cannot (:data:`_UNWRITABLE`),
    naming the file and the setting that chose its folder; None for any other error (its
    traceback is kept: a bug, not the environment)."""
    if err.errno not in _UNWRITABLE or not err.filename:
        return None
    target = Path(os.fsdecode(err.filename)).absolute()
    places = [(paths.home(), "STAMPLIB_HOME (stamplib's caches and checkpoints)"),
              (paths.results_dir(), "the results folder (--results, or STAMPLIB_RESULTS)"),
              (paths.figures_dir(), "the figures folder (STAMPLIB_FIGURES)")]
    chosen = next(((folder, what) for folder, what in places
                   if target == folder.absolute() or folder.absolute() in target.parents), None)
    if chosen is None:
        return None
    folder, what = chosen
    if err.errno == errno.ENOENT and folder.exists():
        return None  # a file missing inside a folder that is there: not a folder this user cannot write
    return (f"cannot write {target} ({err.strerror}): {what} is {folder}, which this user cannot write; point it "
            "to a folder you can write")


def main(argv: list[str] | None = None) -> int:
    # SIGINT, SIGTERM and SIGHUP end every command the same way: what it started ends with it,
    # one line says what was kept, and the exit code is 128 + the signal (stamplib.processes).
    with processes.stop_on_signals():
        try:
            args = build_parser().parse_args(argv)
            # Records computed below (here, in grid workers or notebook kernels) name this command:
            # it travels in the run context each command builds.
            args.command_line = shlex.join(["python", "-m", "stamplib", *(sys.argv[1:] if argv is None else argv)])
            return args.func(args)
        except KeyboardInterrupt as stop:  # a command that does not count what it kept
            return _interrupted(stop)
        except BrokenPipeError:
            return _closed_pipe()
        except (ValueError, FileNotFoundError, RuntimeError, MissingExtra) as err:
            # Bad input (names, values, missing or damaged files, a missing extra): one line naming
            # the fix, no traceback. Any other RuntimeError is a bug or a PyTorch failure: keep its
            # traceback.
            if type(err) is FileNotFoundError and (line := _unusable_folder(err)):  # a folder that cannot be made
                print(f"error: {line}", file=sys.stderr)
                return 2
            if isinstance(err, RuntimeError):
                from stamplib.data.downloads import (
                    DownloadError,  # imports torch: only where needed
                )

                if not isinstance(err, DownloadError):
                    raise
            print("error: " + " ".join(str(err).split()), file=sys.stderr)
            return 2
        except OSError as err:
            # A full disk (or quota), or a folder this user cannot write (read-only, not a folder),
            # wherever the write was: one line, at any moment. Any other OSError keeps its traceback.
            if (line := _unusable_folder(err)) is not None:
                print(f"error: {line}", file=sys.stderr)
                return 2
            if err.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            from stamplib.evaluation.store import disk_full

            print("error: " + " ".join(str(disk_full(err)).split()), file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
