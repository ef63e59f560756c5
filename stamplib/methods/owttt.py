"""OWTTT (Li et al., ICCV 2023) as run in the STAMP evaluation (baselines.md §9, §0.1, §0.2).

The network is split into an encoder (global-average-pooled penultimate features) and an
unused fc; classification is by cosine similarity to the L2-normalised class-mean features
of the clean source training set (the *prototypes*), with temperature δ = 0.1. Per batch:

1. eval-mode forward; cosine to the C source prototypes and, once strong-OOD prototypes
   exist, the max cosine to that pool as an extra "outlier" column;
2. outlier score os = 1 − max cos_src, pushed into a 512-long queue; the Otsu threshold τ₁ of
   the queue splits the batch into seen (os < τ₁) and unseen samples;
3. prototype expansion: unseen samples far from every prototype (Otsu threshold τ₂ on the
   unseen samples' 1 − max cos over [source, pool]) join the FIFO pool (at most 100);
4. loss = λ·0.05·(symmetric KL between the source feature Gaussian and an EMA Gaussian of
   train-mode test features) if any sample is seen, plus ½·(CE of the most confident seen
   samples to their prototype + CE of the most confident unseen samples to the pool column)
   once the pool existed at step 1; SGD (momentum 0.9) over *all* network parameters;
5. a fresh eval-mode forward gives the prediction softmax(cos_src/δ) and the score.

λ as the authors ran it (§9 "Correction"): 1 in every hyperparameter set. ``setup_owttt`` never passes the
run script's DA_SCALE (5/1/1/1/0.2 for C10/C100/IN/C10s/C100s) to the method, whose default
is 1. ``da_scale_as_intended=True`` uses the intended value of each hyperparameter set (``intended_da_scale``);
``da_scale`` sets λ directly.

OOD score (§0.2): the authors return max cos_src (ID-positive) from the forward *after* the
update; here ``ood_score = −max cos_src`` (= os − 1, higher = outlier, same ranking as os).
``score_after_update=False`` takes prediction and score from step 1 instead (before the step).

Under TF32 (``--tf32``) the covariances, their Cholesky factors, the KL terms, their gradients
and the cosines run at full float32 (``blocks.precision.full_precision_matmul``): rounded to TF32,
the EMA covariance — a difference of products — turns indefinite within a few batches and has no
Cholesky factor. The network's own forward and backward keep the TF32 switch.

A step waits for the device once: one copy of the batch's scores and cosines, from which the
host takes the decisions the algorithm branches on (Otsu thresholds, seen/unseen, the
sequential prototype expansion, the confident halves; see ``step``).

The encoder is ``blocks.features.feature_encoder``: the CIFAR ResNet's ``features`` method, or
for other networks whose last layer is an ``fc`` attribute (torchvision ResNets, possibly
inside ``InputNormalization``) the forward with that fc swapped for an identity.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributions import MultivariateNormal, kl_divergence

from stamplib.blocks.features import feature_encoder
from stamplib.blocks.otsu import otsu_threshold
from stamplib.blocks.precision import full_precision_matmul
from stamplib.blocks.source_stats import iter_batches, model_fingerprint
from stamplib.methods.base import TTAMethod, TTAOutput, register


@dataclass(frozen=True)
class OWTTTConfig:
    lr: float
    #: λ, weight of the distribution-alignment loss, as run: 1 everywhere (§9 "Correction").
    da_scale: float = 1.0
    #: The run script's DA_SCALE for this hyperparameter set, which never reached the authors' method.
    intended_da_scale: float = 1.0
    #: True: λ = ``intended_da_scale`` (the corrected reading) instead of ``da_scale``.
    da_scale_as_intended: bool = False
    ce_scale: float = 1.0  # weight of the prototype-clustering cross-entropy
    delta: float = 0.1  # temperature of the cosine logits
    queue_length: int = 512  # N_m, outlier scores kept for τ₁
    max_prototypes: int = 100  # strong-OOD pool capacity (FIFO)
    ema_length: int = 1280  # α = 1 / min(n, ema_length)
    da_loss_scale: float = 0.05
    momentum: float = 0.9
    template_divisor: float = 30.0  # T = I·max(Σ_src) / 30
    source_batch_size: int = 256  # only speed: batching of the source feature pass
    #: True (authors' code, §0.2/§9 step 9): prediction and score from a fresh forward after
    #: the update; False: from the step-1 forward, before the update.
    score_after_update: bool = True
    #: Mean of the source Gaussian. "prototypes" (STAMP code, §9): mean of the L2-normalised
    #: prototypes; "features": mean of the raw source features (original OWTTT code).
    source_mean: Literal["prototypes", "features"] = "prototypes"

    def __post_init__(self) -> None:
        assert self.lr > 0 and self.da_scale >= 0 and self.ce_scale >= 0 and self.delta > 0
        assert self.intended_da_scale >= 0
        if self.da_scale_as_intended and self.da_scale != 1.0:
            raise ValueError(
                f"OWTTT: da_scale={self.da_scale} and da_scale_as_intended=True both set λ; "
                "set da_scale for a value of your own, or da_scale_as_intended for the run script's"
            )
        assert self.queue_length >= 1 and self.max_prototypes >= 1 and self.ema_length >= 1
        assert self.source_mean in ("prototypes", "features"), self.source_mean

    @property
    def effective_da_scale(self) -> float:
        """The λ the method uses."""
        return self.intended_da_scale if self.da_scale_as_intended else self.da_scale


@dataclass(frozen=True)
class OWTTTSourceStats:
    prototypes: torch.Tensor  # [C, D] L2-normalised class means
    prototype_mean: torch.Tensor  # [D] mean of the normalised prototypes (μ_src in §9)
    feature_mean: torch.Tensor  # [D] mean of the raw features (μ_src of the original OWTTT)
    cov: torch.Tensor  # [D, D] sample covariance (N − 1) of the raw features


@register("owttt")
class OWTTT(TTAMethod):
    config_cls = OWTTTConfig
    configs = {
        "cifar10_c": OWTTTConfig(lr=1e-3, intended_da_scale=5.0),
        "cifar100_c": OWTTTConfig(lr=1e-5, intended_da_scale=1.0),
        "imagenet_c": OWTTTConfig(lr=2.5e-5, intended_da_scale=1.0),
        "cifar10_c_8_2": OWTTTConfig(lr=1e-3, intended_da_scale=1.0),
        "cifar100_c_80_20": OWTTTConfig(lr=1e-5, intended_da_scale=0.2),
    }
    needs_source_data = True
    score_basis = "features"

    def setup(self) -> None:
        cfg = self.config
        self.encode = feature_encoder(self.model)
        self.model.eval()
        key = f"owttt_source/{model_fingerprint(self.model)}/{self.device}"
        stats: OWTTTSourceStats = self.source_statistic(key, self._compute_source_stats)
        self.prototypes = stats.prototypes
        self.feature_dim = stats.prototypes.shape[1]
        self.dtype = stats.prototypes.dtype  # the model's (float64 in exactness tests)
        template = torch.eye(self.feature_dim, device=self.device, dtype=self.dtype) * (
            stats.cov.max() / cfg.template_divisor
        )
        self.template = template
        mean = stats.prototype_mean if cfg.source_mean == "prototypes" else stats.feature_mean
        with full_precision_matmul():
            self.source_gaussian = MultivariateNormal(mean, stats.cov + template, validate_args=False)
        self.model.requires_grad_(True)
        # foreach: one operator per parameter list, not per tensor; a GPU's default already, and the
        # same numbers as the per-tensor loop on a CPU.
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=cfg.momentum, foreach=True)

    @torch.no_grad()
    def _compute_source_stats(self) -> OWTTTSourceStats:
        data = self.source_data
        labels = data.labels.to(self.device)
        dtype = next(self.model.parameters()).dtype
        assert labels.min() >= 0 and labels.max() < self.num_classes, "source labels outside [0, C)"
        feats = torch.cat(
            [
                self.encode(x)
                for _, x in iter_batches(data.images, self.config.source_batch_size, self.device, dtype=dtype)
            ]
        )
        means = []
        for c in range(self.num_classes):
            mask = labels == c
            assert mask.any(), f"OWTTT: class {c} has no source image, so no prototype"
            means.append(feats[mask].mean(dim=0))
        prototypes = F.normalize(torch.stack(means), dim=1)
        with full_precision_matmul():
            cov = torch.cov(feats.T)
        return OWTTTSourceStats(prototypes, prototypes.mean(dim=0), feats.mean(dim=0), cov)

    def reset_buffers(self) -> None:
        d = self.feature_dim
        self.pool = torch.zeros(0, d, device=self.device, dtype=self.dtype)
        self.os_queue: deque[float] = deque(maxlen=self.config.queue_length)
        self.ema_mean = torch.zeros(d, device=self.device, dtype=self.dtype)
        self.ema_cov = torch.zeros(d, d, device=self.device, dtype=self.dtype)
        self.ema_count = 0
        self.num_updates = 0

    # -- pieces, exposed for tests --------------------------------------------------------------
    def push_prototype(self, z: torch.Tensor) -> None:
        """Append one normalised feature [D]; beyond capacity the oldest one leaves."""
        self.pool = torch.cat([self.pool, z.detach().view(1, -1)], dim=0)[-self.config.max_prototypes:]

    def expand_pool(
        self, feat: torch.Tensor, cos_src: torch.Tensor, tau1: float, tau2: float
    ) -> None:
        """§9 step 3 for one batch (see :func:`expansion_order`): the pool grows by the visited
        samples that are far from the source prototypes and from the pool as it stands."""
        z = F.normalize(feat.detach(), dim=1)
        with full_precision_matmul():
            sims = z @ torch.cat([self.pool, z]).T
        r = cos_src.detach().max(dim=1).values
        host = torch.cat([r[:, None], sims], dim=1).cpu().numpy()
        columns = grow_pool(host[:, 0], host[:, 1:], self.pool.shape[0], tau1, tau2, self.config.max_prototypes)
        self._set_pool(z, columns)

    def _set_pool(self, z: torch.Tensor, columns: list[int]) -> None:
        """The pool becomes the rows ``columns`` of [pool; z] (unchanged if they are the pool)."""
        if columns != list(range(self.pool.shape[0])):
            rows = torch.as_tensor(columns, dtype=torch.long).to(self.device, non_blocking=True)
            self.pool = torch.cat([self.pool, z.detach()])[rows]

    def alignment_loss(self, feats: torch.Tensor) -> torch.Tensor:
        """§9 step 5: fold the batch into the EMA Gaussian and return the symmetric KL to the
        source Gaussian (both with the template covariance added); the gradient flows through
        this batch's contribution only, the stored EMA is detached. At full float32 whatever the
        TF32 switch says: the covariance is a difference of products whose rounding to TF32
        makes it indefinite, and then it has no Cholesky factor."""
        b = feats.shape[0]
        self.ema_count += b
        alpha = 1.0 / min(self.ema_count, self.config.ema_length)
        with full_precision_matmul():
            diff = feats - self.ema_mean
            shift = alpha * diff.sum(dim=0)
            mean = self.ema_mean + shift
            cov = self.ema_cov + alpha * (diff.T @ diff - b * self.ema_cov) - torch.outer(shift, shift)
            self.ema_mean, self.ema_cov = mean.detach(), cov.detach()
            target = MultivariateNormal(mean, cov + self.template, validate_args=False)
            return kl_divergence(self.source_gaussian, target) + kl_divergence(
                target, self.source_gaussian
            )

    @staticmethod
    def confident_split(os: np.ndarray, seen: np.ndarray, unseen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """§9 step 6 on the host copy of the scores, the authors' exact index arithmetic
        (Python's a[-0] is a[0])."""
        down = np.sort(os[seen])[::-1]
        up = np.sort(os[unseen])[::-1]
        filter_down = down[-int(down.size / 2)]
        filter_up = up[int(up.size / 2)]
        return seen & (os < filter_down), unseen & (os > filter_up)

    def _cosines(self, feat: torch.Tensor) -> torch.Tensor:
        with full_precision_matmul():
            return F.normalize(feat, dim=1) @ self.prototypes.T

    # -- per batch ------------------------------------------------------------------------------
    def step(self, x: torch.Tensor) -> TTAOutput:
        cfg = self.config
        c = self.num_classes
        self.optimizer.zero_grad(set_to_none=True)
        with torch.enable_grad():
            self.model.eval()
            feat = self.encode(x)
            cos_src = self._cosines(feat)
            had_pool = self.pool.shape[0] > 0
            cos = cos_src
            with full_precision_matmul():
                if had_pool:  # normalised apart from cos_src: the authors' graph, summed as theirs
                    cos_pool = (F.normalize(feat, dim=1) @ self.pool.T).max(dim=1, keepdim=True).values
                    cos = torch.cat([cos_src, cos_pool], dim=1)
                # Every cosine the prototype expansion may compare: to the pool and to the batch.
                z = F.normalize(feat.detach(), dim=1)
                sims = z @ torch.cat([self.pool, z]).T
            logits = cos / cfg.delta
            before = cos_src.detach()
            r = before.max(dim=1).values
            os_all = 1 - cos.detach().max(dim=1).values
            # The step's one device-to-host copy: the algorithm branches on these values (the
            # Otsu thresholds, seen/unseen, which samples join the pool, whether to adapt).
            host = torch.cat([r[:, None], os_all[:, None], sims], dim=1).cpu().numpy()
            r_host, os_all_host, sims_host = host[:, 0], host[:, 1], host[:, 2:]
            os_src = np.asarray(1, dtype=r_host.dtype) - r_host  # = 1 − max cos_src, as on the device

            self.os_queue.extend(os_src.tolist())
            tau1 = otsu_threshold(list(self.os_queue))
            seen = os_src < np.asarray(tau1, dtype=os_src.dtype)  # compared in the tensors' dtype
            unseen = ~seen
            if unseen.any():
                tau2 = otsu_threshold(os_all_host[unseen])
                columns = grow_pool(r_host, sims_host, self.pool.shape[0], tau1, tau2, cfg.max_prototypes)
                self._set_pool(z, columns)
            labels = before.argmax(dim=1)

            terms: list[torch.Tensor] = []
            if seen.any():
                self.model.train()
                da = self.alignment_loss(self.encode(x))
                terms.append(cfg.effective_da_scale * cfg.da_loss_scale * da)
            if had_pool:
                if seen.any() and unseen.any():
                    seen, unseen = self.confident_split(os_src, seen, unseen)
                # An empty group gives a NaN mean with zero gradient in the authors' code;
                # dropping it leaves the same gradient (the ½ stays). Index tensors in batch
                # order pick the rows a boolean mask would, without a host wait.
                n_seen, n_unseen = int(seen.sum()), int(unseen.sum())
                picked = torch.as_tensor(np.concatenate([np.flatnonzero(seen), np.flatnonzero(unseen)]))
                picked = picked.to(x.device, non_blocking=True)
                seen_rows, unseen_rows = picked[:n_seen], picked[n_seen:]
                ce = []
                if n_seen:
                    ce.append(F.cross_entropy(logits[seen_rows, :c], labels[seen_rows]))
                if n_unseen:
                    outlier = torch.full((n_unseen,), c, dtype=torch.long, device=x.device)
                    ce.append(F.cross_entropy(logits[unseen_rows], outlier))
                if ce:
                    terms.append(cfg.ce_scale * 0.5 * torch.stack(ce).sum())
            if terms:
                with full_precision_matmul():  # the covariance's and the Cholesky factor's gradients
                    torch.stack(terms).sum().backward()
                self.optimizer.step()
                self.num_updates += 1
            self.optimizer.zero_grad(set_to_none=True)
        self.model.eval()
        if cfg.score_after_update:
            with torch.no_grad():
                after = self._cosines(self.encode(x))
        else:
            after = before
        return TTAOutput(torch.softmax(after / cfg.delta, dim=1), -after.max(dim=1).values)

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> TTAOutput:
        """Cosines to the source prototypes of the features as they stand, scored as ``step``
        scores them."""
        self.model.eval()
        cos = self._cosines(self.encode(x))
        return TTAOutput(torch.softmax(cos / self.config.delta, dim=1), -cos.max(dim=1).values)


def grow_pool(
    max_cos_src: np.ndarray, sims: np.ndarray, pool_size: int, tau1: float, tau2: float, capacity: int
) -> list[int]:
    """§9 step 3 on the host: the authors' loop visits the batch's samples by increasing max
    cos_src (ties: the first in the batch, as ``min`` picks) while 1 − max cos_src > τ₁; a visited
    sample joins the FIFO pool (at most ``capacity``) if 1 − its max cosine over the source
    prototypes and the pool *as the earlier samples left it* is > τ₂. That dependence makes the
    loop sequential; it runs here on B numbers and a B×(P+B) matrix of cosines ``sims`` (to the
    ``pool_size`` prototypes, then to the batch), comparing in the tensors' dtype as the
    authors' tensor comparisons do. Returns the new pool as columns of ``sims``."""
    dtype = max_cos_src.dtype
    one, tau1_, tau2_ = (np.asarray(v, dtype=dtype) for v in (1, tau1, tau2))
    columns = list(range(pool_size))
    visit = np.flatnonzero(one - max_cos_src > tau1_)
    for i in visit[np.argsort(max_cos_src[visit], kind="stable")]:
        nearest = max_cos_src[i]
        if columns:
            nearest = np.maximum(nearest, sims[i, columns].max())
        if one - nearest > tau2_:
            columns = (columns + [pool_size + int(i)])[-capacity:]
    return columns
