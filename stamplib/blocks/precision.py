"""Full float32 matrix products for the computations that TF32 breaks, whatever the global switch.

TF32 (``torch.backends.cuda.matmul.allow_tf32``, ``torch.set_float32_matmul_precision("high")``
or the newer ``torch.backends.cuda.matmul.fp32_precision = "tf32"``) rounds the inputs of every
float32 matrix product to 10 mantissa bits. That is harmless for a network's forward, but not
for a covariance built as a difference of products (OWTTT's EMA Gaussian, baselines.md §9 step
5): the cancellation that keeps it positive semi-definite fails, and its Cholesky factor does
not exist. :func:`full_precision_matmul` pins IEEE float32 (or the tensors' own higher
precision) for the matrix products inside it and restores the caller's setting afterwards,
whichever of PyTorch's two interfaces set it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def full_precision_matmul() -> Iterator[None]:
    """Matrix products (cuBLAS and oneDNN) at full float32 precision inside the block.

    ``set_float32_matmul_precision("highest")`` sets the legacy and the per-backend interfaces
    alike, so that neither reads as a mix of the two inside. On the way out the legacy precision
    is restored first (when it was readable: PyTorch refuses to read it after a caller set only
    the new interface), then the per-backend values, which leaves every reading as it was."""
    cuda_matmul, onednn_matmul = torch.backends.cuda.matmul, torch.backends.mkldnn.matmul
    backends = (cuda_matmul.fp32_precision, onednn_matmul.fp32_precision)
    try:
        legacy: str | None = torch.get_float32_matmul_precision()
    except RuntimeError:  # the caller used only the per-backend interface
        legacy = None
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        if legacy is not None:
            torch.set_float32_matmul_precision(legacy)
        cuda_matmul.fp32_precision, onednn_matmul.fp32_precision = backends
