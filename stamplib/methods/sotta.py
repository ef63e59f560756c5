"""SoTTA (Gong et al., NeurIPS 2023) as run in the STAMP evaluation (baselines.md §8, §0.1, §0.2).

Per batch: in eval mode (BN on the source running statistics) p = softmax(f(x)); samples with
max p ≥ C₀ enter the high-confidence uniform-class memory (HUS); if the memory holds anything,
one SAM step (base Adam) minimises the entropy of the memory batch in train mode (BN on the
memory batch's statistics; every forward also moves the running statistics, momentum 0.2) over
the BN affine parameters outside the last stage. The method returns p, computed before the step.

Authors' quirks kept by default:

* SAM radius ρ = 0.5 (§8; the original SoTTA code uses 0.05) — config ``rho``.
* The evaluator treats the returned probabilities as logits and scores −H(softmax(p)), so the
  default OOD score is H(softmax(p)) (§0.2) — ``score="entropy"`` gives the entropy H(p) of
  the prediction itself.
* An empty memory would crash the authors' code; here it skips the update (§8).
* ``reset()`` restores the model and SAM's own state but keeps Adam's moments and step counts
  (§0 "SAM optimiser state"); ``reset_base_optimizer_state=True`` clears them as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from stamplib.blocks.bn import freeze_all_but, norm_affine_parameters
from stamplib.blocks.entropy import entropy_terms, exact_prob_entropy, logit_entropy
from stamplib.blocks.hus import HUSMemory
from stamplib.blocks.sam import SAM, SAMStateSwitch
from stamplib.methods.base import SAMBaseline, TTAOutput, register

SoTTAScore = Literal["softmax_of_probs", "entropy"]


@dataclass(frozen=True)
class SoTTAConfig(SAMStateSwitch):
    lr: float
    threshold: float  # C₀: confidence needed to enter the memory
    capacity: int = 64
    rho: float = 0.5  # SAM radius of the STAMP runs (original SoTTA: 0.05)
    bn_momentum: float = 0.2
    loss_eps: float = 1e-6  # −p·log(p + eps) in the loss
    #: "softmax_of_probs" (evaluator quirk, §0.2): H(softmax(p)); "entropy": H(p).
    score: SoTTAScore = "softmax_of_probs"

    def __post_init__(self) -> None:
        assert self.lr > 0 and 0.0 <= self.threshold <= 1.0 and self.capacity >= 1
        assert self.score in ("softmax_of_probs", "entropy"), self.score


@register("sotta")
class SoTTA(SAMBaseline):
    config_cls = SoTTAConfig
    configs = {
        "cifar10_c": SoTTAConfig(lr=1e-4, threshold=0.9),
        "cifar100_c": SoTTAConfig(lr=1e-4, threshold=0.5),
        "imagenet_c": SoTTAConfig(lr=1e-4, threshold=0.33),
        "cifar10_c_8_2": SoTTAConfig(lr=1e-3, threshold=0.995),
        "cifar100_c_80_20": SoTTAConfig(lr=1e-3, threshold=0.5),
    }

    def setup(self) -> None:
        cfg = self.config
        params = norm_affine_parameters(self.model, exclude_last_stage=True)
        for m in self.model.modules():
            if isinstance(m, nn.BatchNorm2d):
                assert m.track_running_stats, "SoTTA needs BN layers with source running statistics"
                m.momentum = cfg.bn_momentum
        freeze_all_but(self.model, params)
        self.model.eval()
        self.optimizer = self.sam(
            params, torch.optim.Adam, betas=(0.9, 0.999), weight_decay=0.0,
            foreach=True,  # one operator per list: a GPU's default, the same numbers on a CPU
        )
        self.memory = HUSMemory(
            self.num_classes, cfg.capacity, cfg.threshold, generator=self.cpu_generator
        )

    def reset_buffers(self) -> None:
        self.memory.clear()
        self.num_updates = 0

    def loss(self, logits: torch.Tensor) -> torch.Tensor:
        """Mean over samples *and classes* of −p·log(p + 1e-6), i.e. entropy / C, averaged."""
        return entropy_terms(torch.softmax(logits, dim=1), self.config.loss_eps).mean()

    def step(self, x: torch.Tensor) -> TTAOutput:
        self.model.eval()
        with torch.no_grad():
            probs = torch.softmax(self.model(x), dim=1)
            conf, label = probs.max(dim=1)
            self.memory.add(x, label, conf, self.sample_tags(x.shape[0]))  # one host copy of both
        loss = self._adapt(self.memory.samples()) if len(self.memory) > 0 else None
        self.report(passed=conf >= self.memory.threshold, loss=loss, memory_tags=self.memory.tags(),
                    memory_labels=self.memory.labels(), step_size=self.config.lr)
        return TTAOutput(probs, self._score(probs))

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> TTAOutput:
        self.model.eval()
        probs = torch.softmax(self.model(x), dim=1)
        return TTAOutput(probs, self._score(probs))

    def _score(self, probs: torch.Tensor) -> torch.Tensor:
        if self.config.score == "softmax_of_probs":
            return logit_entropy(probs)
        return exact_prob_entropy(probs)

    def _adapt(self, data: torch.Tensor) -> torch.Tensor:
        """One SAM update on the memory; returns the loss before it (detached)."""
        sam: SAM = self.optimizer
        self.model.train()
        with torch.enable_grad():
            loss = self.loss(self.model(data))
            loss.backward()
            sam.first_step(zero_grad=True)
            self.loss(self.model(data)).backward()
            sam.second_step(zero_grad=True)
        self.model.eval()
        self.num_updates += 1
        return loss.detach()
