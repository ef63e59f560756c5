"""Helpers for statistics computed once from clean source data (EATA's Fisher information,
OWTTT's prototypes): image conversion, batching and a model fingerprint for cache keys.

Source statistics are cached per process (``TTAMethod.source_statistic``) under a key that
names the source data set; the fingerprint adds the network, so two different models that
share a source data set never share a cached statistic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import torch
from torch import nn


def to_float_nchw(
    images: torch.Tensor, device: torch.device | str, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """uint8 [N, H, W, 3] → float [N, 3, H, W] in [0, 1] on ``device`` (``ToTensor``), in
    ``dtype`` (the model's: float64 in exactness tests)."""
    assert images.dtype == torch.uint8 and images.dim() == 4 and images.shape[3] == 3, (
        f"source images must be uint8 N×H×W×3, got {images.dtype} {tuple(images.shape)}"
    )
    return images.to(device).permute(0, 3, 1, 2).to(dtype).div_(255.0).contiguous()


def iter_batches(
    images: torch.Tensor,
    batch_size: int,
    device: torch.device | str,
    order: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(indices, float NCHW batch) pairs in ``order`` (default: index order); the last batch
    may be partial, as a DataLoader with ``drop_last=False`` gives. Converts one batch at a
    time so that ImageNet-sized sources never sit in memory as floats."""
    assert batch_size >= 1
    order = torch.arange(images.shape[0]) if order is None else order
    for start in range(0, order.numel(), batch_size):
        idx = order[start : start + batch_size]
        yield idx, to_float_nchw(images[idx], device, dtype)


def model_fingerprint(model: nn.Module) -> str:
    """SHA-1 of every state-dict tensor (names, shapes, dtypes and bytes), 16 hex digits."""
    digest = hashlib.sha1()
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]
