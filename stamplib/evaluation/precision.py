"""The float32 precision of records on a GPU: TF32 off.

On Ampere and later GPUs, float32 convolutions (cuDNN) and matrix products (cuBLAS) may run in
TF32, which keeps 10 of float32's 23 mantissa bits: several times faster, and far enough from
float32 to move a record's digits (an adapting method compounds the difference batch by batch).
PyTorch allows TF32 for cuDNN by default. A record is a fidelity run, so :func:`apply_tf32_policy`
(called by :func:`stamplib.evaluation.runner.run` before every cell) switches both off unless
the run context allows it (``$STAMPLIB_TF32=1`` at the edge asks for speed), and the record's
provenance says which was in effect (``record["provenance"]["tf32"]``; it has no effect on the
CPU).
"""

from __future__ import annotations

import torch


def set_tf32(enabled: bool) -> None:
    """Allow (or forbid) TF32 in both cuBLAS matrix products and cuDNN convolutions."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def tf32_state() -> dict[str, bool]:
    """What a record's provenance keeps: whether TF32 was allowed, per library."""
    return {"matmul": bool(torch.backends.cuda.matmul.allow_tf32), "cudnn": bool(torch.backends.cudnn.allow_tf32)}


def apply_tf32_policy(allowed: bool) -> dict[str, bool]:
    """TF32 off, or on where the run context ``allowed`` it; returns the state now in effect."""
    set_tf32(allowed)
    return tf32_state()
