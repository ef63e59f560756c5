"""Tent (Wang et al.): entropy minimisation over all BN affine parameters with Adam,
BN in batch-statistics mode (baselines.md §3). Prediction and score come from the forward
used for the update, i.e. before this batch's step."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from stamplib.blocks.entropy import logit_entropy
from stamplib.methods.base import TTAMethod, TTAOutput, register


@dataclass(frozen=True)
class TentConfig:
    lr: float


@register("tent")
class Tent(TTAMethod):
    config_cls = TentConfig
    configs = {
        "cifar10_c": TentConfig(lr=1e-3),
        "cifar100_c": TentConfig(lr=1e-4),
        "imagenet_c": TentConfig(lr=2.5e-4),
        "cifar10_c_8_2": TentConfig(lr=1e-4),
        "cifar100_c_80_20": TentConfig(lr=1e-3),
    }

    def setup(self) -> None:
        params = self.adapt_bn_affine(exclude_last_stage=False)
        self.optimizer = torch.optim.Adam(params, lr=self.config.lr, betas=(0.9, 0.999), weight_decay=0.0,
                                          # one operator per list: a GPU's default, the same numbers on a CPU
                                          foreach=True)

    def step(self, x: torch.Tensor) -> TTAOutput:
        with torch.enable_grad():
            logits = self.model(x)
            entropy = logit_entropy(logits)
            entropy.mean().backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        logits = logits.detach()
        return TTAOutput(torch.softmax(logits, dim=1), entropy.detach())
