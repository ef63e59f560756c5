"""The statistics of a claim on made-up arrays: a fixed set of corruptions and a subset, the
finite-population factor, the detectable margin, each size relation, each verdict, and the rule's
coverage and power in simulation with the variance parts measured from the committed records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from stamplib.evidence import benchmarks, judge, ledger
from stamplib.evidence import statistics as S
from stamplib.evidence.pages import RecordsSnapshot

REPO = Path(__file__).resolve().parents[2]


def diff(arms):  # noqa: ANN001, ANN201 - a margin function: the first arm minus the second
    return arms[0] - arms[1]


def _values(margins: np.ndarray) -> np.ndarray:
    """(replicates, corruptions) margins as two arms, the second all 70."""
    base = np.full_like(margins, 70.0)
    return np.stack([base + margins, base])


def test_the_fixed_set_interval_is_the_paired_t_interval_over_replicates() -> None:
    rng = np.random.default_rng(0)
    margins = rng.normal(2.0, 3.0, (5, 15))
    found = S.fixed_set_interval(_values(margins), diff)
    per = margins.mean(axis=1)
    low, high = stats.t.interval(0.95, 4, loc=per.mean(), scale=per.std(ddof=1) / np.sqrt(5))
    assert (found.estimate, found.low, found.high) == pytest.approx((per.mean(), low, high))
    assert found.df == 4 and found.finite_population is None and found.corruptions == 15
    # The spread between corruptions does not enter: the fifteen are the estimand's own.
    shifted = margins + np.linspace(-20, 20, 15)[None, :]
    again = S.fixed_set_interval(_values(shifted), diff)
    assert again.half_width == pytest.approx(found.half_width)


def test_a_subset_adds_the_corruption_sampling_variance_with_the_finite_population_factor() -> None:
    rng = np.random.default_rng(1)
    margins = rng.normal(1.0, 1.0, (3, 3)) + np.array([-6.0, 0.0, 6.0])[None, :]
    found = S.subset_interval(_values(margins), diff, population=15)
    per = margins.mean(axis=1)
    v_rep = per.var(ddof=1) / 3
    corruption_means = margins.mean(axis=0)
    v_corr = (1 - 3 / 15) * corruption_means.var(ddof=1) / 3  # the jackknife of a mean is its plain variance
    df = (v_rep + v_corr) ** 2 / (v_rep ** 2 / 2 + v_corr ** 2 / 2)
    half = stats.t.ppf(0.975, df) * np.sqrt(v_rep + v_corr)
    assert found.finite_population == pytest.approx(0.8)
    assert (found.low, found.high) == pytest.approx((per.mean() - half, per.mean() + half))
    assert found.half_width >= S.fixed_set_interval(_values(margins), diff).half_width
    assert S.jackknife_variance(_values(margins), diff) == pytest.approx(corruption_means.var(ddof=1) / 3)
    # All of the population sampled leaves no sampling variance: the factor is zero at c = C.
    assert S.interval(_values(margins), diff, population=3).finite_population is None


def test_a_subset_interval_is_never_narrower_than_holding_the_subset_fixed() -> None:
    # Replicates and corruptions that spread equally: Satterthwaite's degrees of freedom grow, and
    # alone they would narrow the interval below the fixed-subset t-interval.
    margins = np.array([[0.0, 3.0, -3.0], [3.0, 6.0, 0.0], [-3.0, 0.0, -6.0]]) + 1.0
    found = S.subset_interval(_values(margins), diff, population=15)
    fixed = S.fixed_set_interval(_values(margins), diff)
    assert found.half_width >= fixed.half_width - 1e-12


def test_the_detectable_margin_is_where_the_noncentral_t_gives_power_080() -> None:
    # Far from few degrees of freedom it is the normal's z_0.975 + z_0.80.
    assert S.detectable_margin(1.0, 1e6) == pytest.approx(1.95996 + 0.84162, abs=1e-3)
    for df in (2, 4, 14):
        found = S.detectable_margin(2.0, df)
        assert S.power(found, 2.0, df) == pytest.approx(0.80, abs=1e-9)
    # The t-quantile sum understates it: the exact answer is 5.4 % above it on 2 degrees of freedom, 1.2 % on 4.
    for df, under in ((2, 0.054), (4, 0.012)):
        approx = stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)
        assert S.detectable_margin(1.0, df) / approx - 1 == pytest.approx(under, abs=0.001)
    found = S.fixed_set_interval(_values(np.random.default_rng(2).normal(0, 4, (5, 15))), diff)
    assert found.detectable == pytest.approx(S.detectable_margin(found.se, found.df))


@pytest.mark.parametrize("replicates", [3, 5])
def test_the_detectable_margin_is_detected_with_power_080_in_simulation(replicates: int) -> None:
    # Replicate margins drawn around the detectable margin of their own standard error: the
    # two-sided paired t-test rejects zero in 80 % ± 2 % of 40,000 draws.
    rng = np.random.default_rng(11)
    sd = 3.0
    effect = float(S.detectable_margin(sd / np.sqrt(replicates), replicates - 1))
    draws = rng.normal(effect, sd, (40_000, replicates))
    t = draws.mean(axis=1) / (draws.std(axis=1, ddof=1) / np.sqrt(replicates))
    rejected = np.abs(t) > stats.t.ppf(0.975, replicates - 1)
    assert rejected.mean() == pytest.approx(0.80, abs=0.02)


def test_the_detectable_margin_comes_from_the_variance_not_the_intervals_floor() -> None:
    # Equal spread between replicates and corruptions: the interval's floor (the t-interval that
    # holds the three fixed) binds, yet the detectable margin is the variance's.
    margins = np.array([[0.0, 3.0, -3.0], [3.0, 6.0, 0.0], [-3.0, 0.0, -6.0]]) + 1.0
    found = S.subset_interval(_values(margins), diff, population=15)
    per = margins.mean(axis=1)
    v_rep = per.var(ddof=1) / 3
    v_corr = (1 - 3 / 15) * margins.mean(axis=0).var(ddof=1) / 3
    assert found.half_width > stats.t.ppf(0.975, found.df) * np.sqrt(v_rep + v_corr) + 1e-9  # the floor binds
    assert found.se == pytest.approx(np.sqrt(v_rep + v_corr))
    assert found.detectable == pytest.approx(S.detectable_margin(np.sqrt(v_rep + v_corr), found.df))


@pytest.mark.parametrize(("size", "relation"), [(2.0, S.INSIDE), (9.0, S.ABOVE), (-2.0, S.BELOW), (None, "")])
def test_each_size_relation(size: float | None, relation: str) -> None:
    assert S.size_relation(size, -1.0, 5.0) == relation


def test_the_opposite_sign() -> None:
    assert S.size_relation(4.5, -9.0, -1.0) == S.OPPOSITE
    assert S.size_relation(-4.5, 1.0, 9.0) == S.OPPOSITE
    assert S.size_relation(4.5, 1.0, 9.0) == S.INSIDE


@pytest.mark.parametrize(("low", "high", "tied", "paper", "word"), [
    (0.5, 5.0, False, 4.5, S.YES), (-3.0, -0.2, False, 4.5, S.NO), (-0.1, 0.1, True, 4.5, S.TIE),
    (-1.0, 3.0, False, 4.5, S.SMALLER), (-1.0, 6.0, False, 4.5, S.UNDECIDED), (-1.0, 3.0, False, None, S.UNDECIDED),
    # a decided verdict whose whole interval lies short of the paper's size says so
    (0.9, 1.5, False, 4.5, S.YES_SMALLER), (0.9, 1.5, False, None, S.YES), (0.9, 5.0, False, 4.5, S.YES),
    (-1.5, -0.9, False, -4.5, S.NO_SMALLER), (-1.5, -0.9, False, 4.5, S.NO), (-5.0, -0.9, False, -4.5, S.NO),
])
def test_each_verdict_comes_from_the_interval_alone(low: float, high: float, tied: bool, paper: float | None,
                                                    word: str) -> None:
    assert S.decide(low, high, tied, paper) == word


def test_variance_parts_recover_what_made_the_table() -> None:
    rng = np.random.default_rng(3)
    table = (rng.normal(0, 4.0, (400, 1)) + rng.normal(0, 9.0, (1, 15)) + rng.normal(0, 12.0, (400, 15)))
    parts = S.variance_parts(table)
    assert parts["replicate"] == pytest.approx(4.0, rel=0.15)
    assert parts["interaction"] == pytest.approx(12.0, rel=0.05)
    assert parts["corruption"] == pytest.approx(9.0, rel=0.45)  # 15 corruptions: a rough estimate


def measured_parts() -> dict[str, float]:
    """The variance parts of STAMP's H lead with Noise outliers (``a_best_h``) in the committed
    built-in records: the five networks' design once three of its networks have the cells (its
    replicate part then holds the networks' spread as well as the streams'), else the five streams'."""
    store = RecordsSnapshot(REPO / "results" / "builtin_benchmark")
    claim = ledger.BY_KEY["a_best_h"]
    parts = {}
    for name in ("streams", "networks"):
        verdict = judge.judge(claim, benchmarks.BUILTIN.design(name), store.records_by_key())
        if verdict.table is not None and len(verdict.margins) >= 3:
            per = np.asarray(judge.margin_function(claim)(tuple(verdict.table)))  # (replicates, corruptions)
            parts[name] = S.variance_parts(per)
    assert "streams" in parts, "the committed built-in records decide a_best_h over five streams"
    return parts.get("networks", parts["streams"])


@pytest.fixture(scope="module")
def parts() -> dict[str, float]:
    return measured_parts()


@pytest.mark.parametrize("replicates", [3, 5, 10])
@pytest.mark.parametrize("subset", [None, 3])
def test_a_null_effect_is_covered_and_rarely_read_yes(parts: dict[str, float], replicates: int,
                                                      subset: int | None) -> None:
    """2,000 made-up benchmarks, the true margin over the paper's fifteen corruptions zero: the
    interval covers it in at least 93 % of them, and *yes* is read in at most 5 %."""
    found = S.simulate(parts, replicates, 0.0, 2000, np.random.default_rng(70 + replicates), subset=subset)
    assert found.coverage >= 0.93, found
    assert found.yes <= 0.05, found


@pytest.mark.parametrize("replicates", [5, 10])
def test_the_rule_has_the_power_of_a_plain_paired_t_test(parts: dict[str, float], replicates: int,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """At the paper's own H lead (+4.5, Table 1a), the rule's power over the fifteen corruptions is
    within 0.05 of a plain paired t-test's on the same draws (scipy's, one-sided at 2.5 %)."""
    draws, rng = 2000, np.random.default_rng(45 + replicates)
    corruption = rng.normal(0.0, parts["corruption"], (draws, 15))
    corruption -= corruption.mean(axis=1, keepdims=True)
    margins = (4.5 + corruption[:, None, :] + rng.normal(0.0, parts["replicate"], (draws, replicates, 1))
               + rng.normal(0.0, parts["interaction"], (draws, replicates, 15)))
    values = np.stack([70.0 + margins, np.full_like(margins, 70.0)], axis=1)
    _, low, high, _ = S.interval(values, diff)
    words = np.array([S.decide(lo, hi, False, 4.5) for lo, hi in zip(low, high)])
    rule = float(np.mean(words == S.YES))
    test = stats.ttest_1samp(margins.mean(axis=2), 0.0, axis=1, alternative="greater")
    plain = float(np.mean(test.pvalue < 0.025))
    with capsys.disabled():
        print(f"\npower at +4.5 H, {replicates} replicates (parts {parts}): rule {rule:.3f}, plain t {plain:.3f}")
    assert abs(rule - plain) <= 0.05
