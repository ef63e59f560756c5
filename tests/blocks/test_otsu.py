"""Otsu's threshold (stamplib.blocks.otsu, OWTTT baselines.md §9)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stamplib.blocks.otsu import otsu_threshold


def test_otsu_threshold_splits_a_bimodal_sample():
    rng = np.random.default_rng(0)
    low = 0.2 + 0.03 * rng.standard_normal(200)
    high = 0.7 + 0.03 * rng.standard_normal(100)
    t = otsu_threshold(np.concatenate([low, high]))
    assert low.max() < t <= high.min()
    assert otsu_threshold(torch.tensor(np.concatenate([high, low]))) == t  # order-free, tensors ok


def test_otsu_threshold_matches_a_brute_force_search():
    rng = np.random.default_rng(1)
    values = rng.uniform(0.0, 1.0, 64) ** 2
    best, best_t = float("inf"), None
    for k in range(100):
        t = k / 100
        upper, lower = values[values >= t], values[values < t]
        if len(upper) == 0 or len(lower) == 0:
            continue
        score = (len(lower) * lower.var() + len(upper) * upper.var()) / len(values)
        if score < best - 1e-12:
            best, best_t = score, t
    assert otsu_threshold(values) == pytest.approx(best_t)


def test_otsu_threshold_of_a_constant_sample_is_zero():
    assert otsu_threshold([0.3] * 10) == 0.0

