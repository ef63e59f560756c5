"""The penultimate features of a classifier and its final linear layer.

OWTTT classifies by cosine similarity to source prototypes in feature space, and UniEnt
scores outliers by the cosine similarity between a sample's features and the rows of the
final linear layer (its class prototypes); both need the network split into an encoder and
the head. Our CIFAR ResNet has a ``features`` method; other networks are expected to end in
a linear layer named ``fc`` (torchvision ResNets, possibly inside an ``InputNormalization``
wrapper's ``.net``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from torch import nn


def _head_holder(model: nn.Module) -> nn.Module:
    """The module whose ``fc`` attribute is the final layer (unwrapping ``.net`` wrappers)."""
    holder = model
    while not isinstance(getattr(holder, "fc", None), nn.Module):
        inner = getattr(holder, "net", None)
        if not isinstance(inner, nn.Module):
            raise ValueError(
                f"cannot find the head of {type(model).__name__}: it needs a final layer named fc "
                "(optionally inside a .net wrapper)"
            )
        holder = inner
    return holder


def linear_head(model: nn.Module) -> nn.Linear:
    """The final linear layer ``fc``; its weight rows are the class prototypes of UniEnt."""
    head = _head_holder(model).fc
    if not isinstance(head, nn.Linear):
        raise ValueError(f"the final layer of {type(model).__name__} is a {type(head).__name__}, not nn.Linear")
    return head


def feature_encoder(model: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """Everything before the final linear layer, as a function of the input batch.

    Uses the model's ``features`` method when it has one (our CIFAR ResNet); otherwise finds
    the module holding ``fc`` (unwrapping ``.net`` wrappers such as InputNormalization) and
    runs the full forward with ``fc`` temporarily replaced by an identity, so that the very
    same parameters (and BN buffers) serve both the encoder and the classifier.
    """
    features = getattr(model, "features", None)
    if inspect.ismethod(features):
        return features
    try:
        holder = _head_holder(model)
    except ValueError:
        raise ValueError(
            f"cannot find the encoder of {type(model).__name__}: it needs a features() "
            "method or a final layer named fc (optionally inside a .net wrapper)"
        ) from None

    def encode(x: torch.Tensor) -> torch.Tensor:
        fc = holder.fc
        holder.fc = nn.Identity()
        try:
            return torch.flatten(model(x), 1)
        finally:
            holder.fc = fc

    return encode
