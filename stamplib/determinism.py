"""Bitwise-reproducible runs on a GPU.

On the CPU, stamplib is deterministic as it is: every random draw comes from a generator
seeded by the RunSpec, and PyTorch's CPU kernels give the same bits for the same inputs and
thread count. On a GPU three things vary between runs unless switched off: cuDNN picks its
convolution algorithm by timing (``cudnn.benchmark``) and some algorithms are themselves
non-deterministic; atomic adds in scatter/index_add-style kernels (and their backward passes)
sum in arrival order; cuBLAS splits work differently unless its workspace is fixed.
:func:`set_deterministic` switches all three, at some cost in speed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from stamplib import paths

#: cuBLAS needs a fixed workspace for reproducible results (CUDA ≥ 10.2); PyTorch checks it.
CUBLAS_WORKSPACE = ":4096:8"


def set_deterministic(enabled: bool = True, *, warn_only: bool = False) -> None:
    """Make (``enabled``) or stop making PyTorch pick only deterministic kernels.

    Sets ``torch.use_deterministic_algorithms``, ``cudnn.deterministic`` and turns
    ``cudnn.benchmark`` off, and sets ``$CUBLAS_WORKSPACE_CONFIG`` unless already set. Call it
    before the first CUDA operation: cuBLAS reads the variable when it starts. An operation
    without a deterministic kernel then raises (or warns, with ``warn_only``)."""
    if enabled:
        paths.set_process_default("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = enabled
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def is_deterministic() -> bool:
    return torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic


@contextmanager
def deterministic(enabled: bool = True, *, warn_only: bool = False) -> Iterator[None]:
    """:func:`set_deterministic` for a block; the previous settings come back afterwards."""
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    set_deterministic(enabled, warn_only=warn_only)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2], before[3]


_REFUSED = re.compile(r"(\S+) does not have a deterministic implementation")


def refusal(error: BaseException) -> str | None:
    """Why PyTorch refused an operation under :func:`set_deterministic` (the operation and the
    way out), or None when ``error`` is something else."""
    found = _REFUSED.search(str(error))
    if found is None:
        return None
    return (f"torch {torch.__version__} has no deterministic kernel for {found.group(1)}; run it without "
            "--deterministic (its CUDA results may then differ between runs in the last bits) or on the CPU, "
            "which is deterministic as it is")
