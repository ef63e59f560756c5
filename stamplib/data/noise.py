"""The Noise outlier set (protocol.md §6.1): 10,000 images, each pixel clip(N(0.5, 1), 0, 1)·255
truncated to uint8, drawn with numpy RandomState(1) in one call. Never corrupted."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch


@lru_cache(maxsize=4)
def noise_images(count: int = 10_000, size: int = 32) -> torch.Tensor:
    """uint8 [count, size, size, 3]; the first N of the 10,000 are the paper's first N."""
    rng = np.random.RandomState(seed=1)
    pixels = np.clip(rng.normal(0.5, 1.0, size=(10_000, size, size, 3)), 0.0, 1.0) * 255
    if count > 10_000:
        raise ValueError(f"the Noise set has 10,000 images, {count} were asked for")
    return torch.from_numpy(pixels[:count].astype(np.uint8))
