"""Test streams: ID and outlier images mixed, shuffled with a seed, served in batches.

:func:`build_stream` turns (ID data set, outlier set, corruption, severity, ratio, seed) into a
:class:`Stream`, reading both through the data set registry.

Images stay resident as one uint8 N×H×W×3 tensor; a batch is a slice converted to float
N×3×H×W in [0,1] on the target device (no DataLoader: the data fits in memory).

Mixing follows protocol.md §1: the *first* N outliers of the pool (not a random sample), the
concatenation shuffled uniformly. Unlike the authors' code, the order depends only on the
stream seed, not on how much randomness a method consumed, so every method sees the same order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from stamplib import paths, validation
from stamplib.data.lookup import check_names, dataset, outlier_set
from stamplib.data.registry import CLOSED_SET


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
        validation.check_positive_int("batch_size", self.batch_size, "the paper uses 64")

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
    validation.check_outlier_ratio(ratio)
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


def apply_corruption(images: torch.Tensor, corruption: str, severity: int, seed: int) -> torch.Tensor:
    if corruption == "none":
        return images
    from stamplib.data.corruptions import corrupt

    return corrupt(images, corruption, severity, seed=seed)


def check_stream_args(
    dataset: str, outliers: str, corruption: str, severity: int, outlier_ratio: float, seed: int,
    max_id: int | None, batch_size: int,
) -> None:
    """Everything :func:`build_stream` can refuse without reading a file, checked up front."""
    check_names(dataset, outliers, (corruption,))
    validation.check_severity(severity)
    validation.check_outlier_ratio(outlier_ratio)
    validation.check_seed(seed)
    if max_id is not None:
        validation.check_positive_int("max_id", max_id, "or None for every ID sample")
    validation.check_positive_int("batch_size", batch_size, "the paper uses 64")


def build_stream(
    dataset: str,
    outliers: str,
    corruption: str,
    severity: int = 5,
    outlier_ratio: float = 0.2,
    seed: int = 0,
    max_id: int | None = None,
    batch_size: int = 64,
    *,
    data_root: str | os.PathLike | None = None,
) -> Stream:
    """The test stream of one corruption (cached in memory: every method of a table reuses it).

    ID images: the released corrupted set when the data set has one, else the clean test set
    corrupted with ``seed``. Outliers: the *first* N of the pool (N from ``outlier_ratio``,
    protocol.md §1.1/§3.2), corrupted like the ID images except Noise, resized to the ID size.
    Names and numbers are checked before any image is read.
    """
    check_stream_args(dataset, outliers, corruption, severity, outlier_ratio, seed, max_id, batch_size)
    return _build_stream(
        dataset, outliers, corruption, severity, outlier_ratio, seed, max_id, batch_size,
        str(paths.data_root(data_root)),
    )


@lru_cache(maxsize=64)
def _build_stream(
    dataset_name: str, outliers: str, corruption: str, severity: int, outlier_ratio: float, seed: int,
    max_id: int | None, batch_size: int, root_str: str,
) -> Stream:
    root = Path(root_str)
    data = dataset(dataset_name)
    if corruption != "none" and data.released is not None:
        id_images, id_labels = data.released(root, corruption, severity)
        if max_id is not None:
            id_images, id_labels = id_images[:max_id], id_labels[:max_id]
    else:
        id_images, id_labels = data.clean_test(root)
        if max_id is not None:
            id_images, id_labels = id_images[:max_id], id_labels[:max_id]
        id_images = apply_corruption(id_images, corruption, severity, seed)
    pool = None
    n_out = 0
    if outliers != CLOSED_SET:
        source = outlier_set(outliers, data)
        n_out = outliers_for_ratio(id_images.shape[0], outlier_ratio)
        if source.corrupted and corruption != "none" and source.released is not None:
            pool = source.released(root, corruption, severity, n_out)
        if pool is None:
            pool = source.load(root, n_out)[:n_out]
            if source.corrupted:
                # A seed of its own, so outliers do not replay the ID images' random draws.
                pool = apply_corruption(pool, corruption, severity, seed + 7919)
        pool = pool[:n_out]
        if pool.shape[0] and pool.shape[1:3] != id_images.shape[1:3]:
            from stamplib.data.loaders import resize_images

            if id_images.shape[1] != id_images.shape[2]:
                raise ValueError(f"cannot resize outliers to non-square ID images {tuple(id_images.shape[1:3])}")
            pool = resize_images(pool, int(id_images.shape[1]))
    return mix(id_images, id_labels, pool, n_out, seed=seed, batch_size=batch_size)


build_stream.cache_clear = _build_stream.cache_clear  # type: ignore[attr-defined]
