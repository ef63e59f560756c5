"""Numbers over seeds, and claims decided on paired seeds.

A seed fixes the stream order, the corruption draws and every random choice of the methods, so
under one seed every method sees the same stream: two methods are compared seed by seed
(paired), never one mean against another. A number is shown as its mean over the seeds with
the smallest and largest value beside it (:class:`Spread`), a rank as the range of the ranks
over the seeds (``2nd–6th``), an order against another by Kendall's τ_b per seed. Claims are
decided by :mod:`stamplib.evidence.statistics`, over replicates.

Values per seed are plain mappings ``{seed: value}`` (:data:`BySeed`); a seed whose value is
missing or NaN takes no part.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

BySeed = Mapping[int, float]



def present(values: BySeed) -> dict[int, float]:
    """``values`` without the seeds whose value is missing (None or NaN), by seed."""
    return {int(s): float(v) for s, v in sorted(values.items()) if v is not None and not math.isnan(float(v))}


def seeds_text(seeds: Iterable[int]) -> str:
    """``seed 0``, ``seeds 0–2`` (consecutive), ``seeds 0 and 2``, ``seeds 0, 2 and 5``."""
    ordered = sorted(set(seeds))
    if not ordered:
        return "no seed"
    if len(ordered) == 1:
        return f"seed {ordered[0]}"
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"seeds {ordered[0]}–{ordered[-1]}"
    return "seeds " + ", ".join(map(str, ordered[:-1])) + f" and {ordered[-1]}"


@dataclass(frozen=True)
class Spread:
    """A number over seeds: its mean, smallest and largest value, and the seeds behind it."""

    mean: float
    low: float
    high: float
    seeds: tuple[int, ...]

    @classmethod
    def of(cls, values: BySeed) -> Spread:
        found = present(values)
        if not found:
            return cls(math.nan, math.nan, math.nan, ())
        numbers = list(found.values())
        return cls(float(np.mean(numbers)), min(numbers), max(numbers), tuple(found))

    def text(self, digits: int = 1) -> str:
        """``63.7`` from one seed, ``65.0 (59.6–71.7)`` (mean, then min–max) from several; ``—``
        from none. A negative bound reads ``-8.6 (-13.2 to -0.5)``: a dash beside a minus misleads."""
        if not self.seeds:
            return "—"
        if len(self.seeds) == 1:
            return f"{self.mean:.{digits}f}"
        between = " to " if self.low < 0 else "–"
        return f"{self.mean:.{digits}f} ({self.low:.{digits}f}{between}{self.high:.{digits}f})"


def paired(*values: BySeed) -> tuple[int, ...]:
    """The seeds every one of ``values`` has a number for, in order."""
    if not values:
        return ()
    common = set(present(values[0]))
    for other in values[1:]:
        common &= set(present(other))
    return tuple(sorted(common))


def table_values(table: pd.DataFrame, metric: str, methods: Iterable[str] | None = None) -> dict[str, dict[int, float]]:
    """``metric``'s value under each seed of each method of a table with a ``method`` column
    (:func:`stamplib.report.reproduce.paper_table`'s ``<metric> seeds``; a table without them
    gives ``<metric> ours`` as seed 0's), for ``methods`` (None: every row) that have one."""
    if table.empty:
        return {}
    rows = table.set_index("method")
    column = f"{metric} seeds"
    out = {}
    for m in rows.index if methods is None else methods:
        if m not in rows.index:
            continue
        value = rows.loc[m, column] if column in rows.columns else {0: rows.loc[m, f"{metric} ours"]}
        found = present(value) if isinstance(value, dict) else {}
        if found:
            out[m] = found
    return out


# ------------------------------------------------------------------------------- ranks


def ranks(values: Mapping[str, BySeed], method: str, digits: int = 1) -> dict[int, int]:
    """``method``'s rank among ``values``' methods (1 = best, a tie at ``digits`` decimals shares
    the better place) under each seed that every method has."""
    seeds = paired(*values.values())
    out = {}
    for seed in seeds:
        own = round(float(values[method][seed]), digits)
        out[seed] = 1 + sum(round(float(v[seed]), digits) > own for m, v in values.items() if m != method)
    return out


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, … ``11th``, ``21st``."""
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def rank_text(by_seed: BySeed) -> str:
    """The range of the ranks over the seeds: ``5th``, or ``2nd–6th``; ``—`` without a seed."""
    found = [int(v) for v in present(by_seed).values()]
    if not found:
        return "—"
    low, high = min(found), max(found)
    return ordinal(low) if low == high else f"{ordinal(low)}–{ordinal(high)}"


def tau_b(first: Sequence[float], second: Sequence[float], digits: int = 1) -> float:
    """Kendall's τ_b of two orders of the same items, compared at ``digits`` decimals (NaN
    below two items or for an order that is one tie)."""
    if len(first) < 2:
        return math.nan
    a, b = np.round(np.asarray(first, float), digits), np.round(np.asarray(second, float), digits)
    return float(kendalltau(a, b, variant="b").statistic)


def tau_by_seed(ours: Mapping[str, BySeed], theirs: Mapping[str, float], digits: int = 1) -> dict[int, float]:
    """Kendall's τ_b between ``theirs`` (one number per method: the paper's, say) and ours under
    each seed every one of the methods has, over the methods both have."""
    methods = [m for m in theirs if m in ours and not math.isnan(float(theirs[m]))]
    return {seed: tau_b([theirs[m] for m in methods], [ours[m][seed] for m in methods], digits)
            for seed in paired(*(ours[m] for m in methods))} if methods else {}


def tau_text(by_seed: BySeed) -> str:
    """``+0.26`` from one seed, ``+0.26 / +0.41 / +0.51 (range +0.26 to +0.51)`` per seed from
    several; ``—`` without one."""
    found = present(by_seed)
    if not found:
        return "—"
    texts = [signed(v, 2) for v in found.values()]
    if len(texts) == 1:
        return texts[0]
    return " / ".join(texts) + f" (range {signed(min(found.values()), 2)} to {signed(max(found.values()), 2)})"


def signed(value: float, digits: int) -> str:
    """``+1.25`` or ``-0.50``, always with a sign; a value that rounds to zero reads ``+0.00``, not
    ``-0.00``."""
    return f"{round(value, digits) + 0.0:+.{digits}f}"
