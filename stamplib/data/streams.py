"""Test streams: ID and outlier images mixed, shuffled with a seed, served in batches.

Images stay resident as one uint8 N×H×W×3 tensor; a batch is a slice converted to float
N×3×H×W in [0,1] on the target device (no DataLoader: the data fits in memory).

Mixing follows protocol.md §1: the *first* N outliers of the pool (not a random sample), the
concatenation shuffled uniformly. Unlike the authors' code, the order depends only on the
stream seed, not on how much randomness a method consumed, so every method sees the same order.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Batch:
    x: torch.Tensor  # float [B, 3, H, W] in [0, 1]
    y: torch.Tensor  # long [B]; −1 for outliers
    is_outlier: torch.Tensor  # bool [B]


@dataclass(frozen=True)
class Stream:
    images: torch.Tensor  # uint8 [N, H, W, 3], already in stream order
    labels: torch.Tensor  # long [N], −1 for outliers
    batch_size: int = 64

    def __post_init__(self) -> None:
        # ValueError, not assert: these are caller mistakes and must survive ``python -O``.
        if self.images.dtype != torch.uint8 or self.images.dim() != 4 or self.images.shape[3] != 3:
            raise ValueError(
                f"stream images must be uint8 N×H×W×3, got {self.images.dtype} {tuple(self.images.shape)}; "
                "convert float N×3×H×W in [0,1] with (x * 255).round().byte().permute(0, 2, 3, 1)"
            )
        if self.labels.shape != (self.images.shape[0],):
            raise ValueError(
                f"stream labels must be one per image ({self.images.shape[0]}), got shape {tuple(self.labels.shape)}"
            )
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, numbers.Integral) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer (the paper uses 64), got {self.batch_size!r}")

    @property
    def is_outlier(self) -> torch.Tensor:
        return self.labels < 0

    @property
    def num_outliers(self) -> int:
        return int(self.is_outlier.sum())

    def __len__(self) -> int:
        """Number of batches (the last one may be partial)."""
        return -(-self.images.shape[0] // self.batch_size)

    def batches(self, device: str | torch.device = "cpu") -> Iterator[Batch]:
        images = self.images.to(device)
        labels = self.labels.to(device)
        for start in range(0, images.shape[0], self.batch_size):
            chunk = images[start : start + self.batch_size]
            x = chunk.permute(0, 3, 1, 2).float().div_(255.0).contiguous()
            y = labels[start : start + self.batch_size]
            yield Batch(x=x, y=y, is_outlier=y < 0)


def outliers_for_ratio(num_id: int, ratio: float) -> int:
    """N outliers giving an outlier share ``ratio`` of the stream: N = num_id·r/(1−r)
    (protocol.md §3.2; 0.2 → num_id/4)."""
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"outlier ratio must be in [0, 1), got {ratio}")
    return round(num_id * ratio / (1.0 - ratio))


def mix(
    id_images: torch.Tensor,
    id_labels: torch.Tensor,
    outlier_images: torch.Tensor | None,
    num_outliers: int,
    seed: int,
    batch_size: int = 64,
) -> Stream:
    """Concatenate ID images with the first ``num_outliers`` outliers and shuffle with ``seed``."""
    if num_outliers < 0:
        raise ValueError(f"num_outliers must be ≥ 0, got {num_outliers}; outliers_for_ratio(n_id, ratio) gives it")
    if num_outliers > 0:
        if outlier_images is None or outlier_images.shape[0] < num_outliers:
            have = 0 if outlier_images is None else outlier_images.shape[0]
            raise ValueError(f"need {num_outliers} outlier images, the outlier pool has {have}")
        if outlier_images.shape[1:] != id_images.shape[1:]:
            raise ValueError(
                f"outlier images are {tuple(outlier_images.shape[1:])}, ID images "
                f"{tuple(id_images.shape[1:])}: resize the outlier set first"
            )
        images = torch.cat((id_images, outlier_images[:num_outliers]))
        labels = torch.cat((id_labels.long(), torch.full((num_outliers,), -1, dtype=torch.long)))
    else:
        images, labels = id_images, id_labels.long()
    order = torch.randperm(images.shape[0], generator=torch.Generator().manual_seed(seed))
    return Stream(images[order].contiguous(), labels[order], batch_size)
