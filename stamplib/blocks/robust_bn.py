"""RoTTA's robust batch normalisation (baselines.md §7, official ``RobustBN2d``).

The layer owns running statistics initialised from the source BN. In train mode every forward
first moves them towards the batch statistics,
``stored ← (1 − m)·stored + m·batch`` (biased batch variance, m = 0.05), and then normalises
with the *updated* statistics; in eval mode it normalises with the stored statistics and
changes nothing.

As in the official code, the train-mode normalisation uses the updated statistics *before*
detaching them, so the loss gradient also flows through the m·batch part of the mean and
variance; only the stored copy is detached.
"""

from __future__ import annotations

import torch
from torch import nn


class RobustBN2d(nn.Module):
    """BatchNorm2d replacement with momentum-updated statistics used for normalisation."""

    running_mean: torch.Tensor
    running_var: torch.Tensor

    def __init__(self, bn: nn.BatchNorm2d, momentum: float = 0.05) -> None:
        super().__init__()
        assert 0.0 <= momentum <= 1.0, f"robust BN momentum must be in [0, 1], got {momentum}"
        if bn.running_mean is None or bn.running_var is None:
            raise ValueError("RobustBN2d needs a source BatchNorm2d with running statistics")
        self.num_features = bn.num_features
        self.momentum = momentum
        self.eps = bn.eps
        self.register_buffer("running_mean", bn.running_mean.detach().clone())
        self.register_buffer("running_var", bn.running_var.detach().clone())
        # Own copies of the affine parameters (the official code deep-copies them), trainable.
        self.weight = nn.Parameter(bn.weight.detach().clone()) if bn.weight is not None else None
        self.bias = nn.Parameter(bn.bias.detach().clone()) if bn.bias is not None else None
        self.train(bn.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            var, mean = torch.var_mean(x, dim=(0, 2, 3), unbiased=False)
            # (1 − m)·stored + m·batch for both statistics with one operator per list (fewer launches on a GPU, the same
            # numbers on a CPU):
            # the same elementwise multiplications and addition, in the same order, as one per statistic.
            mean, var = torch._foreach_add(torch._foreach_mul([self.running_mean, self.running_var],
                                                              1.0 - self.momentum),
                                           torch._foreach_mul([mean, var], self.momentum))
            # Stored without a copy: nothing writes the statistics in place (a forward replaces them) and
            # no backward keeps them (subtraction and the ε addition save no input), so sharing the
            # graph's storage is safe (tests/blocks/test_robust_bn.py writes them before a backward).
            self.running_mean, self.running_var = mean.detach(), var.detach()
        else:
            mean, var = self.running_mean, self.running_var
        out = (x - mean.view(1, -1, 1, 1)) / torch.sqrt(var.view(1, -1, 1, 1) + self.eps)
        if self.weight is not None:
            out = out * self.weight.view(1, -1, 1, 1)
        if self.bias is not None:
            out = out + self.bias.view(1, -1, 1, 1)
        return out

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


def use_robust_bn(model: nn.Module, momentum: float = 0.05) -> list[nn.Parameter]:
    """Replace every BatchNorm2d of ``model`` (in place) by :class:`RobustBN2d`.

    Returns the affine parameters of the new layers, in module order, with ``requires_grad``
    set; the caller freezes everything else (baselines.md §7 "Configure").
    """
    params: list[nn.Parameter] = []
    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.BatchNorm2d):
                robust = RobustBN2d(child, momentum)
                setattr(module, child_name, robust)
    for module in model.modules():
        if isinstance(module, RobustBN2d):
            for p in (module.weight, module.bias):
                if p is not None:
                    p.requires_grad_(True)
                    params.append(p)
    return params
