"""The checks every layer shares, each with one message that says what to do.

A cell's numbers (severity, outlier ratio, seed, sample counts) and names (a choice from a
list) are refused here, whether they come from a ``RunSpec``, a notebook's parameters or a
stream being built. Nothing here reads a file or imports another stamplib module, so every
layer can use it.
"""

from __future__ import annotations

import ast
import math
import numbers
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any


def literal_or_text(text: str) -> object:
    """A command-line or notebook value: the Python literal it spells (``0.001``, ``True``,
    ``'a'``), else the text itself (``crop_flip``)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "text"}


def describe_type(hint: Any) -> str:
    """A field's type as the messages of :func:`coerce` name it (``one of adaptive, static``)."""
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + ", ".join(map(str, typing.get_args(hint)))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join("none" if a is type(None) else describe_type(a) for a in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        return "a tuple such as (1.0, 2.0)"
    return _KINDS.get(hint, getattr(hint, "__name__", str(hint)))


def coerce(what: str, value: Any, hint: Any) -> Any:
    """``value`` as a field of type ``hint`` holds it: the one rule for every override, a
    method's hyperparameter (``--set``, ``tune --grid``, a plan's overrides) or a stream option.
    Text (a command line, a notebook parameter) is read as the type says: ``"0.1"`` → 0.1,
    ``"true"``/``"false"`` (also 1/0, yes/no, on/off) → a bool, ``"none"`` → None where None is
    allowed, a Literal's choice by its spelling, ``"(1, 2)"`` → a tuple; an int is a float
    field's float. Anything else is one ValueError: ``{what} takes {the type}, got {value}``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    text = value.strip() if isinstance(value, str) else None
    refused = ValueError(f"{what} takes {describe_type(hint)}, got {value!r}")
    if origin is typing.Literal:
        for choice in args:
            if choice == value or (text is not None and str(choice) == text):
                return choice
        raise refused
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and (value is None or (text is not None and text.lower() == "none")):
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return coerce(what, value, option)
            except ValueError:
                continue
        raise refused
    if origin is tuple:
        if text is not None:
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise refused from None
        if not isinstance(value, (list, tuple)):
            raise refused
        element = args[0] if args else Any
        return tuple(coerce(what, v, element) for v in value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise refused
    if hint in (int, float):
        number = None
        if is_int(value) or (hint is float and isinstance(value, numbers.Real) and not isinstance(value, bool)):
            number = hint(value)
        elif text is not None:
            try:
                number = hint(text)
            except ValueError:
                pass
        if number is None:
            raise refused
        if not math.isfinite(number):  # the one rule from Python too (RunSpec.make, explore), as flags.py's parser
            raise ValueError(f"{what} takes a finite number, got {value!r}: give a finite value")
        return number
    if hint is str:
        if text is not None:
            return text
        raise refused
    if text is not None and hint is not Any:
        raise ValueError(f"{what} takes {describe_type(hint)}, which cannot be given as text ({value!r}): set "
                         "it in Python")
    return value


def is_int(value: object) -> bool:
    """An integer, numpy integers included (notebooks compute seeds with numpy); not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_severity(severity: object) -> int:
    if not is_int(severity) or not 1 <= int(severity) <= 5:
        raise ValueError(f"severity must be an integer from 1 to 5 (the paper uses 5), got {severity!r}")
    return int(severity)


def check_outlier_ratio(ratio: object) -> float:
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not 0.0 <= float(ratio) < 1.0:
        raise ValueError(
            f"outlier_ratio is the outliers' share of the stream and must be in [0, 1) (the paper "
            f"uses 0.2), got {ratio!r}"
        )
    return float(ratio)


def check_dirichlet(concentration: object) -> float:
    if isinstance(concentration, bool) or not isinstance(concentration, numbers.Real) or not (
        math.isfinite(float(concentration)) and float(concentration) >= 0.0
    ):
        raise ValueError(
            f"dirichlet is the concentration δ of the label order, a finite number ≥ 0 (0 = i.i.d. order; "
            f"small values such as 0.1 give long runs of one class), got {concentration!r}"
        )
    return float(concentration)


def check_outlier_burst(length: object) -> int:
    if not is_int(length) or int(length) < 0:
        raise ValueError(
            f"outlier_burst is the length of the runs in which outliers arrive, an integer ≥ 0 (0 = "
            f"outliers spread uniformly), got {length!r}"
        )
    return int(length)


def check_relative_speed(speed: object) -> int:
    if not is_int(speed) or int(speed) < 0:
        raise ValueError(
            f"relative_speed is C(g) of the realistic protocol, an integer ≥ 1 (the method adapts on every "
            f"C-th batch), or 0 to measure it in the run, got {speed!r}"
        )
    return int(speed)


def check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} is True or False, got {value!r}")
    return value


#: The largest seed. A seed seeds torch generators (at most 2**64 - 1, and a stream adds an
#: offset to it: ``stamplib.data.streams``) and numpy generators (any size), and is a column of
#: the records' DataFrames (int64): 2**63 - 1 leaves room for the offsets and fits the column.
MAX_SEED = 2**63 - 1


def check_seed(seed: object) -> int:
    if not is_int(seed) or not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"seed must be a non-negative integer up to 2**63 - 1 ({MAX_SEED}), got {seed!r}")
    return int(seed)


def check_positive_int(name: str, value: object, hint: str = "") -> int:
    """``value`` as an int ≥ 1; ``hint`` (e.g. "the paper uses 64") goes into the message."""
    if not is_int(value) or int(value) < 1:
        raise ValueError(f"{name} must be a positive integer{f' ({hint})' if hint else ''}, got {value!r}")
    return int(value)


def check_choice(what: str, value: str, valid: Iterable[str], also: str = "") -> str:
    """``value`` if it is in ``valid``; else a ValueError listing them (``also``: other accepted
    spellings such as "npz:/path.npz", named in the message only)."""
    choices = list(valid)
    if value not in choices:
        more = f", {also}" if also else ""
        raise ValueError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}{more}")
    return value


def check_choices(what: str, values: Sequence[str], valid: Iterable[str], also: str = "") -> tuple[str, ...]:
    """Every item of ``values`` in ``valid``; one message naming all the bad ones."""
    choices = list(valid)
    bad = [v for v in values if v not in choices]
    if bad:
        more = f", {also}" if also else ""
        raise ValueError(f"unknown {what}(s) {', '.join(map(repr, bad))}; choose from {', '.join(choices)}{more}")
    return tuple(values)
