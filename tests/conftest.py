"""Shared fixtures. Tests never write into the repository's results/ or figures/: each test
session gets its own results and figures folders. The built-in source model is shared with the
notebooks through the checkout's .cache/ (trained once, about a minute)."""

from __future__ import annotations

import os
from collections import deque

# One intra-op thread: the suite runs in two xdist workers on two cores, and tiny models on
# oversubscribed OpenMP threads run up to 100x slower. The environment variable reaches the
# processes the tests start (notebook kernels, CLI and grid subprocesses); it must be set
# before torch is imported.
os.environ["OMP_NUM_THREADS"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _isolated_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("STAMPLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("STAMPLIB_FIGURES", str(tmp_path / "figures"))


@pytest.fixture(scope="session")
def digits_model():
    from stamplib.models import source_model

    return source_model("digits", progress=False)


def tiny_net(num_classes: int = 4, seed: int = 0) -> torch.nn.Module:
    """A randomly initialised CIFAR-style ResNet, small enough for exact oracle tests."""
    from stamplib.models.resnet_cifar import CifarResNet

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return CifarResNet(num_classes, widths=(4, 8, 8, 8), blocks=(1, 1, 1, 1))


def assert_same(a, b, path: str = "state") -> None:
    """Recursively assert two states (tensors, dicts, sequences, scalars) are bit-identical."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a, b), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple, deque)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


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
