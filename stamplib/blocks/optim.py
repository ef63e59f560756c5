"""The two optimisers the BN-affine methods use, built from a typed config's fields."""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

OptimizerName = Literal["adam", "sgd"]


def make_optimizer(
    name: OptimizerName, params: list[nn.Parameter], lr: float, momentum: float = 0.9
) -> torch.optim.Optimizer:
    """``adam``: Adam(lr, betas (0.9, 0.999), no weight decay); ``sgd``: SGD(lr, momentum, no
    dampening or weight decay) — the settings of the authors' run scripts; one operator per
    parameter list (``foreach``), as on a GPU by default, with the per-tensor loop's numbers on a CPU."""
    assert lr > 0, f"learning rate must be positive, got {lr}"
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999), weight_decay=0.0, foreach=True)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, dampening=0.0, weight_decay=0.0, foreach=True)
    raise ValueError(f"unknown optimiser {name!r}; choose 'adam' or 'sgd'")
