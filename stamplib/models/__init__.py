"""Source networks (protocol.md §4).

* :func:`create` builds an architecture and loads weights strictly: a registered checkpoint
  name (:mod:`stamplib.models.checkpoints`), a state_dict file, or — for ``resnet50`` — a
  torchvision weights name such as ``IMAGENET1K_V1`` (:mod:`.networks`).
* :func:`source_model` is the source network of a data set (its registry entry says which).
* :func:`train_source` trains a CIFAR source model with a §4.2 recipe, and
  :func:`train_source_for` the one a data set's entry names, on its training data (:mod:`.recipes`).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from stamplib import data
from stamplib.blocks.normalization import IMAGENET_MEAN, IMAGENET_STD, InputNormalization
from stamplib.models import checkpoints
from stamplib.models.builtin import DIGITS_CHECKPOINT, digits_source_model
from stamplib.models.checkpoints import (
    REGISTRY,
    CheckpointMismatchError,
    ChecksumMismatchError,
    MissingCheckpointError,
)
from stamplib.models.networks import ARCHITECTURES, create
from stamplib.models.recipes import RECIPES, TrainSourceResult, train_source, train_source_for
from stamplib.models.resnet_cifar import CifarResNet, resnet18_cifar, resnet_cifar_tiny


def source_model_card(dataset: str, network: int = 0) -> dict[str, object]:
    """What the sidecar of ``dataset``'s source network ``network`` (its training seed) says
    (building the digits model first if needed): architecture, classes, clean test accuracy and
    on how many images, epochs, training seconds and SHA-256."""
    entry = data.dataset(dataset)
    if entry.checkpoint == DIGITS_CHECKPOINT:
        digits_source_model()
    name = checkpoints.network_name(entry.checkpoint, network)
    side = checkpoints.read_sidecar(checkpoints.checkpoint_path(name)) or {}
    log = side.get("train_log", {})  # the digits model's sidecar keeps its training log apart
    return {
        "checkpoint": name,
        "architecture": side.get("architecture", entry.architecture),
        "parameters": sum(p.numel() for p in ARCHITECTURES[entry.architecture](entry.known).parameters()),
        "classes": side.get("num_classes", entry.known),
        "clean test accuracy (%)": round(100 * side["clean_test_accuracy"],
                                         2) if "clean_test_accuracy" in side else None,
        "test images": side.get("n_test"),
        "epochs": side.get("epochs", side.get("recipe", {}).get("epochs")),
        "training seconds": round(side.get("seconds", log.get("seconds", float("nan"))), 1),
        "sha256": (side.get("sha256") or "")[:16] + "…",
    }


def source_model_cards(datasets: Sequence[str]) -> list[dict[str, object]]:
    """:func:`source_model_card` of each of ``datasets``, in that order."""
    return [source_model_card(name) for name in datasets]


def source_model(dataset: str, progress: bool = True, network: int = 0) -> nn.Module:
    """The source network of an ID data set (its registry entry names architecture and
    weights; ``network`` k >= 1 is the same recipe trained with seed k,
    :func:`stamplib.models.checkpoints.network_name`), in eval mode on the CPU."""
    entry = data.dataset(dataset)
    if entry.checkpoint == DIGITS_CHECKPOINT:
        assert network == 0, "the digits benchmark has one source network"
        return digits_source_model(progress=progress)
    if not entry.checkpoint:
        with_model = [n for n, d in data.DATASETS.items() if d.checkpoint]
        raise ValueError(f"no source model for dataset {dataset!r}; known: {', '.join(with_model)}")
    weights = checkpoints.network_name(entry.checkpoint, network)
    return create(entry.architecture, entry.known, weights=weights, progress=progress).eval()


__all__ = [
    "ARCHITECTURES",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "RECIPES",
    "REGISTRY",
    "CheckpointMismatchError",
    "ChecksumMismatchError",
    "CifarResNet",
    "InputNormalization",
    "MissingCheckpointError",
    "TrainSourceResult",
    "create",
    "resnet18_cifar",
    "resnet_cifar_tiny",
    "source_model",
    "source_model_card",
    "source_model_cards",
    "train_source",
    "train_source_for",
]
