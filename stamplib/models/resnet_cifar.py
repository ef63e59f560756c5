"""CIFAR-style ResNet with the authors' module names (protocol.md §4.1).

``conv1`` (3×3 stem, no max-pool), stages ``conv2_x`` … ``conv5_x`` of BasicBlocks with
``residual_function`` and ``shortcut`` sub-modules, ``avg_pool`` and ``fc``: the released
``ResNet18_{10,100,8,80}.pt`` state_dicts load with ``strict=True``, and the last stage is
recognisably ``conv5_x`` for the parameter selection of STAMP and SAR. Inputs are raw [0,1]
RGB images: the CIFAR networks were trained without mean/std normalisation.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.residual_function = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
        )
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.residual_function(x) + self.shortcut(x))


class CifarResNet(nn.Module):
    def __init__(
        self,
        num_classes: int,
        widths: Sequence[int] = (64, 128, 256, 512),
        blocks: Sequence[int] = (2, 2, 2, 2),
    ) -> None:
        super().__init__()
        assert len(widths) == 4 and len(blocks) == 4, "four stages: conv2_x .. conv5_x"
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, widths[0], 3, padding=1, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True),
        )
        in_ch = widths[0]
        stages = []
        for width, n_blocks, stride in zip(widths, blocks, (1, 2, 2, 2)):
            layers = []
            for s in [stride] + [1] * (n_blocks - 1):
                layers.append(BasicBlock(in_ch, width, s))
                in_ch = width
            stages.append(nn.Sequential(*layers))
        self.conv2_x, self.conv3_x, self.conv4_x, self.conv5_x = stages
        self.avg_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_ch, num_classes)
        self.feature_dim = in_ch

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Global-average-pooled penultimate features (used by OWTTT)."""
        x = self.conv1(x)
        x = self.conv5_x(self.conv4_x(self.conv3_x(self.conv2_x(x))))
        return torch.flatten(self.avg_pool(x), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def resnet18_cifar(num_classes: int) -> CifarResNet:
    """The paper's ResNet18_k (k = 10, 100, 8, 80)."""
    return CifarResNet(num_classes)


def resnet_cifar_tiny(num_classes: int) -> CifarResNet:
    """A compact ResNet of the same shape (widths 16–128, one block per stage) for the
    built-in teaching benchmark: trains in about a minute on two CPU cores."""
    return CifarResNet(num_classes, widths=(16, 32, 64, 128), blocks=(1, 1, 1, 1))
