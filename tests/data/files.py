"""Small files in the real on-disk formats of the data sets, written under a test's data root."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from tests.support import uint8_images as images


def write_cifar_batch(path: Path, imgs: np.ndarray, labels: np.ndarray, key: bytes = b"labels") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = imgs.transpose(0, 3, 1, 2).reshape(len(imgs), 3072)  # the official R…G…B row layout
    with open(path, "wb") as fh:
        pickle.dump({b"data": rows, key: list(map(int, labels)), b"batch_label": b"x"}, fh)


def write_cifar10(root: Path, n_test: int = 20, n_train_batch: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """torchvision's CIFAR-10 layout; returns the test images and labels."""
    folder = root / "cifar-10-batches-py"
    for i in range(1, 6):
        write_cifar_batch(folder / f"data_batch_{i}", images(n_train_batch, seed=i), np.arange(n_train_batch) % 10)
    test = images(n_test, seed=99)
    labels = np.arange(n_test) % 10
    write_cifar_batch(folder / "test_batch", test, labels)
    return test, labels


def write_cifar_c(root: Path, folder: str = "CIFAR-10-C", per: int = 20, classes: int = 10,
                  corruptions: tuple[str, ...] = ("gaussian_noise", "fog"),
                  labels: bool = True) -> dict[str, np.ndarray]:
    """Hendrycks' ``.npy`` layout: per corruption 5 severity blocks of ``per`` images."""
    out = {}
    (root / folder).mkdir(parents=True, exist_ok=True)
    for k, c in enumerate(corruptions):
        arr = images(5 * per, seed=10 + k)
        np.save(root / folder / f"{c}.npy", arr)
        out[c] = arr
    if labels:
        np.save(root / folder / "labels.npy", np.tile(np.arange(per) % classes, 5).astype(np.uint8))
    return out


def write_folder(root: Path, tree: dict[str, list[np.ndarray]], ext: str = ".png") -> None:
    """An ImageFolder: ``root/<class>/<index><ext>``."""
    for cls, arrays in tree.items():
        (root / cls).mkdir(parents=True, exist_ok=True)
        for i, a in enumerate(arrays):
            Image.fromarray(a).save(root / cls / f"{i:04d}{ext}")


def indexed_pool(n: int, size: int = 32, offset: int = 0) -> np.ndarray:
    """Images whose pixels encode their pool index i = offset … offset+n−1 (channel 0 =
    i % 256, channel 1 = i // 256): a row of a stream says where it came from."""
    index = np.arange(offset, offset + n)
    pool = np.zeros((n, size, size, 3), np.uint8)
    pool[..., 0] = (index % 256)[:, None, None]
    pool[..., 1] = (index // 256)[:, None, None]
    return pool


def pool_index(imgs: torch.Tensor) -> list[int]:
    """The pool indices :func:`indexed_pool` wrote into ``imgs``."""
    return (imgs[:, 0, 0, 0].long() + 256 * imgs[:, 0, 0, 1].long()).tolist()
