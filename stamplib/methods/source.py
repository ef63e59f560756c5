"""Source: the frozen source model in eval mode, source BN statistics (baselines.md §1)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from stamplib.blocks.entropy import logit_entropy
from stamplib.methods.base import HYPERPARAMETER_SETS, TTAMethod, TTAOutput, register


@dataclass(frozen=True)
class SourceConfig:
    pass


@register("source")
class Source(TTAMethod):
    config_cls = SourceConfig
    configs = {s: SourceConfig() for s in HYPERPARAMETER_SETS}

    def setup(self) -> None:
        self.model.eval()
        self.model.requires_grad_(False)

    @torch.no_grad()
    def step(self, x: torch.Tensor) -> TTAOutput:
        logits = self.model(x)
        return TTAOutput(torch.softmax(logits, dim=1), logit_entropy(logits))
