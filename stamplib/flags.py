"""The flags the command lines share, declared once: ``--data-root``, ``--device``,
``--results``, ``--profile`` and ``NAME=VALUE`` parameters (``--set``, ``--param``, ``--stream``).

Every command of ``python -m stamplib`` (and ``python -m stamplib.data.downloads`` and
``…outlier_c``) declares them through :func:`add`, so they take the same choices and read
their values one way everywhere:

* a device is ``cpu``, ``cuda`` or ``cuda:N`` (:func:`stamplib.paths.parse_device`; whether this
  machine has it is the run context's check, which a dry run skips);
* a ``NAME=VALUE`` value is the Python literal it spells (``0.001``, ``True``, ``(1, 2)``,
  ``0,1,2`` → a tuple), else the text itself (``crop_flip``, ``false``); the field it names then
  types it (:func:`stamplib.validation.coerce`). A number must be finite: the parser refuses
  ``lr=1e400`` (inf) and ``lr=nan``, as ``tune --grid lr=0.1,1e400``;
* a results folder that will be written is tried before anything is computed (:func:`writable`).

A bad value is refused by the parser, so :class:`Parser` makes every parse error one line.
"""

from __future__ import annotations

import argparse
import math
import numbers
import tempfile
from pathlib import Path
from typing import Any

from stamplib import paths
from stamplib.validation import check_seed, literal_or_text

PROFILES = ("smoke", "quick", "full")

_HELP = {
    "data_root": "folder with the data sets (default: $STAMPLIB_DATA_ROOT, else the user data folder)",
    "device": "cpu, cuda or cuda:N",
    "results": "results folder (default: $STAMPLIB_RESULTS, else results/ of the checkout)",
    "profile": "how much to compute: " + ", ".join(PROFILES),
}


class UsageError(ValueError):
    """A command line the parser refuses: one line, exit code 2 (``stamplib.cli.main``)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one :class:`UsageError` naming the command's
    ``--help``, not argparse's usage block and exit: the command line's one-line rule for bad
    input holds for a misspelt flag as for a misspelt method. Subcommands' parsers are of this
    class too (argparse makes them of the parent's)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def read_device(text: str) -> str:
    """``--device``'s reading: :func:`stamplib.paths.parse_device`."""
    try:
        return paths.parse_device(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def read_seed(text: str) -> int:
    """``--seed``'s reading: a whole number in the range :func:`stamplib.validation.check_seed`
    allows (a huge one is refused here, not by the random generator it would seed)."""
    try:
        value: object = int(text)
    except ValueError:
        value = text  # not a whole number: check_seed says so
    try:
        return check_seed(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def read_positive(flag: str, kind: type = int, least: float = 1) -> Any:
    """A reading of a count or an amount (``--time-min``, ``--mem-gb``, ``--cpus-per-task``): a
    finite ``kind`` of at least ``least``; anything else (``-1``, ``nan``, ``inf``) is refused here,
    not handed to SLURM."""

    def read(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < least:
            raise argparse.ArgumentTypeError(f"{flag} must be a {'whole ' if kind is int else ''}number of at least "
                                             f"{least:g}, got {text!r}")
        return value

    return read


#: The most numbers a list of replicates or seeds may name (``0-4,7``): far more than any design
#: holds, and few enough that the list is made at once.
MOST_NUMBERS = 10_000


def read_number_list(flag: str) -> Any:
    """``--replicates``' and ``--seeds``' reading: the text as given (the benchmark parses it),
    refused here when its ranges name more than :data:`MOST_NUMBERS` numbers, before a list of
    them is made (``0-9999999999`` would fill the memory first)."""

    def read(text: str) -> str:
        count = 0
        for part in (p.strip() for p in text.split(",") if p.strip()):
            low, _, high = part.partition("-")
            try:
                first, last = int(low), int(high or low)
            except ValueError:
                continue  # not a number: the benchmark's parser says what it expects
            count += max(0, last - first + 1)
            if count > MOST_NUMBERS:
                raise argparse.ArgumentTypeError(f"{flag} {text!r} names more than {MOST_NUMBERS:,} numbers: give "
                                                 "the few a design holds, e.g. 0-4")
        return text

    return read


def is_finite(value: Any) -> bool:
    """False for a number, or text that spells one, that is not finite (``inf``, ``nan``,
    ``1e400``, an integer too large for a float), in a tuple or list too; True for anything
    else (text that is no number is the field's type to judge)."""
    if isinstance(value, (tuple, list)):
        return all(map(is_finite, value))
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return True
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return True
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _read_value(name: str, text: str) -> Any:
    """A ``NAME=VALUE`` value: the literal ``text`` spells, else ``text``
    (:func:`stamplib.validation.literal_or_text`); a number that is not finite is refused, as no
    run can use it."""
    value = literal_or_text(text)
    if not is_finite(value):
        raise argparse.ArgumentTypeError(f"{name}={text} is not a finite number: give a finite value (e.g. lr=0.001)")
    return value


def read_pair(text: str) -> tuple[str, Any]:
    """One ``NAME=VALUE``: the name and the value read as the module docstring says."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r} (e.g. --set lr=0.001, "
                                         "--param seeds=0,1,2)")
    name = name.strip()
    return name, _read_value(name, value.strip())


def read_grid_dimension(text: str) -> str:
    """One ``NAME=V1,V2,...`` of ``tune --grid``, as given (``stamplib.experiments.tune`` types
    it), once each value is finite where it is a number."""
    name, equals, values = text.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,..., got {text!r} (e.g. --grid lr=0.01,0.05)")
    for value in values.split(","):
        _read_value(name.strip(), value.strip())
    return text


def read_folder(flag: str) -> Any:
    """The reading of a folder flag (``--results``, ``--data-root``): the text as given, unless it
    is empty, which names no folder (left out, the flag has its default; given empty, it would
    silently become that default)."""

    def read(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{flag} names no folder (got {text!r}): give a folder, or leave "
                                             f"{flag} out for the default")
        return text

    return read


def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    """The ``NAME=VALUE`` options of one flag as a dict; a name given twice is an error (which
    of the two was meant is not ours to guess)."""
    named: dict[str, Any] = {}
    for name, value in items:
        if name in named and named[name] != value:
            raise ValueError(f"{name} given twice ({named[name]!r} and {value!r}): give it once")
        named[name] = value
    return named


def add_pairs(parser: Any, flag: str, help: str) -> None:
    """A repeatable ``NAME=VALUE`` flag (``--set``, ``--param``, ``--stream``) on ``parser`` (a
    parser or one of its argument groups), read by :func:`read_pair`; :func:`pairs` makes the
    dict."""
    parser.add_argument(flag, action="append", default=[], type=read_pair, metavar="NAME=VALUE", help=help)


def add(parser: argparse.ArgumentParser, *, data_root: bool | str = False, device: bool | str = False,
        results: bool | str = False, profile: bool | str = False, profile_default: str = "quick",
        profiles: tuple[str, ...] = PROFILES) -> None:
    """Declare the shared flags a command takes: each keyword is False (the command has no such
    flag), True (the flag with its usual help) or the help text the command gives it. Defaults
    are None (the run context's own: the environment's, else the usual place), ``cpu`` and
    ``profile_default``."""
    def text(given: bool | str, key: str) -> str:
        return given if isinstance(given, str) else _HELP[key]

    if profile:
        parser.add_argument("--profile", default=profile_default, choices=profiles, help=text(profile, "profile"))
    if data_root:
        parser.add_argument("--data-root", default=None, metavar="DIR", type=read_folder("--data-root"),
                            help=text(data_root, "data_root"))
    if device:
        parser.add_argument("--device", default="cpu", type=read_device, help=text(device, "device"))
    if results:
        parser.add_argument("--results", default=None, metavar="DIR", type=read_folder("--results"),
                            help=text(results, "results"))


def writable(folder: Path, flag: str = "--results") -> Path:
    """``folder``, created if need be, once a file has been written in it and removed; else one
    ValueError that says what to do. Called at the edge, before a cell is computed, so that a
    folder the run cannot write costs nothing."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ValueError(f"cannot write to the results folder {folder} ({err.strerror or err}): give {flag} a "
                         "folder you can write to") from None
    return folder
