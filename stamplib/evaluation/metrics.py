"""ACC, AUROC and H-score, aggregated as the paper does (protocol.md §2).

* ACC: argmax accuracy over ID samples only (outliers neither count nor are rejected).
* AUROC: scikit-learn's ``roc_auc_score`` with outliers as the positive class and the OOD
  score (higher = outlier). This equals the authors' convention (ID positive, score = −entropy).
* H-score: 2·ACC·AUROC / (ACC + AUROC), per corruption.
* Aggregation: the means over corruptions of ACC, AUROC and H-score *separately*; the table's
  H is not H(mean ACC, mean AUROC).
All values are percentages.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from sklearn.metrics import roc_auc_score


def accuracy(predictions: torch.Tensor, labels: torch.Tensor) -> float:
    """Percent of ID samples (label ≥ 0) predicted correctly; NaN if there are none."""
    known = labels >= 0
    if not bool(known.any()):
        return float("nan")
    return 100.0 * float((predictions[known] == labels[known]).float().mean())


def auroc(ood_score: torch.Tensor, is_outlier: torch.Tensor) -> float:
    """Percent AUROC of separating outliers (positive) by ``ood_score``; NaN without both kinds."""
    y = is_outlier.cpu().numpy().astype(np.int64)
    if y.min() == y.max():
        return float("nan")
    s = ood_score.detach().cpu().double().numpy()
    if not np.isfinite(s).all():
        return float("nan")
    return 100.0 * float(roc_auc_score(y, s))


def h_score(acc: float, auc: float) -> float:
    """Harmonic mean of ACC and AUROC (paper Eq. 9); 0 when both are 0, NaN if either is NaN."""
    if math.isnan(acc) or math.isnan(auc):
        return float("nan")
    if acc + auc == 0:
        return 0.0
    return 2.0 * acc * auc / (acc + auc)


def stream_metrics(probs: torch.Tensor, ood_score: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """ACC / AUROC / H for one corruption's stream."""
    acc = accuracy(probs.argmax(dim=1), labels)
    auc = auroc(ood_score, labels < 0)
    return {"acc": acc, "auroc": auc, "h": h_score(acc, auc)}


def aggregate(
    per_corruption: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """Mean over corruptions of each metric separately (NaNs propagate: a missing AUROC in a
    closed-set stream stays NaN rather than silently vanishing).

    A collapsed corruption (its row has ``collapsed: True``) is still averaged in — dropping it
    would flatter the method — but never silently: the result then carries ``collapsed``, the
    collapsed corruptions' names (row positions for a plain sequence of rows), so that tables
    can flag the mean. Rows without a ``collapsed`` field give no such key."""
    named = isinstance(per_corruption, Mapping)
    rows = list(per_corruption.values()) if named else list(per_corruption)
    if not rows:
        raise ValueError("nothing to aggregate")
    out: dict[str, Any] = {key: float(np.mean([r[key] for r in rows])) for key in ("acc", "auroc", "h")}
    if any("collapsed" in r for r in rows):
        labels = list(per_corruption) if named else list(range(len(rows)))
        out["collapsed"] = [label for label, r in zip(labels, rows) if r.get("collapsed")]
    return out
