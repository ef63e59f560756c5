"""Helpers the tests share: seeded nets and images, and a bit-for-bit comparison of states.

Fixtures live in ``conftest.py``; plain functions that tests call with arguments live here and
are imported as ``from tests.support import …``."""

from __future__ import annotations

import copy
from collections import deque
from typing import Any

import numpy as np
import torch


def tiny_net(num_classes: int = 4, seed: int = 0) -> torch.nn.Module:
    """A randomly initialised CIFAR-style ResNet, small enough for exact oracle tests."""
    from stamplib.models.resnet_cifar import CifarResNet

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return CifarResNet(num_classes, widths=(4, 8, 8, 8), blocks=(1, 1, 1, 1))


def source_images(n: int = 48, seed: int = 0, size: int = 16) -> torch.Tensor:
    """Seeded uint8 images N×size×size×3: a tiny "source training set"."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, size, size, 3), dtype=torch.uint8, generator=g)


def calibrated_net(num_classes: int = 4, calibration: torch.Tensor | None = None, seed: int = 0) -> torch.nn.Module:
    """The digits benchmark's tiny ResNet, randomly initialised, with BN running statistics
    calibrated on ``calibration`` (uint8 NHWC; default :func:`source_images`), so that eval-mode
    and train-mode features live on the same scale as for a trained network (with a fresh net
    the source covariance is ~0 and OWTTT's Gaussians degenerate). Eval mode."""
    from stamplib.models import create

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = create("resnet_cifar_tiny", num_classes)
    images = source_images() if calibration is None else calibration
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for bn in bns:
        bn.momentum = None  # cumulative average over the calibration batch
    with torch.no_grad():
        model.train()(images.permute(0, 3, 1, 2).float().div(255).contiguous())
    for bn in bns:
        bn.momentum = 0.1
    return model.eval()


class TwoBNNet(torch.nn.Module):
    """Two conv+BatchNorm layers and a linear head: the smallest net whose BN layers a TTA
    method can reconfigure (CoTTA's and RoTTA's tests)."""

    def __init__(self, num_classes: int = 4) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(6)
        self.conv2 = torch.nn.Conv2d(6, 8, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


def two_bn_net(seed: int = 0) -> torch.nn.Module:
    """A seeded TwoBNNet with non-trivial BN statistics and affine parameters, in eval mode."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = TwoBNNet()
        for bn in (net.bn1, net.bn2):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 1.5)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.3, 0.3)
    return net.eval()


def image_batch(n: int = 16, seed: int = 1, size: int = 8) -> torch.Tensor:
    """Seeded uniform images [n, 3, size, size] in [0, 1]."""
    return torch.rand(n, 3, size, size, generator=torch.Generator().manual_seed(seed))


def uint8_images(n: int, size: int = 32, seed: int = 0) -> np.ndarray:
    """Seeded random uint8 images N×size×size×3, as files on disk hold them."""
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def assert_same(a: Any, b: Any, path: str = "state") -> None:
    """Recursively assert two states (tensors, dicts, sequences, scalars) are bit-identical."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                     and torch.equal(a.nan_to_num(), b.nan_to_num())), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), f"{path}: {sorted(a.keys() ^ b.keys(), key=str)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple, deque)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


#: Attributes that are not state: the frozen initial state ``reset`` restores from, the
#: read-only inputs, and the device.
_NOT_STATE = {"_initial", "source_data", "config", "cfg", "device"}


def method_state(method: Any) -> dict[str, Any]:
    """Everything a TTA method holds, as plain tensors and values: every module's state_dict,
    every optimiser's state, every generator's state and every memory's contents, found by
    walking the method's attributes. Two methods with equal states behave identically."""
    seen: set[int] = set()

    def walk(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.detach().clone()
        if isinstance(value, (bool, int, float, str, type(None))):
            return value
        if isinstance(value, torch.Generator):
            return value.get_state()
        if id(value) in seen:
            return "<seen>"
        seen.add(id(value))
        if isinstance(value, torch.nn.Module):
            return walk(dict(value.state_dict()))
        if isinstance(value, torch.optim.Optimizer):
            return walk(copy.deepcopy(value.state_dict()))
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple, deque)):
            return [walk(v) for v in value]
        if callable(value) and not hasattr(value, "__dict__"):
            return "<callable>"
        if hasattr(value, "__dict__"):
            return {k: walk(v) for k, v in vars(value).items() if not k.startswith("__")}
        if hasattr(value, "__slots__"):
            return {k: walk(getattr(value, k)) for k in value.__slots__ if hasattr(value, k)}
        return repr(value)

    return {k: walk(v) for k, v in vars(method).items() if k not in _NOT_STATE}
