"""The metrics (protocol.md §2): hand-computed cases, and properties (hypothesis): AUROC
invariances, H-score bounds, accuracy over ID rows only, per-metric aggregation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stamplib.evaluation import metrics
from stamplib.evaluation.metrics import aggregate

FAST = settings(max_examples=40, deadline=None, database=None)


# --------------------------------------------------------------------------- hand-computed
def test_accuracy_ignores_outliers():
    preds = torch.tensor([0, 1, 2, 0, 1])
    labels = torch.tensor([0, 1, 1, -1, -1])
    assert metrics.accuracy(preds, labels) == pytest.approx(200 / 3)


def test_auroc_cases():
    is_out = torch.tensor([False, False, True, True])
    assert metrics.auroc(torch.tensor([0.1, 0.2, 0.8, 0.9]), is_out) == 100.0
    assert metrics.auroc(torch.tensor([0.9, 0.8, 0.2, 0.1]), is_out) == 0.0
    assert metrics.auroc(torch.tensor([0.5, 0.5, 0.5, 0.5]), is_out) == 50.0
    # one of four (ID, outlier) pairs misordered -> 75 %
    assert metrics.auroc(torch.tensor([0.1, 0.6, 0.5, 0.9]), is_out) == 75.0
    assert torch.isnan(torch.tensor(metrics.auroc(torch.rand(4), torch.zeros(4, dtype=torch.bool))))


def test_h_score_and_aggregation_average_per_corruption_h():
    assert metrics.h_score(60.0, 80.0) == pytest.approx(2 * 60 * 80 / 140)
    assert metrics.h_score(0.0, 0.0) == 0.0
    rows = {"a": {"acc": 90.0, "auroc": 50.0, "h": metrics.h_score(90, 50)},
            "b": {"acc": 30.0, "auroc": 90.0, "h": metrics.h_score(30, 90)}}
    mean = metrics.aggregate(rows)
    assert mean["acc"] == 60.0 and mean["auroc"] == 70.0
    assert mean["h"] == pytest.approx((metrics.h_score(90, 50) + metrics.h_score(30, 90)) / 2)
    assert mean["h"] < metrics.h_score(60.0, 70.0)  # not H of the means



# --------------------------------------------------------------------------- streams


# --------------------------------------------------------------------------- AUROC


@st.composite
def scored(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor]:
    """Integer-valued scores (ties included) and labels with both kinds present."""
    n = draw(st.integers(2, 60))
    scores = draw(st.lists(st.integers(-50, 50), min_size=n, max_size=n))
    is_out = draw(st.lists(st.booleans(), min_size=n, max_size=n).filter(lambda v: 0 < sum(v) < len(v)))
    return torch.tensor(scores, dtype=torch.float64), torch.tensor(is_out)


@FAST
@given(data=scored(), scale=st.floats(0.01, 100.0), shift=st.floats(-1e3, 1e3))
def test_auroc_is_invariant_to_increasing_transforms(data: tuple, scale: float, shift: float) -> None:
    s, y = data
    base = metrics.auroc(s, y)
    assert 0.0 <= base <= 100.0
    # Strictly increasing maps of integer scores in [-50, 50] keep every order and every tie.
    # Each map is applied to the distinct values once: a vectorised kernel may round an element
    # in its SIMD body and an equal one in its scalar tail differently, which would break a tie.
    values, where = s.unique(return_inverse=True)
    for f in (lambda v: v * scale + shift, lambda v: v**3 + v, lambda v: torch.exp(v / 10),
              lambda v: torch.sigmoid(v / 60)):
        mapped = f(values)
        assert (mapped.diff() > 0).all()  # still strictly increasing after rounding
        assert metrics.auroc(mapped[where], y) == pytest.approx(base, abs=1e-9)


@FAST
@given(data=scored())
def test_auroc_flips_with_the_score_sign(data: tuple) -> None:
    s, y = data
    assert metrics.auroc(-s, y) == pytest.approx(100.0 - metrics.auroc(s, y), abs=1e-9)


@FAST
@given(data=scored(), seed=st.integers(0, 2**31 - 1))
def test_auroc_ignores_sample_order(data: tuple, seed: int) -> None:
    s, y = data
    perm = torch.randperm(len(s), generator=torch.Generator().manual_seed(seed))
    assert metrics.auroc(s[perm], y[perm]) == pytest.approx(metrics.auroc(s, y), abs=1e-9)


@FAST
@given(data=scored())
def test_auroc_counts_misordered_pairs(data: tuple) -> None:
    # The definition: P(score_out > score_id) + ½ P(tie), over all (outlier, ID) pairs.
    s, y = data
    out, known = s[y].numpy(), s[~y].numpy()
    diff = out[:, None] - known[None, :]
    expected = 100.0 * ((diff > 0).mean() + 0.5 * (diff == 0).mean())
    assert metrics.auroc(s, y) == pytest.approx(expected, abs=1e-9)


# --------------------------------------------------------------------------- H-score and ACC


percent = st.floats(0.0, 100.0, allow_nan=False)


@FAST
@given(acc=percent, auc=percent)
def test_h_score_bounds(acc: float, auc: float) -> None:
    h = metrics.h_score(acc, auc)
    assert min(acc, auc) - 1e-9 <= h <= max(acc, auc) + 1e-9
    assert h == pytest.approx(metrics.h_score(auc, acc))
    if acc == 0.0 or auc == 0.0:
        assert h == 0.0
    assert metrics.h_score(acc, acc) == pytest.approx(acc)
    assert math.isnan(metrics.h_score(float("nan"), auc)) and math.isnan(metrics.h_score(acc, float("nan")))


@FAST
@given(n_id=st.integers(1, 50), n_out=st.integers(0, 50), seed=st.integers(0, 2**31 - 1))
def test_accuracy_ignores_outlier_rows(n_id: int, n_out: int, seed: int) -> None:
    g = np.random.default_rng(seed)
    preds = torch.from_numpy(g.integers(0, 5, n_id + n_out))
    labels = torch.from_numpy(np.concatenate([g.integers(0, 5, n_id), -np.ones(n_out, np.int64)]))
    expected = 100.0 * float((preds[:n_id] == labels[:n_id]).float().mean())
    assert metrics.accuracy(preds, labels) == pytest.approx(expected)
    assert 0.0 <= metrics.accuracy(preds, labels) <= 100.0


@FAST
@given(rows=st.lists(st.tuples(percent, percent), min_size=1, max_size=15))
def test_aggregate_means_each_metric_and_h_not_of_the_means(rows: list[tuple[float, float]]) -> None:
    per = [{"acc": a, "auroc": u, "h": metrics.h_score(a, u)} for a, u in rows]
    mean = metrics.aggregate(per)
    assert mean["acc"] == pytest.approx(np.mean([a for a, _ in rows]))
    assert mean["auroc"] == pytest.approx(np.mean([u for _, u in rows]))
    # The mean of per-corruption H never exceeds H of the means (H is concave).
    assert mean["h"] <= metrics.h_score(mean["acc"], mean["auroc"]) + 1e-9


def test_aggregate_names_collapsed_rows_and_still_averages() -> None:
    rows = {"a": {"acc": 10.0, "auroc": 50.0, "h": 20.0, "collapsed": True},
            "b": {"acc": 30.0, "auroc": 70.0, "h": 40.0, "collapsed": False}}
    assert aggregate(rows) == {"acc": 20.0, "auroc": 60.0, "h": 30.0, "collapsed": ["a"]}
    assert aggregate(list(rows.values()))["collapsed"] == [0]
    assert "collapsed" not in aggregate([{"acc": 1.0, "auroc": 2.0, "h": 3.0}])



# --------------------------------------------------------------------------- the other metrics
# FPR95 and AUPR against scikit-learn (which has them), OSCR by hand and by its identities.


@FAST
@given(data=scored())
def test_fpr95_matches_scikit_learn_roc_curve(data: tuple) -> None:
    from sklearn.metrics import roc_curve

    s, y = data
    fpr, tpr, _ = roc_curve((~y).numpy(), (-s).numpy(), drop_intermediate=False)  # ID positive
    expected = 100.0 * fpr[np.searchsorted(tpr, 0.95, side="left")]
    assert metrics.fpr_at_tpr(s, y) == pytest.approx(expected, abs=1e-9)


@FAST
@given(data=scored())
def test_aupr_in_and_out_match_scikit_learn_average_precision(data: tuple) -> None:
    from sklearn.metrics import average_precision_score

    s, y = data
    assert metrics.aupr(s, y, "in") == pytest.approx(100 * average_precision_score((~y).numpy(), (-s).numpy()),
                                                     abs=1e-9)
    assert metrics.aupr(s, y, "out") == pytest.approx(100 * average_precision_score(y.numpy(), s.numpy()), abs=1e-9)


def test_fpr95_and_aupr_cases() -> None:
    is_out = torch.tensor([False] * 20 + [True] * 4)
    separated = torch.cat([torch.arange(20.0), 100 + torch.arange(4.0)])
    assert metrics.fpr_at_tpr(separated, is_out) == 0.0
    assert metrics.aupr(separated, is_out, "in") == 100.0 and metrics.aupr(separated, is_out, "out") == 100.0
    # the highest-scoring ID sample above every outlier: 95 % of ID (19 of 20) still accepted
    # below all outliers, so FPR95 stays 0; two such samples push it to 100
    one_high = separated.clone()
    one_high[0] = 1000.0
    assert metrics.fpr_at_tpr(one_high, is_out) == 0.0
    one_high[1] = 1001.0
    assert metrics.fpr_at_tpr(one_high, is_out) == 100.0
    assert math.isnan(metrics.fpr_at_tpr(torch.rand(4), torch.zeros(4, dtype=torch.bool)))
    with pytest.raises(ValueError, match="'in' or 'out'"):
        metrics.aupr(separated, is_out, "id")


def test_oscr_by_hand() -> None:
    # ID: correct at 0.1, correct at 0.2; outliers at 0.15 and 0.3 (lower score = accepted first):
    # (FPR, CCR) = (0,0) (0,.5) (.5,.5) (.5,1) (1,1) → area .75
    labels = torch.tensor([0, -1, 1, -1])
    scores = torch.tensor([0.1, 0.15, 0.2, 0.3])
    assert metrics.oscr(torch.tensor([0, 0, 1, 0]), scores, labels) == pytest.approx(75.0)
    # the second ID sample misclassified: CCR tops at .5 → (0,.5) (.5,.5) (1,.5) → .5
    assert metrics.oscr(torch.tensor([0, 0, 0, 0]), scores, labels) == pytest.approx(50.0)
    # a tie between an ID sample and an outlier moves both at once: a diagonal, area .5
    assert metrics.oscr(torch.tensor([0, 0]), torch.tensor([0.5, 0.5]), torch.tensor([0, -1])) == pytest.approx(50.0)


@FAST
@given(data=scored(), seed=st.integers(0, 2**31 - 1))
def test_oscr_equals_auroc_when_all_correct_and_never_exceeds_acc(data: tuple, seed: int) -> None:
    s, y = data
    g = torch.Generator().manual_seed(seed)
    labels = torch.where(y, torch.full_like(s, -1, dtype=torch.long), torch.randint(0, 3, s.shape, generator=g))
    right = torch.where(y, torch.zeros_like(labels), labels)
    assert metrics.oscr(right, s, labels) == pytest.approx(metrics.auroc(s, y), abs=1e-9)
    guess = torch.randint(0, 3, s.shape, generator=g)
    assert metrics.oscr(guess, s, labels) <= metrics.accuracy(guess, labels) + 1e-9


def test_score_outputs_names_every_metric_and_refuses_unknown_ones() -> None:
    labels = torch.tensor([0, 1, -1, 1, -1])
    scores = torch.tensor([0.1, 0.4, 0.9, 0.2, 0.3])
    out = metrics.score_outputs(torch.tensor([0, 1, 0, 0, 1]), scores, labels)
    assert list(out) == list(metrics.METRICS) and set(metrics.METRIC_LABELS) >= set(out)
    assert out["h"] == pytest.approx(metrics.h_score(out["acc"], out["auroc"]))
    with pytest.raises(ValueError, match="unknown metric"):
        metrics.score_outputs(torch.tensor([0]), torch.tensor([0.0]), torch.tensor([0]), ["fpr99"])
