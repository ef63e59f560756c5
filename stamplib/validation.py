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
from collections.abc import Iterable, Sequence


def literal_or_text(text: str) -> object:
    """A command-line or notebook value: the Python literal it spells (``0.001``, ``True``,
    ``'a'``), else the text itself (``crop_flip``)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


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


def check_seed(seed: object) -> int:
    if not is_int(seed) or int(seed) < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
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


def check_device(device: str) -> str:
    """``cpu`` or ``cuda`` (the latter only where torch sees a GPU)."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("device='cuda' but torch sees no GPU; use device='cpu'")
    return device
