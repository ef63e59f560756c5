"""Property-based tests of the stream and metric layers (hypothesis): stream composition and
batching, the ratio rule, AUROC invariances and H-score bounds. test_streams.py checks the
count/share relation of ``outliers_for_ratio``; these check what a stream is made of."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stamplib.data.streams import mix, outliers_for_ratio
from stamplib.evaluation import metrics

FAST = settings(max_examples=40, deadline=None, database=None)


def tagged(n: int, offset: int = 0) -> torch.Tensor:
    """n 1×1 images whose pixels encode their index (channels 0/1) — a row says where it came from."""
    idx = torch.arange(offset, offset + n)
    img = torch.zeros(n, 1, 1, 3, dtype=torch.uint8)
    img[:, 0, 0, 0] = (idx % 256).to(torch.uint8)
    img[:, 0, 0, 1] = (idx // 256).to(torch.uint8)
    return img


def index_of(images: torch.Tensor) -> list[int]:
    return (images[:, 0, 0, 0].long() + 256 * images[:, 0, 0, 1].long()).tolist()


# --------------------------------------------------------------------------- streams


@FAST
@given(
    num_id=st.integers(1, 400),
    ratio=st.sampled_from([0.0, 0.05, 0.1, 0.2, 1 / 3, 0.5, 0.75]),
    extra=st.integers(0, 50),
    seed=st.integers(0, 2**31 - 1),
    batch_size=st.integers(1, 130),
)
def test_stream_batches_cover_every_sample_once(num_id: int, ratio: float, extra: int, seed: int,
                                                batch_size: int) -> None:
    n_out = outliers_for_ratio(num_id, ratio)
    assert n_out == round(num_id * ratio / (1 - ratio))  # the ratio rule, protocol.md §3.2
    ids = tagged(num_id)
    pool = tagged(n_out + extra, offset=num_id)  # a pool larger than needed: first N are used
    labels = torch.arange(num_id) % 7
    stream = mix(ids, labels, pool, n_out, seed=seed, batch_size=batch_size)

    xs, ys, outs = [], [], []
    for batch in stream.batches():
        assert 1 <= batch.x.shape[0] <= batch_size and batch.x.dtype == torch.float32
        xs.append(batch.x)
        ys.append(batch.y)
        outs.append(batch.is_outlier)
    assert len(xs) == len(stream) == math.ceil((num_id + n_out) / batch_size)
    x, y, is_out = torch.cat(xs), torch.cat(ys), torch.cat(outs)
    # Batches are the stream in order, as [0,1] floats of the stored uint8 images.
    assert torch.equal((x * 255).round().to(torch.uint8).permute(0, 2, 3, 1), stream.images)
    seen = index_of(stream.images)
    assert sorted(seen) == list(range(num_id + n_out))  # every ID image and the first N outliers, once
    assert int(is_out.sum()) == n_out == stream.num_outliers
    assert torch.equal(is_out, y < 0)
    for i, label in zip(seen, y.tolist()):  # labels travel with their images
        assert label == (-1 if i >= num_id else i % 7)


@FAST
@given(num_id=st.integers(1, 300), n_out=st.integers(0, 100), seed=st.integers(0, 2**31 - 1))
def test_mix_is_a_seeded_permutation(num_id: int, n_out: int, seed: int) -> None:
    ids, pool = tagged(num_id), tagged(n_out, offset=num_id)
    labels = torch.zeros(num_id, dtype=torch.long)
    a = mix(ids, labels, pool, n_out, seed=seed)
    b = mix(ids, labels, pool, n_out, seed=seed)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    order = torch.randperm(num_id + n_out, generator=torch.Generator().manual_seed(seed))
    assert index_of(a.images) == order.tolist()  # the order depends on the seed alone


@FAST
@given(num_id=st.integers(1, 10_000), r1=st.floats(0.0, 0.95), r2=st.floats(0.0, 0.95))
def test_outlier_count_grows_with_the_ratio(num_id: int, r1: float, r2: float) -> None:
    lo, hi = sorted((r1, r2))
    assert 0 <= outliers_for_ratio(num_id, lo) <= outliers_for_ratio(num_id, hi)
    assert outliers_for_ratio(num_id, 0.0) == 0


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
    for transformed in (s * scale + shift, s**3 + s, torch.exp(s / 10), torch.sigmoid(s / 60)):
        assert metrics.auroc(transformed, y) == pytest.approx(base, abs=1e-9)


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
