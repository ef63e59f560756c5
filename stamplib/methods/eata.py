"""EATA (Niu et al., ICML 2022) as run in the STAMP evaluation (baselines.md §5, §0.1, §0.2).

Per batch: logits = f(x) in train mode with BN on batch statistics; keep the samples whose
entropy is below E₀ = 0.4·ln C (reliable) and whose softmax is not too similar to a running
mean probability vector m (|cos| < ε, non-redundant); minimise their entropy weighted by
exp(E₀ − H) (detached) plus the anti-forgetting term Σ α·F·(θ − θ₀)² with the diagonal Fisher
information F of the BN affine parameters, estimated once from the first 2,000 clean source
images. Prediction and score come from the forward used for the update (before the step).

Authors' quirk kept by default (§5 "Reset"): m is *not* cleared by ``reset()``, so it carries
over from one corruption to the next. ``reset_moving_probs=True`` clears it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from stamplib.blocks.entropy import logit_entropy
from stamplib.blocks.fisher import fisher_information
from stamplib.blocks.source_stats import model_fingerprint
from stamplib.methods.base import TTAMethod, TTAOutput, index_mask, register


@dataclass(frozen=True)
class EATAConfig:
    lr: float
    d_margin: float  # ε: redundancy filter on |cos(m, softmax)| (D_MARGIN)
    fisher_alpha: float = 1.0  # weight α of the Fisher regulariser
    e_margin_coef: float = 0.4  # E₀ = coef·ln C
    fisher_samples: int = 2000  # first N source images by index
    fisher_batch_size: int = 64
    probs_momentum: float = 0.9  # m ← 0.9·m + 0.1·mean softmax
    #: False (authors' code, §5 "Reset"): m survives ``reset()``; True: cleared with the rest.
    reset_moving_probs: bool = False

    def __post_init__(self) -> None:
        assert self.lr > 0 and self.d_margin > 0 and self.fisher_alpha >= 0
        assert self.fisher_samples >= 1 and self.fisher_batch_size >= 1


@register("eata")
class EATA(TTAMethod):
    reports_trace = True
    config_cls = EATAConfig
    configs = {
        "cifar10_c": EATAConfig(lr=1e-3, d_margin=0.2),
        "cifar100_c": EATAConfig(lr=1e-3, d_margin=0.1),
        "imagenet_c": EATAConfig(lr=5e-4, d_margin=0.025),
        "cifar10_c_8_2": EATAConfig(lr=1e-3, d_margin=0.4, fisher_alpha=50.0),
        "cifar100_c_80_20": EATAConfig(lr=1e-3, d_margin=0.2),
    }
    needs_source_data = True
    exact_reset = {"reset_moving_probs": True}

    @classmethod
    def source_images_needed(cls, config: EATAConfig) -> int | None:
        return config.fisher_samples

    def setup(self) -> None:
        cfg = self.config
        fingerprint = model_fingerprint(self.model)
        params = self.adapt_bn_affine(exclude_last_stage=False)
        self.params = params
        self.e_margin = cfg.e_margin_coef * math.log(self.num_classes)
        # Fisher draws its shuffle from a generator of its own so that a cached Fisher and a
        # freshly computed one leave the method's generators in the same state.
        key = (
            f"eata_fisher/{fingerprint}/n{cfg.fisher_samples}/b{cfg.fisher_batch_size}"
            f"/seed{self.seed}/{self.device}"
        )
        self.fisher = self.source_statistic(key, self._compute_fisher)
        self.anchor = [p.detach().clone() for p in params]
        self.optimizer = torch.optim.Adam(params, lr=cfg.lr, betas=(0.9, 0.999), weight_decay=0.0,
                                          # one operator per list: a GPU's default, the same numbers on a CPU
                                          foreach=True)
        self.moving_probs: torch.Tensor | None = None

    def _compute_fisher(self) -> list[torch.Tensor]:
        images = self.source_data.images[: self.config.fisher_samples]
        g = torch.Generator().manual_seed(self.seed)
        return fisher_information(self.model, self.params, images, self.config.fisher_batch_size, g)

    def reset_buffers(self) -> None:
        if self.config.reset_moving_probs:
            self.moving_probs = None
        self.num_updates = 0  # batches with a non-empty selected set since the last reset

    # -- pieces, exposed for tests --------------------------------------------------------------
    def fisher_penalty(self) -> torch.Tensor:
        """Σ_params α·F·(θ − θ₀)² (differentiable in θ)."""
        terms = [
            (f * (p - p0) ** 2).sum() for f, p, p0 in zip(self.fisher, self.params, self.anchor)
        ]
        return self.config.fisher_alpha * torch.stack(terms).sum()

    def select(self, logits: torch.Tensor, entropy: torch.Tensor) -> torch.Tensor:
        """Indices of S₂: reliable (H < E₀) and, once m exists, non-redundant (|cos| < ε)."""
        reliable = torch.where(entropy < self.e_margin)[0]
        if self.moving_probs is None:
            return reliable
        probs = torch.softmax(logits[reliable], dim=1)
        cos = F.cosine_similarity(self.moving_probs.unsqueeze(0), probs, dim=1)
        return reliable[torch.abs(cos) < self.config.d_margin]

    @torch.no_grad()
    def update_moving_probs(self, probs: torch.Tensor) -> None:
        """m ← mean softmax of S₂ (first time) or 0.9·m + 0.1·mean; unchanged if S₂ is empty."""
        if probs.shape[0] == 0:
            return
        mean = probs.mean(dim=0)
        if self.moving_probs is None:
            self.moving_probs = mean.clone()
        else:
            k = self.config.probs_momentum
            self.moving_probs = k * self.moving_probs + (1.0 - k) * mean

    # -- per batch ------------------------------------------------------------------------------
    def step(self, x: torch.Tensor) -> TTAOutput:
        with torch.enable_grad():
            logits = self.model(x)
            entropy = logit_entropy(logits)
            selected = self.select(logits.detach(), entropy.detach())
            self.update_moving_probs(torch.softmax(logits.detach()[selected], dim=1))
            loss = None
            if selected.numel() > 0:
                h = entropy[selected]
                loss = (h * torch.exp(self.e_margin - h.detach())).mean() + self.fisher_penalty()
                loss.backward()
                self.optimizer.step()
                self.num_updates += 1
            self.optimizer.zero_grad(set_to_none=True)
        self.report(passed=index_mask(selected, x.shape[0]), loss=loss, step_size=self.config.lr)
        logits = logits.detach()
        return TTAOutput(torch.softmax(logits, dim=1), entropy.detach())
