"""Entropy and the soft cross-entropy: every method computes them here.

Several formulas appear in the authors' code and each matters (stamp.md §9 row 6): the
filter/score entropy of *probabilities* uses ``log(p + eps)`` (1e-5 in STAMP, 1e-6 in RoTTA
and SoTTA), every loss of STAMP/Tent/EATA/SAR uses the exact entropy of *logits* through
``log_softmax``, and SoTTA's corrected score is the exact entropy of probabilities.
"""

from __future__ import annotations

import torch

SCORE_EPS = 1e-5


def logit_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Exact per-sample entropy (nats) of softmax(logits); differentiable. Shape [B]."""
    log_p = torch.log_softmax(logits, dim=1)
    return -(log_p.exp() * log_p).sum(dim=1)


def entropy_terms(probs: torch.Tensor, eps: float = SCORE_EPS) -> torch.Tensor:
    """The summands −p·log(p + eps) of the entropy, one per (sample, class). Shape [B, C]."""
    return -(probs * torch.log(probs + eps))


def prob_entropy(probs: torch.Tensor, eps: float = SCORE_EPS) -> torch.Tensor:
    """Per-sample entropy of probability rows with the authors' epsilon: -Σ p log(p + eps)."""
    return entropy_terms(probs, eps).sum(dim=1)


def exact_prob_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Per-sample entropy of probability rows without an epsilon (0·log 0 = 0). Shape [B]."""
    return -torch.special.xlogy(probs, probs).sum(dim=1)


def soft_cross_entropy(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Per-sample −Σ softmax(t)·log_softmax(s): the student against the teacher's soft label."""
    return -(teacher_logits.softmax(dim=1) * student_logits.log_softmax(dim=1)).sum(dim=1)
