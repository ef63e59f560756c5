"""BatchNorm configuration and parameter selection shared by the methods.

Most methods normalise every forward with the statistics of the batch passed to that forward
(stamp.md §2.1, §9 row 16). :class:`BatchStatsNorm2d` does exactly that, and can also treat a
batch as ``groups`` equal blocks, each normalised with its own statistics. This lets STAMP run
its K views in one forward while every view keeps its own BN statistics, exactly as K
separate forwards would (convolutions and linear layers are per-sample; BN is the only layer
that mixes samples).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

#: Module-name fragments of the last residual stage, frozen by STAMP and SAR (stamp.md §2.2).
LAST_STAGE_NAMES = ("layer4", "conv5_x")


class BatchStatsNorm2d(nn.BatchNorm2d):
    """BatchNorm2d that always uses the current batch's statistics (no running buffers).

    ``groups`` > 1 splits the batch into that many equal consecutive blocks and normalises each
    block with its own mean and (biased) variance.
    """

    groups: int = 1

    @classmethod
    def from_bn(cls, bn: nn.BatchNorm2d) -> BatchStatsNorm2d:
        new = cls(bn.num_features, eps=bn.eps, affine=bn.affine, track_running_stats=False)
        # An instance attribute from the start: view_groups sets it on the instance, and a traced
        # network (blocks.graphs) must see the same attribute before and after, or it retraces.
        new.groups = 1
        if bn.affine:
            # Keep the very same Parameter objects: optimisers built before configuration
            # (as in the authors' code) still point at the live tensors.
            new.weight = bn.weight
            new.bias = bn.bias
        new.train(bn.training)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = self.groups
        if g == 1:
            return F.batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)
        n, c, h, w = x.shape
        assert n % g == 0, f"batch of {n} cannot be split into {g} view groups"
        b = n // g
        weight = self.weight.repeat(g) if self.weight is not None else None
        bias = self.bias.repeat(g) if self.bias is not None else None
        if x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
            # Same fold on the channels-last memory [g·b, h, w, c] -> [b, h, w, g·c], so the
            # next convolution gets channels-last input again instead of converting it.
            nhwc = x.permute(0, 2, 3, 1).reshape(g, b, h, w, c).permute(1, 2, 3, 0, 4)
            folded = nhwc.reshape(b, h, w, g * c).permute(0, 3, 1, 2)
            out = F.batch_norm(folded, None, None, weight, bias, True, 0.0, self.eps)
            out = out.permute(0, 2, 3, 1).reshape(b, h, w, g, c).permute(3, 0, 1, 2, 4)
            return out.reshape(n, h, w, c).permute(0, 3, 1, 2)
        # [g·b, c, h, w] -> [b, g·c, h, w]: per-(group, channel) statistics over (b, h, w).
        folded = x.view(g, b, c, h, w).transpose(0, 1).reshape(b, g * c, h, w)
        out = F.batch_norm(folded, None, None, weight, bias, True, 0.0, self.eps)
        return out.view(b, g, c, h, w).transpose(0, 1).reshape(n, c, h, w)


def use_batch_statistics(model: nn.Module) -> nn.Module:
    """Replace every BatchNorm2d by :class:`BatchStatsNorm2d` in place (stamp.md §2.1).

    The source running statistics are discarded, as ``track_running_stats=False`` with
    ``running_mean = running_var = None`` does in the authors' code.
    """
    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.BatchNorm2d) and not isinstance(child, BatchStatsNorm2d):
                setattr(module, child_name, BatchStatsNorm2d.from_bn(child))
    return model


@contextmanager
def view_groups(model: nn.Module, groups: int) -> Iterator[None]:
    """Within the block, every BatchStatsNorm2d normalises ``groups`` blocks separately."""
    layers = [m for m in model.modules() if isinstance(m, BatchStatsNorm2d)]
    assert groups == 1 or layers, "view_groups needs a model configured with use_batch_statistics"
    for m in layers:
        m.groups = groups
    try:
        yield
    finally:
        for m in layers:
            m.groups = 1


#: Pixels one batched forward of views may hold on a GPU: STAMP's 16 views of 64 ImageNet
#: images at 224 px, whose ResNet-50 forward peaks near 18 GB (docs/gpu_runbook.md §6).
VIEW_PIXEL_BUDGET = 16 * 64 * 224 * 224

#: On a CPU, a forward of views smaller than this (16 CIFAR images) pays more in per-layer
#: overhead than it gains from the caches, so such views are grouped up to
#: :data:`CPU_VIEW_PIXEL_BUDGET` (32 CIFAR images) per forward. Measured on one thread,
#: channels-last, 1,280 images of the quick stream (benchmarks/cpu_view_chunks.py,
#: results/cpu_view_chunks/): at batches of 4, CoTTA 69.0 s with one view per forward, 49.0 s
#: with 4 and 45.1 s with 8; STAMP 25.9, 23.7 and 21.7 s. At batches of 16 and 64, 2 or 4 views
#: per forward were slower than one (0.63-0.98x). The predictions were the same in every case.
CPU_SMALL_VIEW_PIXELS = 16 * 32 * 32
CPU_VIEW_PIXEL_BUDGET = 32 * 32 * 32


def views_per_forward(requested: int, num_views: int, device: torch.device, pixels_per_view: int) -> int:
    """How many views of a batch go through one forward under :func:`view_groups`.

    ``requested`` > 0 is taken as it is (at most ``num_views``); 0 chooses from the device and
    the ``pixels_per_view`` (batch size × height × width; 0 when unknown). On a CPU, whose
    caches favour small forwards, one view per forward, unless a view has fewer than
    :data:`CPU_SMALL_VIEW_PIXELS` pixels: then as many as :data:`CPU_VIEW_PIXEL_BUDGET` holds.
    On a GPU as many as :data:`VIEW_PIXEL_BUDGET` allows (all of them when the size is
    unknown), because at small images a GPU waits on launches, not arithmetic. Every view keeps
    its own BN statistics whatever the choice: it changes speed, not results.
    """
    assert requested >= 0 and num_views >= 1, "views per forward: 0 (choose) or a positive count"
    assert pixels_per_view >= 0, "pixels per view: batch size × height × width, or 0 when unknown"
    if requested > 0:
        return min(requested, num_views)
    if device.type != "cuda":
        if pixels_per_view == 0 or pixels_per_view >= CPU_SMALL_VIEW_PIXELS:
            return 1
        return max(1, min(num_views, CPU_VIEW_PIXEL_BUDGET // pixels_per_view))
    if pixels_per_view == 0:
        return num_views
    return max(1, min(num_views, VIEW_PIXEL_BUDGET // pixels_per_view))


def norm_affine_parameters(
    model: nn.Module, *, exclude_last_stage: bool
) -> list[nn.Parameter]:
    """Affine weight and bias of every BatchNorm/LayerNorm/GroupNorm, in module order.

    With ``exclude_last_stage`` the layers whose name contains ``layer4`` or ``conv5_x`` are
    skipped (STAMP and SAR: "freeze the top layer following SAR", stamp.md §2.2).
    """
    params: list[nn.Parameter] = []
    for name, module in model.named_modules():
        if not isinstance(module, (nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)):
            continue
        if exclude_last_stage and any(stage in name for stage in LAST_STAGE_NAMES):
            continue
        for p in (module.weight, module.bias):
            if p is not None:
                params.append(p)
    return params


def freeze_all_but(model: nn.Module, params: list[nn.Parameter]) -> None:
    """requires_grad only for ``params``."""
    wanted = {id(p) for p in params}
    for p in model.parameters():
        p.requires_grad_(id(p) in wanted)


def count_parameters(params: list[nn.Parameter]) -> int:
    return sum(p.numel() for p in params)
