"""The statistics of a claim: small pure functions over arrays, no records, no words.

A claim is judged from ``values`` of shape ``(arms, replicates, corruptions)``: each arm's metric
(ACC, AUROC or H, in points) under each replicate on each corruption. A *replicate* draws every
source of variation the benchmark varies anew (the source network and the stream seed); the
corruptions are the paper's own and stay fixed. ``margin`` maps a tuple of per-arm arrays to the
claim's margin, positive where the claim holds (a lead takes the best other under each replicate).

The estimand is the paper's: the margin of the arms' means over the paper's fifteen corruptions.

* **All fifteen corruptions** (:func:`fixed_set_interval`): the fifteen are the estimand's own,
  not a sample, so only the replicates vary: each replicate's margin of its fifteen-corruption
  means, and a paired t-interval over the replicates on ``n − 1`` degrees of freedom.
* **A subset of them** (:func:`subset_interval`, three of fifteen): the subset is a sample of the
  fifteen without replacement, so its choice adds the delete-one-corruption jackknife variance of
  the estimate times the finite-population factor ``1 − c/C``; Welch–Satterthwaite degrees of
  freedom, and never narrower than the t-interval that holds the subset fixed.

A verdict reads the interval alone (:func:`decide`): *yes* above zero, *no* below, *tie* where every
replicate's margin rounds to zero, otherwise *undecided*, or *smaller than the paper's* where the
paper's own size lies above the interval; a *yes* whose interval lies wholly below the paper's size
reads *yes, smaller than the paper's* (and a *no* wholly above a negative size of the paper's,
*no, smaller than the paper's*). :func:`detectable_margin` says how large a margin the evidence
could have told from zero (exactly 80 % power at α = 0.05, two-sided, from the noncentral t),
:func:`size_relation` where the paper's size lies against the interval. :func:`simulate` draws margins from variance
parts to measure a
rule's coverage and power (the tests' check that the rule is no more conservative than its
estimand needs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
POWER = 0.80
#: The paper averages over these many corruptions (protocol.md §2).
PAPER_CORRUPTIONS = 15

Margin = Callable[[tuple[np.ndarray, ...]], np.ndarray]

YES, NO, TIE, UNDECIDED, SMALLER = "yes", "no", "tie", "undecided", "smaller than the paper's"
#: A decided verdict whose whole interval lies short of the paper's own size (on the paper's side of 0).
YES_SMALLER, NO_SMALLER = f"{YES}, {SMALLER}", f"{NO}, {SMALLER}"
#: Where the paper's size lies against our interval (:func:`size_relation`).
INSIDE, ABOVE, BELOW, OPPOSITE = "inside", "above", "below", "opposite sign"


@dataclass(frozen=True)
class Interval:
    """A margin's estimate and its interval: ``se`` the standard error the interval is built from,
    ``df`` its degrees of freedom, ``detectable`` the smallest margin the evidence could detect
    (:func:`detectable_margin`) and ``finite_population`` the factor the corruption-sampling
    variance was taken with (None where the corruptions are the estimand's own)."""

    estimate: float
    low: float
    high: float
    se: float
    df: float
    detectable: float
    replicates: int
    corruptions: int
    finite_population: float | None = None

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def arm_means(values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each arm's mean over the last axis (the corruptions), one array per arm.

    Args:
        values: ``(..., arms, replicates, corruptions)``.
    Returns:
        A tuple of ``(..., replicates)`` arrays, one per arm, for a margin function.
    """
    means = np.asarray(values, dtype=float).mean(axis=-1)
    return tuple(np.moveaxis(means, -2, 0))


def replicate_margins(values: np.ndarray, margin: Margin) -> np.ndarray:
    """Each replicate's margin of its arms' means over the corruptions.

    Args:
        values: ``(..., arms, replicates, corruptions)``.
        margin: the claim's margin over a tuple of per-arm arrays.
    Returns:
        ``(..., replicates)``: positive where the claim holds under that replicate.
    """
    return np.asarray(margin(arm_means(values)), dtype=float)


def corruption_margins(values: np.ndarray, margin: Margin) -> np.ndarray:
    """The margin on each corruption alone, averaged over the replicates (each replicate's margin
    on that corruption, then their mean): what "k of n corruptions hold" counts.

    Args:
        values: ``(arms, replicates, corruptions)``.
    Returns:
        ``(corruptions,)``.
    """
    values = np.asarray(values, dtype=float)
    per = np.asarray(margin(tuple(values)), dtype=float)  # (replicates, corruptions)
    return per.mean(axis=0)


def t_quantile(df: float | np.ndarray, level: float) -> np.ndarray:
    """Student's t quantile at ``level`` on ``df`` (at least one) degrees of freedom."""
    return stats.t.ppf(level, np.maximum(df, 1.0))


def power(effect: float | np.ndarray, se: float | np.ndarray, df: float | np.ndarray,
          confidence: float = CONFIDENCE) -> np.ndarray:
    """The power of the two-sided t-test at ``1 − confidence`` to tell a true margin ``effect``
    from zero, its estimate having standard error ``se`` on ``df`` degrees of freedom: the chance
    that ``|T| > t_{1−α/2}`` where ``T`` follows the noncentral t with noncentrality ``effect / se``."""
    df = np.maximum(np.asarray(df, dtype=float), 1.0)
    critical = stats.t.ppf(0.5 + confidence / 2, df)
    shift = np.asarray(effect, dtype=float) / np.asarray(se, dtype=float)
    return stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift)


def _noncentrality(df: np.ndarray, confidence: float, power_wanted: float) -> np.ndarray:
    """The noncentrality at which the two-sided test on ``df`` degrees of freedom has
    ``power_wanted``, by bisection (power rises with it): between the normal approximation's
    value and twice the t-quantile sum, which brackets it for every df ≥ 1."""
    low = np.zeros_like(df)
    high = 2.0 * (stats.t.ppf(0.5 + confidence / 2, df) + stats.t.ppf(power_wanted, df)) + 1.0
    for _ in range(60):  # 2^-60 of the bracket: far below the page's 0.1 point
        middle = (low + high) / 2
        short = power(middle, 1.0, df, confidence) < power_wanted
        low, high = np.where(short, middle, low), np.where(short, high, middle)
    return (low + high) / 2


def detectable_margin(se: float | np.ndarray, df: float | np.ndarray, confidence: float = CONFIDENCE,
                      power_wanted: float = POWER) -> np.ndarray:
    """The smallest true margin a two-sided test at ``1 − confidence`` detects with exactly
    ``power_wanted``, given the estimate's standard error ``se`` on ``df`` degrees of freedom: the
    noncentrality of the noncentral t that reaches that power, times ``se`` (the sum
    ``(t_{1−α/2} + t_{power})·se`` understates it by about 5 % on 2 degrees of freedom).

    Returns:
        Points, the scale of ``se``; NaN where ``se`` is NaN.
    """
    se = np.asarray(se, dtype=float)
    df = np.broadcast_to(np.maximum(np.asarray(df, dtype=float), 1.0), np.broadcast_shapes(np.shape(se), np.shape(df)))
    unique, index = np.unique(df, return_inverse=True)  # one bisection per distinct df
    found = _noncentrality(unique, confidence, power_wanted)[index].reshape(df.shape) * se
    return found if found.ndim else found[()]


def _interval(estimate: np.ndarray, se: np.ndarray, df: np.ndarray, half: np.ndarray, n: int, c: int,
              factor: float | None) -> Interval | np.ndarray:
    """``se`` and ``df``: the estimate's standard error from the variance (never a floor on the
    half width) and its degrees of freedom, which the detectable margin is computed from."""
    detectable = detectable_margin(se, df)
    if np.ndim(estimate) == 0:
        return Interval(float(estimate), float(estimate - half), float(estimate + half), float(se), float(df),
                        float(detectable), n, c, factor)
    return np.stack([estimate, estimate - half, estimate + half, detectable])


def fixed_set_interval(values: np.ndarray, margin: Margin, confidence: float = CONFIDENCE) -> Any:
    """The paired t-interval over replicates of each replicate's margin of its corruption-mean
    arms, the corruptions held fixed (they are the estimand's own).

    Args:
        values: ``(..., arms, replicates, corruptions)``; leading axes are independent draws.
        margin: the claim's margin.
        confidence: the interval's level.
    Returns:
        An :class:`Interval` for a single draw; for leading axes, an array ``(4, ...)`` of
        estimate, low, high and detectable margin.
    """
    per = replicate_margins(values, margin)
    n, c = per.shape[-1], np.shape(values)[-1]
    assert n >= 2, "an interval over replicates needs at least two"
    estimate = per.mean(axis=-1)
    se = per.std(axis=-1, ddof=1) / np.sqrt(n)
    df = np.full_like(estimate, n - 1.0)
    half = t_quantile(df, 0.5 + confidence / 2) * se
    return _interval(estimate, se, df, half, n, c, None)


def jackknife_variance(values: np.ndarray, margin: Margin) -> np.ndarray:
    """The delete-one-corruption jackknife variance of the mean over replicates of the replicate
    margins (each replicate's arms averaged over the corruptions left, so that a lead's maximum
    stays the maximum of means).

    Args:
        values: ``(..., arms, replicates, corruptions)`` with at least two corruptions.
    Returns:
        ``(...)``.
    """
    values = np.asarray(values, dtype=float)
    c = values.shape[-1]
    assert c >= 2, "a jackknife over corruptions needs at least two"
    total = values.sum(axis=-1, keepdims=True)
    left_out = np.moveaxis((total - values) / (c - 1), -1, 0)  # (C, ..., arms, replicates)
    estimates = np.stack([np.asarray(margin(tuple(np.moveaxis(left_out[k], -2, 0))), dtype=float).mean(axis=-1)
                          for k in range(c)])
    return (c - 1) / c * ((estimates - estimates.mean(axis=0)) ** 2).sum(axis=0)


def subset_interval(values: np.ndarray, margin: Margin, population: int = PAPER_CORRUPTIONS,
                    confidence: float = CONFIDENCE) -> Any:
    """The interval of the margin over all ``population`` corruptions from a subset of them: the
    replicates' variance plus the jackknife variance over the subset's corruptions times the
    finite-population factor ``1 − c/population``, on Welch–Satterthwaite degrees of freedom, and
    never narrower than :func:`fixed_set_interval` (which holds the subset fixed).

    Args:
        values: ``(..., arms, replicates, corruptions)``, ``corruptions`` < ``population``.
        margin: the claim's margin.
        population: how many corruptions the estimand averages (the paper's fifteen).
        confidence: the interval's level.
    Returns:
        As :func:`fixed_set_interval`.
    """
    per = replicate_margins(values, margin)
    n, c = per.shape[-1], np.shape(values)[-1]
    assert n >= 2 and 2 <= c < population, (n, c, population)
    factor = 1.0 - c / population
    estimate = per.mean(axis=-1)
    v_replicates = per.var(axis=-1, ddof=1) / n
    v_corruptions = factor * jackknife_variance(values, margin)
    variance = v_replicates + v_corruptions
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = v_replicates ** 2 / (n - 1) + v_corruptions ** 2 / (c - 1)
        df = np.where(terms > 0, variance ** 2 / np.where(terms > 0, terms, 1.0), n - 1.0)
    level = 0.5 + confidence / 2
    se = np.sqrt(variance)
    half = np.maximum(t_quantile(df, level) * se, t_quantile(n - 1.0, level) * np.sqrt(v_replicates))
    return _interval(estimate, se, df, half, n, c, factor)


def interval(values: np.ndarray, margin: Margin, population: int = PAPER_CORRUPTIONS,
             confidence: float = CONFIDENCE) -> Any:
    """:func:`fixed_set_interval` over all ``population`` corruptions, :func:`subset_interval` over
    fewer (one corruption alone has no spread to sample: it is held fixed)."""
    c = np.shape(values)[-1]
    if c >= population or c < 2:
        return fixed_set_interval(values, margin, confidence)
    return subset_interval(values, margin, population, confidence)


def size_relation(size: float | None, low: float, high: float) -> str:
    """Where the paper's ``size`` of the margin lies against our interval ``[low, high]``:
    ``inside``, ``above`` (larger than anything the interval allows), ``below``, or ``opposite
    sign`` (the interval lies wholly on the other side of zero); empty where the paper gives no size."""
    if size is None or np.isnan(size):
        return ""
    if (size > 0 and high < 0) or (size < 0 and low > 0):
        return OPPOSITE
    if size > high:
        return ABOVE
    if size < low:
        return BELOW
    return INSIDE


def all_tied(replicate_margin: np.ndarray, digits: int = 1) -> bool:
    """Whether every replicate's margin rounds to zero at ``digits`` decimals."""
    return bool(np.all(np.round(np.asarray(replicate_margin, dtype=float), digits) == 0))


def decide(low: float, high: float, tied: bool, paper_size: float | None) -> str:
    """The verdict from the interval alone: *tie* where every replicate ties, *yes* above zero
    (*yes, smaller than the paper's* where the paper's size lies above the whole interval), *no*
    below (*no, smaller than the paper's* where the paper's negative size lies below it), *smaller
    than the paper's* where zero fits and the paper's size lies above the interval, else
    *undecided*. ``paper_size``: None where the paper's size may not set the word (it has none, or
    measured it on another data set)."""
    if tied:
        return TIE
    relation = size_relation(paper_size, low, high)
    if low > 0:
        return YES_SMALLER if relation == ABOVE else YES
    if high < 0:
        return NO_SMALLER if relation == BELOW and paper_size is not None and paper_size < 0 else NO
    if relation in (ABOVE, OPPOSITE):
        return SMALLER
    return UNDECIDED


def variance_parts(margins: np.ndarray) -> dict[str, float]:
    """The two-way (replicates × corruptions) variance parts of a margin table, from the ANOVA
    mean squares (negative estimates floored at zero).

    Args:
        margins: ``(replicates, corruptions)``, each cell one replicate's margin on one corruption.
    Returns:
        Standard deviations ``replicate``, ``corruption`` and ``interaction`` (points).
    """
    m = np.asarray(margins, dtype=float)
    n, c = m.shape
    grand = m.mean()
    rows, cols = m.mean(axis=1), m.mean(axis=0)
    ms_rows = c * ((rows - grand) ** 2).sum() / (n - 1)
    ms_cols = n * ((cols - grand) ** 2).sum() / (c - 1)
    resid = m - rows[:, None] - cols[None, :] + grand
    ms_e = (resid ** 2).sum() / ((n - 1) * (c - 1))
    return {"replicate": float(np.sqrt(max(ms_rows - ms_e, 0.0) / c)),
            "corruption": float(np.sqrt(max(ms_cols - ms_e, 0.0) / n)),
            "interaction": float(np.sqrt(ms_e))}


@dataclass(frozen=True)
class Simulated:
    """A rule's behaviour over simulated draws: how often its interval covers the true margin,
    and how often it reads *yes* and *no*."""

    coverage: float
    yes: float
    no: float


def simulate(parts: dict[str, float], replicates: int, effect: float, draws: int, rng: np.random.Generator,
             corruptions: int = PAPER_CORRUPTIONS, subset: int | None = None,
             rule: Callable[..., Any] = interval) -> Simulated:
    """Margins drawn from variance ``parts`` (standard deviations ``replicate``, ``corruption``,
    ``interaction``) around a true margin ``effect`` over ``corruptions`` fixed corruptions (drawn
    once per draw, centred so that their mean margin is ``effect``), judged by ``rule`` on all of
    them or on a random ``subset`` of them (drawn without replacement).

    A margin here is one arm's difference (the linear case: two arms, the second all zero).
    Returns:
        :class:`Simulated` over ``draws`` draws.
    """
    corruption_effects = rng.normal(0.0, parts["corruption"], (draws, corruptions))
    corruption_effects -= corruption_effects.mean(axis=1, keepdims=True)
    m = (effect + corruption_effects[:, None, :]
         + rng.normal(0.0, parts["replicate"], (draws, replicates, 1))
         + rng.normal(0.0, parts["interaction"], (draws, replicates, corruptions)))
    if subset is not None:
        picks = np.argsort(rng.random((draws, corruptions)), axis=1)[:, :subset]
        m = np.take_along_axis(m, picks[:, None, :].repeat(replicates, axis=1), axis=2)
    values = np.stack([m, np.zeros_like(m)], axis=1)  # (draws, arms=2, replicates, corruptions)
    result = rule(values, lambda arms: arms[0] - arms[1], corruptions)
    _, low, high, _ = result
    return Simulated(float(np.mean((low <= effect) & (effect <= high))), float(np.mean(low > 0)),
                     float(np.mean(high < 0)))
