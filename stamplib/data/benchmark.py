"""The built-in teaching benchmark: scikit-learn's handwritten digits as a tiny CIFAR.

It needs no download, so every notebook runs offline in minutes. It is *not* the paper's
benchmark: numbers on it show how the methods behave, not what the paper measured.

* Images: the 1,797 8×8 digits, rendered at 32×32 RGB with a random size (18–28 px), random
  position and random foreground/background colours (contrast kept), deterministic per seed.
* Known classes: digits 0–7 (C = 8). Each known-class digit goes to train or test (60/40,
  stratified); the source network trains on 4 renderings of each train digit.
* Test pool: 4 renderings of each test digit (≈ 2,300 images), corrupted at test time.
* Outlier pools: ``digits_heldout`` — renderings of digits 8 and 9 (never seen in training,
  corrupted like the ID images, the class-split flavour); ``noise`` — protocol.md §6.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

KNOWN_CLASSES = 8
IMAGE_SIZE = 32


@dataclass(frozen=True)
class DigitsBenchmark:
    train_images: torch.Tensor  # uint8 [N, 32, 32, 3]
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    heldout_images: torch.Tensor  # digits 8 and 9
    num_classes: int = KNOWN_CLASSES


def _render(digits: np.ndarray, copies: int, g: torch.Generator) -> torch.Tensor:
    """Render 8×8 digits (values 0–16) as uint8 32×32 RGB, ``copies`` random renderings each."""
    base = torch.from_numpy(digits).float().div(16.0).view(-1, 1, 8, 8)
    base = base.repeat(copies, 1, 1, 1)
    n = base.shape[0]
    size = torch.rand(n, generator=g) * 10.0 + 18.0  # glyph size in pixels
    scale = IMAGE_SIZE / size
    max_shift = (IMAGE_SIZE - size) / IMAGE_SIZE  # keep the glyph inside the frame
    shift = (torch.rand(n, 2, generator=g) * 2.0 - 1.0) * max_shift.view(-1, 1) * scale.view(-1, 1)
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0] = scale
    theta[:, 1, 1] = scale
    theta[:, :, 2] = shift
    grid = F.affine_grid(theta, [n, 1, IMAGE_SIZE, IMAGE_SIZE], align_corners=False)
    mask = F.grid_sample(base, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    background = torch.rand(n, 3, generator=g)
    foreground = torch.rand(n, 3, generator=g)
    luma = torch.tensor([0.299, 0.587, 0.114])
    weak = ((foreground - background) @ luma).abs() < 0.35
    foreground[weak] = 1.0 - background[weak]  # guarantee a readable glyph
    image = background.view(n, 3, 1, 1) * (1 - mask) + foreground.view(n, 3, 1, 1) * mask
    return (image.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous()


@lru_cache(maxsize=2)
def load_digits_benchmark(seed: int = 0) -> DigitsBenchmark:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images, labels = digits.images, digits.target
    rng = np.random.RandomState(seed)
    train_idx, test_idx = [], []
    for c in range(KNOWN_CLASSES):
        idx = rng.permutation(np.flatnonzero(labels == c))
        cut = int(round(0.6 * len(idx)))
        train_idx.extend(idx[:cut])
        test_idx.extend(idx[cut:])
    train_idx, test_idx = np.sort(train_idx), np.sort(test_idx)
    heldout_idx = np.flatnonzero(labels >= KNOWN_CLASSES)
    g = torch.Generator().manual_seed(seed)
    copies = 4
    return DigitsBenchmark(
        train_images=_render(images[train_idx], copies, g),
        train_labels=torch.from_numpy(labels[train_idx]).long().repeat(copies),
        test_images=_render(images[test_idx], copies, g),
        test_labels=torch.from_numpy(labels[test_idx]).long().repeat(copies),
        heldout_images=_render(images[heldout_idx], copies, g),
    )
