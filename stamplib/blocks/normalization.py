"""Input normalisation as part of the network: every model takes raw [0, 1] images, and a
network that expects mean/std-normalised inputs is wrapped in :class:`InputNormalization`
(never normalised in a data loader). The ImageNet statistics live here, once."""

from __future__ import annotations

import torch
from torch import nn

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class InputNormalization(nn.Module):
    """Wraps a network that expects mean/std-normalised inputs so it accepts [0,1] images."""

    def __init__(self, net: nn.Module, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        super().__init__()
        self.net = net
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std)


def input_normalization(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, std) buffers [1, 3, 1, 1] of the model's :class:`InputNormalization`."""
    for module in model.modules():
        if isinstance(module, InputNormalization):
            return module.mean, module.std
    raise ValueError(
        "clip_normalized_inputs=True needs a model wrapped in InputNormalization "
        "(the quirk concerns mean/std-normalised inputs); pass clip_normalized_inputs=False"
    )
