"""A two-component Gaussian mixture on one-dimensional scores, fitted by EM.

UniEnt splits each test batch into pseudo-ID and pseudo-OOD samples with a two-component
mixture on its outlier score (gaozhengqing/UniEnt ``cifar/tent.py``: scikit-learn's
``GaussianMixture(n_components=2)`` with its defaults, the component with the larger mean
being the outliers). This is the same model and the same EM written for one dimension in
torch, for three reasons: it is deterministic (scikit-learn initialises with a k-means++
draw from an unseeded global generator, so the authors' split is not reproducible), it stays
on the batch's device (no host round trip per batch), and a test can check it exactly.

Defaults follow scikit-learn's: responsibilities initialised from a k-means partition (here a
deterministic 2-means in 1-D started at the smallest and the largest score), ``reg_covar``
1e-6 added to each variance, EM stopped when the mean log-likelihood per sample changes by
less than ``tol`` = 1e-3 or after 100 iterations, and the posterior taken after a final
E-step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TwoGaussians:
    """Fitted parameters, component 0 = the smaller mean."""

    weights: torch.Tensor  # [2]
    means: torch.Tensor  # [2]
    variances: torch.Tensor  # [2]
    iterations: int
    converged: bool

    def log_joint(self, x: torch.Tensor) -> torch.Tensor:
        """log w_k + log N(x | μ_k, σ²_k), shape [N, 2]."""
        x = x.to(self.means.dtype).reshape(-1, 1)
        log_density = -0.5 * (math.log(2 * math.pi) + self.variances.log() + (x - self.means) ** 2 / self.variances)
        return self.weights.log() + log_density

    def posterior(self, x: torch.Tensor) -> torch.Tensor:
        """P(component k | x), shape [N, 2]; column 1 belongs to the larger mean."""
        return torch.softmax(self.log_joint(x), dim=1)


def _two_means(x: torch.Tensor, max_iter: int = 100) -> torch.Tensor:
    """Lloyd's 2-means in one dimension from centres (min, max): True = the upper cluster."""
    centres = torch.stack([x.min(), x.max()])
    upper = torch.zeros_like(x, dtype=torch.bool)
    for _ in range(max_iter):
        new = (x - centres[1]).abs() < (x - centres[0]).abs()
        if torch.equal(new, upper):  # never at the first pass: the maximum is in the upper cluster
            break
        upper = new
        for k, members in enumerate((~upper, upper)):
            if members.any():
                centres[k] = x[members].mean()
    return upper


def _m_step(x: torch.Tensor, resp: torch.Tensor, reg_covar: float) -> tuple[torch.Tensor, ...]:
    # scikit-learn adds 10·eps to the component counts so that an empty component cannot
    # divide by zero.
    counts = resp.sum(dim=0) + 10 * torch.finfo(resp.dtype).eps
    means = (resp * x[:, None]).sum(dim=0) / counts
    variances = (resp * (x[:, None] - means) ** 2).sum(dim=0) / counts + reg_covar
    return counts / x.numel(), means, variances


def fit_two_gaussians(
    scores: torch.Tensor, tol: float = 1e-3, max_iter: int = 100, reg_covar: float = 1e-6
) -> TwoGaussians:
    """Fit a 2-component 1-D Gaussian mixture to ``scores`` [N] (N ≥ 2) by EM, in float64."""
    x = scores.detach().reshape(-1).double()
    assert x.numel() >= 2, "a two-component mixture needs at least two scores"
    assert torch.isfinite(x).all(), "scores must be finite"
    upper = _two_means(x)
    resp = torch.stack([(~upper).double(), upper.double()], dim=1)
    weights, means, variances = _m_step(x, resp, reg_covar)
    lower_bound = -math.inf
    converged = False
    iterations = 0
    for iterations in range(1, max_iter + 1):
        model = TwoGaussians(weights, means, variances, iterations, False)
        log_joint = model.log_joint(x)
        new_bound = torch.logsumexp(log_joint, dim=1).mean().item()
        resp = torch.softmax(log_joint, dim=1)
        weights, means, variances = _m_step(x, resp, reg_covar)
        if abs(new_bound - lower_bound) < tol:
            converged = True
            break
        lower_bound = new_bound
    order = torch.argsort(means)
    return TwoGaussians(weights[order], means[order], variances[order], iterations, converged)


def upper_component_posterior(scores: torch.Tensor, **fit_options: float) -> torch.Tensor:
    """P(larger-mean component | score) for every score, from a mixture fitted to ``scores``.

    With fewer than two distinct scores there is nothing to split: every sample gets 0 (it
    belongs to the lower, pseudo-ID, component). Returned in the dtype of ``scores``.
    """
    x = scores.detach().reshape(-1)
    if x.numel() < 2 or bool((x == x[0]).all()):
        return torch.zeros_like(x)
    return fit_two_gaussians(x, **fit_options).posterior(x)[:, 1].to(scores.dtype)
