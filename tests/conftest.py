"""Shared fixtures. Tests never write into the repository's results/ or figures/: each test
session gets its own results and figures folders. The built-in source model is shared with the
notebooks through the checkout's .cache/ (trained once, about a minute)."""

from __future__ import annotations

import os

import pytest
import torch

torch.set_num_threads(min(2, os.cpu_count() or 1))


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
