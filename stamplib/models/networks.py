"""Network architectures and ``create``: build one and load its weights strictly.

Every model takes raw [0,1] images; normalisation, where a network needs it, lives in
:class:`~stamplib.blocks.normalization.InputNormalization`, never in the data loaders.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from stamplib.blocks.normalization import IMAGENET_MEAN, IMAGENET_STD, InputNormalization
from stamplib.models import checkpoints
from stamplib.models.checkpoints import REGISTRY, CheckpointMismatchError, MissingCheckpointError
from stamplib.models.resnet_cifar import resnet18_cifar, resnet_cifar_tiny


def _resnet50(num_classes: int) -> nn.Module:
    from torchvision.models import resnet50

    return InputNormalization(resnet50(weights=None, num_classes=num_classes), IMAGENET_MEAN, IMAGENET_STD)


ARCHITECTURES: dict[str, Callable[[int], nn.Module]] = {
    "resnet18_cifar": resnet18_cifar,
    "resnet_cifar_tiny": resnet_cifar_tiny,
    "resnet50": _resnet50,
}

# Which torchvision weights enum serves which architecture (protocol.md §4.3).
_TORCHVISION_WEIGHTS = {"resnet50": "ResNet50_Weights"}


def _torchvision_weights(name: str, weights: str):  # -> torchvision WeightsEnum member | None
    enum_name = _TORCHVISION_WEIGHTS.get(name)
    if enum_name is None:
        return None
    import torchvision.models

    enum = getattr(torchvision.models, enum_name)
    member = weights.removeprefix(f"{enum_name}.")
    return enum[member] if member in enum.__members__ else None


def _torchvision_state_dict(member, progress: bool) -> dict[str, torch.Tensor]:
    """torchvision's weights API (cache first, download otherwise); one clear error offline."""
    file = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(member.url)
    try:
        return member.get_state_dict(progress=progress)
    except Exception as err:  # URLError, socket and HTTP errors when there is no network
        if file.is_file():
            raise CheckpointMismatchError(
                f"torchvision weights {type(member).__name__}.{member.name} are cached at {file} but "
                f"cannot be loaded ({type(err).__name__}: {err}); delete the file and fetch it again "
                f"from {member.url}"
            ) from err
        raise MissingCheckpointError(
            f"torchvision weights {type(member).__name__}.{member.name} are not cached and could not "
            f"be downloaded ({type(err).__name__}: {err}). torchvision looks for {file} "
            "($TORCH_HOME/hub/checkpoints/, TORCH_HOME defaults to ~/.cache/torch): copy "
            f"{member.url} there from a machine with internet access."
        ) from err


def create(name: str, num_classes: int, weights: str | Path | None = None, progress: bool = False) -> nn.Module:
    """Build architecture ``name`` with ``num_classes`` outputs and load ``weights`` strictly.

    ``weights``: None (random init), a registered checkpoint name (``ResNet18_10``, …; the file
    is SHA-256-verified), a torchvision weights name for ``resnet50`` (``IMAGENET1K_V1``), or the
    path of a state_dict file. Keys or shapes that do not fit raise
    :class:`CheckpointMismatchError` naming the expected vs found keys/shapes.
    """
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(sorted(ARCHITECTURES))}")
    if weights is None:
        return ARCHITECTURES[name](num_classes)
    # Weights are resolved before the network is built: a missing file fails fast, without
    # initialising 25M parameters first.
    tv_member = _torchvision_weights(name, weights) if isinstance(weights, str) else None
    if isinstance(weights, str) and checkpoints.base_name(weights) in REGISTRY:
        entry = REGISTRY[checkpoints.base_name(weights)]  # network k of a registered checkpoint: its architecture
        if (entry.architecture, entry.num_classes) != (name, num_classes):
            raise CheckpointMismatchError(
                f"checkpoint {weights!r} is a {entry.architecture} with {entry.num_classes} classes, "
                f"not a {name} with {num_classes}: call create({entry.architecture!r}, "
                f"{entry.num_classes}, weights={weights!r})"
            )
        state, source = checkpoints.load(weights), f"checkpoint {weights!r} ({checkpoints.checkpoint_path(weights)})"
    elif tv_member is not None:
        state, source = _torchvision_state_dict(tv_member, progress), f"torchvision {tv_member}"
    else:
        path = Path(weights)
        if not path.is_file():
            if isinstance(weights, str) and not path.suffix and os.sep not in weights:
                tv = f"; torchvision weights for {name}" if name in _TORCHVISION_WEIGHTS else ""
                raise MissingCheckpointError(
                    f"weights {weights!r} is neither a registered checkpoint ({', '.join(REGISTRY)}){tv} "
                    "nor an existing file"
                )
            raise FileNotFoundError(f"checkpoint file {path} does not exist")
        state, source = checkpoints.load_file(path), f"checkpoint file {path}"
    model = ARCHITECTURES[name](num_classes)
    target = model.net if isinstance(model, InputNormalization) else model
    checkpoints.load_strict(target, state, source)
    return model
