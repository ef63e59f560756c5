"""Entropy helpers.

Two formulas appear in the authors' code and both matter (stamp.md §9 row 6):
the filter/score entropy of *probabilities* uses ``log(p + 1e-5)``, while every loss uses
the exact entropy of *logits* through ``log_softmax``.
"""

from __future__ import annotations

import torch

SCORE_EPS = 1e-5


def logit_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Exact per-sample entropy (nats) of softmax(logits); differentiable. Shape [B]."""
    log_p = torch.log_softmax(logits, dim=1)
    return -(log_p.exp() * log_p).sum(dim=1)


def prob_entropy(probs: torch.Tensor, eps: float = SCORE_EPS) -> torch.Tensor:
    """Per-sample entropy of probability rows with the authors' epsilon: -Σ p log(p + eps)."""
    return -(probs * torch.log(probs + eps)).sum(dim=1)
