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


def marginal_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the batch-mean prediction, H(mean_i softmax(logits_i)); a scalar.

    The diversity term that UniEnt and OSTTA *maximise* (gaozhengqing/UniEnt
    ``cifar/tent.py`` ``softmax_mean_entropy``: −Σ p̄ log p̄, no epsilon); ``xlogy`` keeps a
    class whose mean probability underflows to 0 at 0 instead of NaN.
    """
    mean = torch.softmax(logits, dim=1).mean(dim=0)
    return -torch.special.xlogy(mean, mean).sum()


#: COME's epsilon inside the log of the opinion entropy (BlueWhaleLab/COME ``tent_come.py``).
OPINION_EPS = 1e-7


def opinion_logits(logits: torch.Tensor, uncertainty_mass: float) -> torch.Tensor:
    """COME's subjective opinion as logits of C + 1 outcomes: [x̃_1 … x̃_C, log K].

    Softmax of the result is the opinion (b_1 … b_C, u) with belief b_k = e^{x̃_k}/(Σe^x̃ + K)
    and uncertainty mass u = K/(Σe^x̃ + K), where x̃ = x/‖x‖·sg(‖x‖) has the value of the
    logits x but no gradient along their norm (BlueWhaleLab/COME ``tent_come.py``
    ``dirichlet_entropy``: the norm is detached so that minimising the loss cannot simply
    scale the logits up). Computed in log space: the authors' e^x overflows for logits > 88.
    """
    assert uncertainty_mass > 0, "COME's uncertainty mass K must be positive"
    norm = logits.norm(p=2, dim=1, keepdim=True)
    # clamp: an all-zero row stays zero instead of 0/0 (the value is unchanged elsewhere)
    rescaled = logits / norm.clamp_min(torch.finfo(logits.dtype).tiny) * norm.detach()
    log_k = torch.full_like(rescaled[:, :1], float(uncertainty_mass)).log()
    return torch.cat([rescaled, log_k], dim=1)


def opinion_entropy(logits: torch.Tensor, uncertainty_mass: float) -> torch.Tensor:
    """COME's loss per sample: entropy of the opinion (b_1 … b_C, u), with the authors'
    ``+ 1e-7`` added to every mass before ``p·log p`` (``tent_come.py``). Shape [B]."""
    mass = torch.softmax(opinion_logits(logits, uncertainty_mass), dim=1) + OPINION_EPS
    return -(mass * mass.log()).sum(dim=1)


def opinion_belief(logits: torch.Tensor, uncertainty_mass: float) -> torch.Tensor:
    """The beliefs b_1 … b_C of COME's opinion (without the uncertainty mass). Shape [B, C].

    COME's OOD score is −max_k b_k (BlueWhaleLab/COME ``utils/metrics.py``, scoring function
    ``dirichlet``, which ``start-open.sh`` uses for the COME methods).
    """
    return torch.softmax(opinion_logits(logits, uncertainty_mass), dim=1)[:, :-1]


def energy_score(logits: torch.Tensor) -> torch.Tensor:
    """Negative free energy −logsumexp(logits) per sample: higher = more likely an outlier.

    The OOD score UniEnt reports for every method (gaozhengqing/UniEnt ``cifar/main.py``
    ``get_results`` ranks ID samples by ``logsumexp``; our convention flips the sign). Shape [B].
    """
    return -torch.logsumexp(logits, dim=1)
