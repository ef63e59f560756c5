"""Datasets, corruptions and test streams.

``build_stream`` turns (ID dataset, outlier set, corruption, severity, ratio, seed) into a
:class:`Stream`. ID datasets and outlier sets are looked up in two registries so that new
loaders plug in without touching the runner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import torch

from stamplib.data.benchmark import load_digits_benchmark
from stamplib.data.noise import noise_images
from stamplib.data.streams import Batch, Stream, mix, outliers_for_ratio


@dataclass(frozen=True)
class IDSet:
    images: torch.Tensor  # uint8 [N, H, W, 3], clean
    labels: torch.Tensor
    num_classes: int


@dataclass(frozen=True)
class OutlierSource:
    load: Callable[[], torch.Tensor]  # clean uint8 pool [N, H, W, 3], in protocol order
    corrupted: bool  # carries the ID stream's corruption (all but Noise, protocol.md §1)


ID_SETS: dict[str, Callable[[], IDSet]] = {
    "digits": lambda: IDSet(
        load_digits_benchmark().test_images, load_digits_benchmark().test_labels, load_digits_benchmark().num_classes
    ),
}

OUTLIER_SETS: dict[str, OutlierSource] = {
    "noise": OutlierSource(lambda: noise_images(), corrupted=False),
    "digits_heldout": OutlierSource(lambda: load_digits_benchmark().heldout_images, corrupted=True),
}


def id_set(dataset: str) -> IDSet:
    if dataset not in ID_SETS:
        raise ValueError(f"unknown dataset {dataset!r}; available: {', '.join(sorted(ID_SETS))}")
    return ID_SETS[dataset]()


def num_classes(dataset: str) -> int:
    return id_set(dataset).num_classes


def apply_corruption(images: torch.Tensor, corruption: str, severity: int, seed: int) -> torch.Tensor:
    if corruption == "none":
        return images
    from stamplib.data.corruptions import corrupt

    return corrupt(images, corruption, severity, seed=seed)


@lru_cache(maxsize=64)
def build_stream(
    dataset: str,
    outliers: str,
    corruption: str,
    severity: int = 5,
    outlier_ratio: float = 0.2,
    seed: int = 0,
    max_id: int | None = None,
    batch_size: int = 64,
) -> Stream:
    """The test stream of one corruption (cached in memory: every method of a table reuses it)."""
    data = id_set(dataset)
    id_images, id_labels = data.images, data.labels
    if max_id is not None:
        id_images, id_labels = id_images[:max_id], id_labels[:max_id]
    id_images = apply_corruption(id_images, corruption, severity, seed)
    pool = None
    n_out = 0
    if outliers != "none":
        if outliers not in OUTLIER_SETS:
            raise ValueError(
                f"unknown outlier set {outliers!r}; available: {', '.join(sorted(OUTLIER_SETS))}, none"
            )
        n_out = outliers_for_ratio(id_images.shape[0], outlier_ratio)
        source = OUTLIER_SETS[outliers]
        pool = source.load()[:n_out]
        if source.corrupted:
            # A seed of its own, so outliers do not replay the ID images' random draws.
            pool = apply_corruption(pool, corruption, severity, seed + 7919)
    return mix(id_images, id_labels, pool, n_out, seed=seed, batch_size=batch_size)


__all__ = [
    "Batch",
    "ID_SETS",
    "IDSet",
    "OUTLIER_SETS",
    "OutlierSource",
    "Stream",
    "build_stream",
    "id_set",
    "mix",
    "num_classes",
    "outliers_for_ratio",
]
