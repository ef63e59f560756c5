"""Command line: ``python -m stamplib COMMAND``, one module per family of commands.

A face that parses and dispatches: each command has a parser builder (``<command>_parser``) and a
function that builds the run context from its flags (:func:`stamplib.cli.common.context`), makes
one call into the layers and prints the lines they return. The families: :mod:`.cells` (``run``),
:mod:`.grid` (``grid``, ``tune``), :mod:`.notebooks` (``notebooks``, ``site``, ``course``),
:mod:`.claims` (``claims``), :mod:`.reference`, :mod:`.setup` (``doctor``, ``checkpoints``,
``methods``, ``check-method``, ``train-source``) and :mod:`.maintain` (``benchmark``, and the
maintainer's ``maintain``, left out of the listing). Building the parser imports no torch."""

from __future__ import annotations

import argparse
import errno
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stamplib import flags, paths, processes
from stamplib.cli import cells, claims, common, grid, maintain, notebooks, reference, setup
from stamplib.extras import MissingExtra

#: Every command's parser builder, in the order ``--help`` lists them; the maintainer's last.
PARSERS: tuple[Callable[[Any], None], ...] = (
    cells.run_parser, setup.doctor_parser, setup.checkpoints_parser, notebooks.notebooks_parser,
    setup.train_source_parser, maintain.benchmark_parser, grid.grid_parser, grid.tune_parser,
    setup.check_method_parser, setup.methods_parser, notebooks.site_parser, reference.reference_parser,
    notebooks.course_parser, claims.claims_parser, maintain.maintain_parser,
)


#: The top-level ``--help``: what the tool is, each command in one line (:data:`COMMANDS`), examples.
ABOUT = """STAMP (ECCV 2024) and other test-time adaptation methods, on streams of corrupted images
mixed with outliers: compute cells, execute the notebooks, check the paper's claims. Records
go to the results store (results/ of the checkout, or --results DIR)."""

EXAMPLES = """examples:
  python -m stamplib run --method stamp --profile smoke   one cell, on the built-in CIFAR-10 images
  python -m stamplib run --method stamp --network 1 ...   the same on source network 1
  python -m stamplib methods                              every method and its hyperparameters
  python -m stamplib grid --notebook 02 --jobs 2          the cells notebook 02 shows, two at a time
  python -m stamplib notebooks --only 02                  execute notebook 02 into build/notebooks/
  python -m stamplib COMMAND --help                       one command's flags

details: docs/running.md; maintainers: python -m stamplib maintain --help"""

#: Each command in one line, as the top-level ``--help`` lists it (the builder's longer help
#: becomes the command's own ``--help`` description).
COMMANDS = {
    "run": "compute one cell (a method on one stream), store it",
    "doctor": "versions, device, where data and models are found",
    "checkpoints": "list the source networks; import a folder of them",
    "notebooks": "execute the notebooks headless (build/notebooks/)",
    "train-source": "train the source network of a data set",
    "benchmark": "draw the built-in benchmark's figure of a quick run",
    "grid": "compute every cell of notebooks, here or on SLURM",
    "tune": "select hyperparameters by the paper's protocol",
    "check-method": "check one method against the method contract",
    "methods": "list the methods and their hyperparameters",
    "site": "build the executed notebooks into a website",
    "reference": "the reference run: recompute and compare, render",
    "course": "the course's lab: release student copies, grade",
    "claims": "every generated page; the claims' cells; judge a store",
}

#: The maintainer's commands: parsed, left out of the user's listing.
MAINTAINER_COMMANDS = {"maintain": "maintainers: rebuild the built-in benchmark's package data"}


class _Commands:
    """The subcommands as the parser builders add them: a command's one line in the top-level
    listing comes from :data:`COMMANDS`, its builder's ``help`` becomes its own ``--help``'s
    description (unless it gives one)."""

    def __init__(self, sub: Any) -> None:
        self._sub = sub

    def add_parser(self, name: str, *, help: str, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs.setdefault("description", help)
        return self._sub.add_parser(name, help=COMMANDS.get(name) or MAINTAINER_COMMANDS[name], **kwargs)


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
            return common.interrupted(stop)
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
