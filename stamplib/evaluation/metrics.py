"""Every metric of a stream, from its per-sample outputs, aggregated as the paper does.

The paper's three (protocol.md §2):

* ACC: argmax accuracy over ID samples only (outliers neither count nor are rejected).
* AUROC: scikit-learn's ``roc_auc_score`` with outliers as the positive class and the OOD
  score (higher = outlier). This equals the authors' convention (ID positive, score = −entropy).
* H-score: 2·ACC·AUROC / (ACC + AUROC), per corruption.

The other standard open-set metrics (beyond the paper; the OOD-detection literature's
conventions):

* FPR95: the share of outliers accepted as known at the strictest threshold that still
  accepts at least 95 % of the ID samples (ID is the positive class; lower is better).
* AUPR-In / AUPR-Out: average precision with ID (ranked by −score) or the outliers (ranked by
  the score) as the positive class, as scikit-learn's ``average_precision_score`` defines it.
* OSCR (Dhamija et al. 2018): the area under the curve of the correct classification rate
  (ID samples accepted *and* classified correctly, over all ID samples) against the false
  positive rate (outliers accepted, over all outliers), as the acceptance threshold on the
  score sweeps; ties in the score move together. Equals AUROC when every ID sample is
  classified correctly, and is at most ACC.

Aggregation: the means over corruptions of every metric *separately*; the table's H is not
H(mean ACC, mean AUROC). All values are percentages.

:data:`METRICS` maps a name to a function of (predictions, OOD scores, labels) — the per-sample
outputs a record keeps beside its JSON — so a metric added there re-scores stored records
without running a method again (:func:`stamplib.evaluation.outputs.rescore`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

#: Printed names of the metrics, in table order (the paper prints "AUC"; we say AUROC).
METRIC_LABELS: dict[str, str] = {
    "acc": "ACC", "auroc": "AUROC", "h": "H", "fpr95": "FPR95", "aupr_in": "AUPR-In",
    "aupr_out": "AUPR-Out", "oscr": "OSCR",
}
#: The paper's three; the default columns of every table.
PAPER_METRICS = ("acc", "auroc", "h")
#: The metrics for which a smaller value is better (every other one: larger is better).
LOWER_IS_BETTER: set[str] = {"fpr95"}


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


def _as_numpy(
    ood_score: torch.Tensor | np.ndarray, is_outlier: torch.Tensor | np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(float64 scores, bool outlier flags), or None when a metric is undefined (one kind
    missing, or a non-finite score)."""
    s = np.asarray(ood_score.detach().cpu() if isinstance(ood_score, torch.Tensor) else ood_score, dtype=np.float64)
    y = np.asarray(is_outlier.cpu() if isinstance(is_outlier, torch.Tensor) else is_outlier, dtype=bool)
    if y.all() or not y.any() or not np.isfinite(s).all():
        return None
    return s, y


def _threshold_groups(s: np.ndarray, positive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative positives and negatives accepted as the threshold descends over the distinct
    values of ``s`` (samples scoring ≥ threshold are accepted; equal scores move together)."""
    order = np.argsort(-s, kind="stable")
    s_sorted, pos_sorted = s[order], positive[order]
    last_of_group = np.r_[np.flatnonzero(np.diff(s_sorted)), s_sorted.size - 1]
    tp = np.cumsum(pos_sorted)[last_of_group]
    fp = (last_of_group + 1) - tp
    return tp, fp


def fpr_at_tpr(ood_score: torch.Tensor, is_outlier: torch.Tensor, tpr: float = 0.95) -> float:
    """Percent of outliers accepted as ID at the first threshold (from the strictest) that
    accepts at least ``tpr`` of the ID samples; NaN without both kinds. Lower is better."""
    arrays = _as_numpy(ood_score, is_outlier)
    if arrays is None:
        return float("nan")
    s, y = arrays
    id_accepted, out_accepted = _threshold_groups(-s, ~y)  # ID is the positive class
    first = int(np.searchsorted(id_accepted / (~y).sum(), tpr - 1e-12, side="left"))
    return 100.0 * float(out_accepted[first] / y.sum())


def average_precision(score: np.ndarray, positive: np.ndarray) -> float:
    """Σ (R_n − R_{n−1}) P_n over the distinct thresholds of ``score`` (higher = positive),
    scikit-learn's ``average_precision_score`` definition (no interpolation)."""
    tp, fp = _threshold_groups(score, positive)
    precision = tp / (tp + fp)
    recall_steps = np.diff(np.r_[0, tp]) / positive.sum()
    return float(np.sum(recall_steps * precision))


def aupr(ood_score: torch.Tensor, is_outlier: torch.Tensor, positive: str = "in") -> float:
    """Percent AUPR with ID (``positive="in"``, ranked by −score) or the outliers (``"out"``,
    ranked by the score) as the positive class; NaN without both kinds."""
    arrays = _as_numpy(ood_score, is_outlier)
    if arrays is None:
        return float("nan")
    s, y = arrays
    if positive == "in":
        return 100.0 * average_precision(-s, ~y)
    if positive == "out":
        return 100.0 * average_precision(s, y)
    raise ValueError(f"positive is 'in' or 'out', got {positive!r}")


def oscr(predictions: torch.Tensor, ood_score: torch.Tensor, labels: torch.Tensor) -> float:
    """Percent OSCR: the trapezoid area under (FPR, CCR) as the acceptance threshold on
    −``ood_score`` descends, from (0, 0) to (1, ACC/100); NaN without both kinds."""
    labels = torch.as_tensor(labels)
    arrays = _as_numpy(ood_score, labels < 0)
    if arrays is None:
        return float("nan")
    s, y = arrays
    correct = (predictions.cpu() == labels.cpu()).numpy() & ~y
    order = np.argsort(s, kind="stable")  # most confidently known first
    s_sorted = s[order]
    last_of_group = np.r_[np.flatnonzero(np.diff(s_sorted)), s_sorted.size - 1]
    ccr = np.r_[0.0, np.cumsum(correct[order])[last_of_group] / (~y).sum()]
    fpr = np.r_[0.0, np.cumsum(y[order])[last_of_group] / y.sum()]
    return 100.0 * float(np.sum(np.diff(fpr) * (ccr[1:] + ccr[:-1]) / 2.0))


MetricFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], float]


def _h_of(predictions: torch.Tensor, ood_score: torch.Tensor, labels: torch.Tensor) -> float:
    return h_score(accuracy(predictions, labels), auroc(ood_score, labels < 0))


#: name → f(predictions [N], OOD scores [N], labels [N] with −1 for outliers) → percent.
#: Add an entry (or call :func:`register_metric`) to score stored outputs with a new metric.
METRICS: dict[str, MetricFunction] = {
    "acc": lambda p, s, y: accuracy(p, y),
    "auroc": lambda p, s, y: auroc(s, y < 0),
    "h": _h_of,
    "fpr95": lambda p, s, y: fpr_at_tpr(s, y < 0),
    "aupr_in": lambda p, s, y: aupr(s, y < 0, "in"),
    "aupr_out": lambda p, s, y: aupr(s, y < 0, "out"),
    "oscr": oscr,
}


def register_metric(
    name: str, function: MetricFunction, label: str | None = None, lower_is_better: bool = False
) -> None:
    """Make ``name`` a metric of every table and of :func:`~stamplib.evaluation.outputs.rescore`
    (``lower_is_better``: a selection by this metric, e.g. ``python -m stamplib tune
    --criterion``, takes the smallest value)."""
    if not name.isidentifier():
        raise ValueError(f"a metric name is a Python identifier (a column name), got {name!r}")
    METRICS[name] = function
    METRIC_LABELS.setdefault(name, label or name)
    if lower_is_better:
        LOWER_IS_BETTER.add(name)
    else:
        LOWER_IS_BETTER.discard(name)


def higher_is_better(name: str) -> bool:
    """Whether a larger value of metric ``name`` is better (False for FPR95 and any metric
    registered with ``lower_is_better``); a clear error for an unknown name."""
    check_metrics([name])
    return name not in LOWER_IS_BETTER


def check_metrics(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` as a tuple, each a known metric (a clear error names the choices)."""
    names = (names,) if isinstance(names, str) else tuple(names)
    unknown = [n for n in names if n not in METRICS]
    if unknown or not names:
        raise ValueError(f"unknown metric(s) {unknown or names}; choose from {', '.join(METRICS)}")
    return names


def score_outputs(
    predictions: torch.Tensor,
    ood_score: torch.Tensor,
    labels: torch.Tensor,
    names: Iterable[str] | None = None,
) -> dict[str, float]:
    """Every metric of ``names`` (default: all of :data:`METRICS`) for one stream's outputs."""
    names = check_metrics(names) if names is not None else tuple(METRICS)
    predictions, ood_score, labels = (torch.as_tensor(t) for t in (predictions, ood_score, labels))
    return {n: METRICS[n](predictions, ood_score, labels) for n in names}


def stream_metrics(probs: torch.Tensor, ood_score: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Every metric of :data:`METRICS` for one corruption's stream."""
    return score_outputs(probs.argmax(dim=1), ood_score, labels)


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
    # Every metric that all rows have (older records have the paper's three only).
    keys = [k for k in METRICS if all(k in r for r in rows)]
    out: dict[str, Any] = {key: float(np.mean([r[key] for r in rows])) for key in keys}
    if any("collapsed" in r for r in rows):
        labels = list(per_corruption) if named else list(range(len(rows)))
        out["collapsed"] = [label for label, r in zip(labels, rows) if r.get("collapsed")]
    return out
