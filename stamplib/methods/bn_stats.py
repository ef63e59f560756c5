"""BN Stats (Nado et al.): every batch normalised with its own statistics, no parameter
changes (baselines.md §2). The authors keep updating running statistics that are never
used; :class:`BatchStatsNorm2d` computes the same outputs without them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from stamplib.blocks.bn import use_batch_statistics
from stamplib.blocks.entropy import logit_entropy
from stamplib.methods.base import HYPERPARAMETER_SETS, TTAMethod, TTAOutput, register


@dataclass(frozen=True)
class BNStatsConfig:
    pass


@register("bn_stats")
class BNStats(TTAMethod):
    config_cls = BNStatsConfig
    configs = {s: BNStatsConfig() for s in HYPERPARAMETER_SETS}

    def setup(self) -> None:
        use_batch_statistics(self.model).eval()
        self.model.requires_grad_(False)

    @torch.no_grad()
    def step(self, x: torch.Tensor) -> TTAOutput:
        logits = self.model(x)
        return TTAOutput(torch.softmax(logits, dim=1), logit_entropy(logits))
