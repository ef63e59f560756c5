"""Source networks. Every model takes raw [0,1] images; normalisation, where a network needs
it, lives in :class:`InputNormalization`, never in the data loaders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from stamplib import paths
from stamplib.models.resnet_cifar import CifarResNet, resnet18_cifar, resnet_cifar_tiny

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


def _resnet50(num_classes: int) -> nn.Module:
    from torchvision.models import resnet50

    return InputNormalization(resnet50(weights=None, num_classes=num_classes), IMAGENET_MEAN, IMAGENET_STD)


ARCHITECTURES: dict[str, Callable[[int], nn.Module]] = {
    "resnet18_cifar": resnet18_cifar,
    "resnet_cifar_tiny": resnet_cifar_tiny,
    "resnet50": _resnet50,
}


def create(name: str, num_classes: int, weights: str | Path | None = None) -> nn.Module:
    """Build architecture ``name``; ``weights`` is the path of a state_dict, loaded strictly."""
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(sorted(ARCHITECTURES))}")
    model = ARCHITECTURES[name](num_classes)
    if weights is not None:
        path = Path(weights)
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {path} does not exist")
        state = torch.load(path, map_location="cpu", weights_only=True)
        target = model.net if isinstance(model, InputNormalization) else model
        target.load_state_dict(state, strict=True)
    return model


__all__ = ["ARCHITECTURES", "CifarResNet", "InputNormalization", "create", "resnet18_cifar", "resnet_cifar_tiny"]


def source_model(dataset: str, progress: bool = True) -> nn.Module:
    """The source network for an ID dataset, in eval mode on the CPU."""
    if dataset == "digits":
        from stamplib.models.builtin import digits_source_model

        return digits_source_model(progress=progress)
    raise FileNotFoundError(
        f"no source model for dataset {dataset!r} yet. Ways to get one: (1) train it with "
        "stamplib.models.train_source, (2) put the authors' released checkpoint in "
        f"{paths.checkpoints_dir()}, or (3) for ImageNet use "
        "torchvision's ResNet-50 weights."
    )
