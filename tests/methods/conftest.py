"""Fixtures of the method tests: the networks the methods adapt, one per test module (the
methods copy them, so tests share them safely)."""

from __future__ import annotations

import pytest
import torch

from tests.support import calibrated_net, digits_net


@pytest.fixture(scope="module")
def base_model() -> torch.nn.Module:
    """The digits benchmark's tiny ResNet with seeded random weights (4 classes)."""
    return digits_net(4)


@pytest.fixture(scope="module")
def calibrated_model() -> torch.nn.Module:
    """The same network with BN statistics calibrated on source images (OWTTT's Gaussians)."""
    return calibrated_net(4)
