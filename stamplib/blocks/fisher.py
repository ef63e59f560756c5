"""EATA's diagonal Fisher information of the adapted parameters (baselines.md §5).

Once before adaptation: the clean source images (the first 2,000 by index; selecting them is
the caller's job) are served in shuffled batches of 64; for every batch the mean
cross-entropy between the logits and *their own argmax* is back-propagated and the squared
gradient of every parameter is accumulated; after the last batch the sum is divided by the
number of batches. The model is used as the method configured it (EATA: train mode, BN on
batch statistics), so this function only reads ``params``' gradients and leaves them cleared.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from stamplib.blocks.source_stats import iter_batches


def fisher_information(
    model: nn.Module,
    params: list[nn.Parameter],
    images: torch.Tensor,
    batch_size: int = 64,
    generator: torch.Generator | None = None,
) -> list[torch.Tensor]:
    """Per-parameter Fisher diagonal, aligned with ``params``.

    images: uint8 [N, H, W, 3] clean source images (converted batch by batch).
    generator: CPU generator for the shuffle; None keeps index order.
    """
    assert params, "Fisher information needs at least one parameter"
    assert all(p.requires_grad for p in params), "Fisher parameters must require grad"
    device = params[0].device
    n = images.shape[0]
    assert n > 0, "Fisher information needs at least one source image"
    order = torch.randperm(n, generator=generator) if generator is not None else None
    sums = [torch.zeros_like(p) for p in params]
    batches = 0
    for p in params:
        p.grad = None
    with torch.enable_grad():
        for _, x in iter_batches(images, batch_size, device, order, dtype=params[0].dtype):
            logits = model(x)
            # Pseudo-labels from the model's own prediction: no label is needed (EATA).
            F.cross_entropy(logits, logits.argmax(dim=1)).backward()
            for s, p in zip(sums, params):
                if p.grad is not None:
                    s.add_(p.grad.detach() ** 2)
                p.grad = None
            batches += 1
    return [s / batches for s in sums]
