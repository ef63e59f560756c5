"""Helpers the tests share: seeded nets and images, and a bit-for-bit comparison of states.

Fixtures live in ``conftest.py``; plain functions that tests call with arguments live here and
are imported as ``from tests.support import …``."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

from stamplib.evaluation.store import ResultsStore
from stamplib.methods import SourceData

# The method contract's helpers serve the tests too: seeded source images, BN calibration and
# the bit-for-bit comparison of method states.
from stamplib.methods.contract import assert_same, calibrate, method_state, source_images  # noqa: F401
from stamplib.paths import RunContext


def load_script(relative: str) -> ModuleType:
    """A repository script outside the package (``tools/…``, ``benchmarks/…``), imported from its path
    relative to the repository root, so that a test can call its functions."""
    path = Path(__file__).resolve().parents[1] / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def context_for(results: ResultsStore | str | os.PathLike, data_root: str | os.PathLike | None = None,
                device: str = "cpu", **fields: object) -> RunContext:
    """The run context a test's edge hands down: its results store (a folder or a
    ResultsStore), its data root (default: ``data`` beside the results, which the built-in data
    sets never read), figures beside them."""
    root = Path(results.root if isinstance(results, ResultsStore) else results)
    return RunContext(Path(data_root) if data_root else root.parent / "data", root, root.parent / "figures", device,
                      **fields)


def pretend_gpus(monkeypatch: object, count: int = 1) -> None:
    """torch says it sees ``count`` GPUs (none is touched): a command line or a run context of a
    GPU machine can be built here."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # type: ignore[attr-defined]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)  # type: ignore[attr-defined]


def tiny_net(num_classes: int = 4, seed: int = 0) -> torch.nn.Module:
    """A randomly initialised CIFAR-style ResNet, small enough for exact oracle tests."""
    from stamplib.models.resnet_cifar import CifarResNet

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return CifarResNet(num_classes, widths=(4, 8, 8, 8), blocks=(1, 1, 1, 1))


def digits_net(num_classes: int = 4, seed: int = 0) -> torch.nn.Module:
    """The digits benchmark's tiny ResNet with seeded random weights, in eval mode."""
    from stamplib.models import create

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return create("resnet_cifar_tiny", num_classes).eval()


def calibrated_net(num_classes: int = 4, calibration: torch.Tensor | None = None, seed: int = 0) -> torch.nn.Module:
    """:func:`digits_net` with BN running statistics calibrated on ``calibration`` (uint8 NHWC;
    default :func:`source_images`), so that eval-mode and train-mode features live on the same
    scale as for a trained network (with a fresh net the source covariance is ~0 and OWTTT's
    Gaussians degenerate). Eval mode."""
    return calibrate(digits_net(num_classes, seed), source_images() if calibration is None else calibration)


def source_data(name: str, n: int = 48, seed: int = 0, size: int = 16, num_classes: int = 4) -> SourceData:
    """:func:`source_images` with cyclic labels, as the source data of EATA and OWTTT."""
    return SourceData(name, source_images(n, seed, size), torch.arange(n) % num_classes)


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


def batch(seed: int, n: int = 16) -> torch.Tensor:
    """Seeded uniform 16×16 images [n, 3, 16, 16]: the method tests' batches."""
    return image_batch(n, seed, size=16)


def uint8_images(n: int, size: int = 32, seed: int = 0) -> np.ndarray:
    """Seeded random uint8 images N×size×size×3, as files on disk hold them."""
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)
