"""What the command families share: the run context of a command's flags, the guard of the
committed evidence stores, worker counts, the executor flags of ``grid`` and ``tune``, and the
one line of an interrupted command. Nothing here imports torch at module level."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stamplib import flags, paths, processes


def context(args: argparse.Namespace, results: str | Path | None = None, default_data_root: Path | None = None,
            writes: bool = False, evidence: bool = False) -> paths.RunContext:
    """The run context of a command's shared flags (``--data-root``, ``--results``, ``--device``;
    one left out gets the command's own default), naming the command for its records; a dry run's
    is not checked. ``writes``: the command stores records, so its results folder is tried now and
    a committed store is written only as :func:`into_committed` allows (``evidence``: computing
    into ``results``, the command's own committed store, is its purpose)."""
    dry_run = getattr(args, "dry_run", False)
    built = paths.RunContext.build(getattr(args, "data_root", None), getattr(args, "results", None) or results,
                                   device=getattr(args, "device", "cpu"), command=args.command_line,
                                   default_data_root=default_data_root, check=not dry_run)
    if writes and not dry_run:
        flags.writable(built.results)
        own = evidence and results is not None and built.results.resolve() == Path(results).resolve()
        into_committed(args, built.results, own)
    return built


def into_committed(args: argparse.Namespace, results: Path, own: bool) -> None:
    """A command writes into a committed evidence store (a manifest, or files git has committed)
    only when its command line says so: its own store (``claims compute``: ``own``) or
    ``--into-committed``; then one line says so. Any other is refused before anything is computed."""
    from stamplib.evaluation.store import ResultsStore

    if not ResultsStore(results).sealed:
        return
    if not own and not getattr(args, "into_committed", False):
        raise ValueError(f"{results} is committed evidence (its records are listed in its MANIFEST.sha256 and "
                         "committed to git): this command would write into it; give another --results folder, or "
                         "say so with --into-committed")
    print(f"note: writing into the committed evidence store {results}: each record computed gets its entry in its "
          "MANIFEST.sha256 (git status shows what changed)", file=sys.stderr)


def into_committed_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--into-committed", action="store_true",
                        help="write into a committed evidence store given as --results (else refused)")


def worker_count(allow_auto: bool = False) -> Any:
    """``--jobs``'s reading: a whole number of worker processes, at least 1 (``allow_auto``: or 0,
    one per GPU with CUDA, else one per CPU core)."""
    least = 0 if allow_auto else 1

    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            auto = " (or 0: one per GPU, else per core)" if allow_auto else ""
            raise argparse.ArgumentTypeError(f"--jobs must be a whole number of at least 1{auto}, got {text!r}")
        return value

    return read


def jobs(requested: int, flag: str = "--jobs") -> int:
    """``requested`` processes held to one per CPU core, saying so in a line when that cuts them."""
    held, line = processes.capped_jobs(requested, flag)
    if line:
        print(line, file=sys.stderr)
    return held


def executor_flags(parser: argparse.ArgumentParser, *, executor_default: str | None, executor_help: str | None,
                   jobs_help: str) -> None:
    """Where grid cells run (here, local processes, SLURM through submitit): ``grid`` and ``tune``
    share these names, defaults and help (:func:`executor_options` reads them)."""
    parser.add_argument("--executor", default=executor_default, choices=["local", "submitit", "submitit-local"],
                        help=executor_help)
    parser.add_argument("--jobs", type=worker_count(allow_auto=True), default=1, help=jobs_help)
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


def executor_options(args: argparse.Namespace) -> Any:
    """The grid's executor options from :func:`executor_flags` (jobs 0: one per GPU with CUDA,
    else one per CPU core); this machine's processes held to one per core."""
    from stamplib.experiments import grid

    executor = args.executor or "local"
    count = args.jobs if args.jobs > 0 else grid.default_jobs(args.device)
    return grid.ExecutorOptions(
        executor=executor, jobs=jobs(count) if executor != "submitit" else count,
        cells_per_job=getattr(args, "cells_per_job", 0) or None, partition=args.partition,
        gpus_per_job=args.gpus_per_job, cpus_per_task=args.cpus_per_task, time_min=args.time_min,
        array_parallelism=args.array_parallelism, mem_gb=args.mem_gb)


def cells_kept(results: Path, cells: Any) -> str:
    """How many of ``cells`` (RunSpecs) the store at ``results`` holds, counted from the files
    alone, for the line of an interrupted command."""
    from stamplib.evaluation.store import ResultsStore

    store = ResultsStore(results)
    unique = {s.key(): s for s in cells}.values()
    return f"{sum(store.path(s).is_file() for s in unique)} of {len(unique)} cells done and kept"


def interrupted(stop: KeyboardInterrupt, kept: str = "every finished cell is kept", submitted: bool = False) -> int:
    """Print the one line of a command that a signal stopped (what it ``kept``) and return its exit
    code, 128 + the signal: 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP)."""
    print("\n" + processes.interrupted_line(kept + ("; the submitted jobs keep running" if submitted else "")),
          file=sys.stderr)
    return processes.exit_code(stop)


def renamed(old: str, new: str) -> None:
    """The one line of an old spelling that still works for one release."""
    print(f"note: `{old}` is now `{new}`; the old spelling goes in the next release", file=sys.stderr)


def refuse_absent_networks(needed: Sequence[tuple[str, int]], results: Path | None) -> None:
    """One line, before any work, for the first source network of ``needed`` (data set, network)
    whose weights are not on this machine: its name, the SHA-256 the store names for it (where
    ``results`` is given), and the command that trains it."""
    from stamplib import data
    from stamplib.evidence import networks
    from stamplib.models import checkpoints

    for dataset, network in dict.fromkeys(needed):
        name = checkpoints.network_name(data.dataset(dataset).checkpoint, network)
        if checkpoints.checkpoint_path(name).is_file():
            continue
        sha = networks.recorded_sha256(results, name) if results is not None else None
        train = checkpoints.train_command(name)
        raise FileNotFoundError(
            f"source network {network} of {dataset}, {name} (SHA-256 {sha or 'not named by this store yet'}), is not "
            f"on this machine: {f'train it with `{train}`, or ' if train else ''}copy it in with `python -m stamplib "
            "checkpoints import FOLDER`; nothing was computed")


class OldSpelling(argparse.Action):
    """An old flag that still works for one release: it sets the new flag's field and says the
    new name in one line (hidden from ``--help``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        renamed(option_string or self.dest, "--" + self.dest.replace("_", "-"))
        setattr(namespace, self.dest, values)


def old_flag(parser: Any, old: str, new: str, **kwargs: Any) -> None:
    """Declare ``old`` as an old spelling of the flag ``new`` (already declared, same type)."""
    parser.add_argument(old, dest=new.lstrip("-").replace("-", "_"), action=OldSpelling, help=argparse.SUPPRESS,
                        default=argparse.SUPPRESS, **kwargs)
