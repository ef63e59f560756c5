"""OWTTT's Otsu-style threshold search on outlier scores (baselines.md §9, steps 2–3).

Candidate thresholds are {0, 0.01, …, 0.99} (``numpy.arange(0, 1, 0.01)``, float64). A value
v is in the upper group when v ≥ t. Each candidate is scored by the within-group weighted
variance w₀·Var₀ + w₁·Var₁ (population variances); a split that leaves one group empty scores
+∞. The first minimiser wins, so when every candidate is +∞ (fewer than two distinct values
across the grid) the threshold is 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

THRESHOLDS = np.arange(0.0, 1.0, 0.01)


def within_group_variance(values: np.ndarray, threshold: float) -> float:
    """w₀·Var₀ + w₁·Var₁ for the split values < threshold | values ≥ threshold."""
    upper = values >= threshold
    n_upper = int(upper.sum())
    if n_upper == 0 or n_upper == values.size:
        return float("inf")
    w1 = n_upper / values.size
    return (1.0 - w1) * float(np.var(values[~upper])) + w1 * float(np.var(values[upper]))


def otsu_threshold(values: Sequence[float] | np.ndarray | torch.Tensor) -> float:
    """The grid threshold minimising the within-group weighted variance of ``values``."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().double().numpy()
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    assert arr.size > 0, "Otsu threshold of an empty sample"
    criteria = [within_group_variance(arr, t) for t in THRESHOLDS]
    return float(THRESHOLDS[int(np.argmin(criteria))])
