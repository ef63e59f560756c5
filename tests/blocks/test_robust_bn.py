"""Robust BatchNorm (stamplib.blocks.robust_bn, RoTTA baselines.md §7)."""

from __future__ import annotations

import torch
from torch import nn

from stamplib.blocks.robust_bn import RobustBN2d, use_robust_bn
from tests.support import two_bn_net as tiny_net


def source_bn(channels: int = 3) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(channels, eps=1e-3)
    g = torch.Generator().manual_seed(0)
    bn.running_mean.copy_(torch.rand(channels, generator=g) - 0.5)
    bn.running_var.copy_(torch.rand(channels, generator=g) + 0.5)
    bn.weight.data.copy_(torch.rand(channels, generator=g) + 0.5)
    bn.bias.data.copy_(torch.rand(channels, generator=g) - 0.5)
    return bn


def test_robust_bn_train_mode_updates_then_normalises_with_updated_stats() -> None:
    bn = source_bn().double()
    rbn = RobustBN2d(bn, momentum=0.05).train()
    x = torch.randn(5, 3, 4, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    xd = x
    mu_b = xd.mean(dim=(0, 2, 3))
    var_b = ((xd - mu_b.view(1, -1, 1, 1)) ** 2).mean(dim=(0, 2, 3))  # biased
    mu = 0.95 * bn.running_mean.double() + 0.05 * mu_b
    var = 0.95 * bn.running_var.double() + 0.05 * var_b
    expected = (xd - mu.view(1, -1, 1, 1)) / torch.sqrt(var.view(1, -1, 1, 1) + 1e-3)
    expected = expected * bn.weight.double().view(1, -1, 1, 1) + bn.bias.double().view(1, -1, 1, 1)
    out = rbn(x)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(rbn.running_mean, mu, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(rbn.running_var, var, rtol=1e-12, atol=1e-12)
    # Differs from plain batch-statistics BN and from source-statistics BN.
    assert not torch.allclose(
        out, nn.functional.batch_norm(x, None, None, bn.weight, bn.bias, True, 0.0, 1e-3), atol=1e-3
    )
    assert not torch.allclose(out, bn.eval()(x), atol=1e-3)
    # A second train forward starts from the updated statistics.
    rbn(x)
    torch.testing.assert_close(rbn.running_mean, 0.95 * mu + 0.05 * mu_b, rtol=1e-12, atol=1e-12)


def test_robust_bn_eval_mode_uses_stored_stats_and_keeps_them() -> None:
    bn = source_bn().double()
    rbn = RobustBN2d(bn).eval()
    x = torch.randn(4, 3, 4, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    torch.testing.assert_close(rbn(x), bn.eval()(x), rtol=1e-12, atol=1e-12)
    assert torch.equal(rbn.running_mean, bn.running_mean) and torch.equal(rbn.running_var, bn.running_var)


def test_robust_bn_gradient_flows_through_the_batch_part_of_the_statistics() -> None:
    rbn = RobustBN2d(source_bn().double(), momentum=0.5).train()
    x = torch.randn(4, 3, 4, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64, requires_grad=True)
    stored_mean, stored_var = rbn.running_mean.clone(), rbn.running_var.clone()
    (rbn(x) ** 2).sum().backward()
    x2 = x.detach().clone().requires_grad_(True)
    var_b, mu_b = torch.var_mean(x2, dim=(0, 2, 3), unbiased=False)
    mu = 0.5 * stored_mean + 0.5 * mu_b
    var = 0.5 * stored_var + 0.5 * var_b
    ref = (x2 - mu.view(1, -1, 1, 1)) / torch.sqrt(var.view(1, -1, 1, 1) + rbn.eps)
    ((ref * rbn.weight.detach().view(1, -1, 1, 1) + rbn.bias.detach().view(1, -1, 1, 1)) ** 2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-10, atol=1e-12)
    assert not rbn.running_mean.requires_grad and rbn.weight.grad is not None


def test_use_robust_bn_swaps_every_bn_and_copies_affine() -> None:
    net = tiny_net()
    originals = [net.bn1, net.bn2]
    params = use_robust_bn(net)
    assert isinstance(net.bn1, RobustBN2d) and isinstance(net.bn2, RobustBN2d)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in net.modules())
    assert len(params) == 4 and all(p.requires_grad for p in params)
    for new, old in zip((net.bn1, net.bn2), originals):
        assert torch.equal(new.weight, old.weight) and new.weight is not old.weight
        assert torch.equal(new.running_mean, old.running_mean) and new.momentum == 0.05 and new.eps == old.eps


class AuthorsRobustBN(nn.Module):
    """The official RobustBN2d's arithmetic, statistic by statistic with copies (baselines.md §7):
    the oracle the layer's one-operator-per-list update must equal bit for bit."""

    def __init__(self, bn: nn.BatchNorm2d, momentum: float) -> None:
        super().__init__()
        self.momentum, self.eps = momentum, bn.eps
        self.source_mean, self.source_var = bn.running_mean.clone(), bn.running_var.clone()
        self.weight, self.bias = nn.Parameter(bn.weight.detach().clone()), nn.Parameter(bn.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            b_var, b_mean = torch.var_mean(x, dim=[0, 2, 3], unbiased=False, keepdim=False)
            mean = (1 - self.momentum) * self.source_mean + self.momentum * b_mean
            var = (1 - self.momentum) * self.source_var + self.momentum * b_var
            self.source_mean, self.source_var = mean.detach().clone(), var.detach().clone()
            mean, var = mean.view(1, -1, 1, 1), var.view(1, -1, 1, 1)
        else:
            mean, var = self.source_mean.view(1, -1, 1, 1), self.source_var.view(1, -1, 1, 1)
        x = (x - mean) / torch.sqrt(var + self.eps)
        return x * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)


def test_robust_bn_equals_the_authors_arithmetic_bit_for_bit_in_float32() -> None:
    """Issue 51 updates both statistics with one operator per list and stores them without a copy;
    outputs, statistics and every gradient stay those of the official layer, exactly."""
    ours, theirs = RobustBN2d(source_bn(8), momentum=0.05), AuthorsRobustBN(source_bn(8), momentum=0.05)
    g = torch.Generator().manual_seed(4)
    for step in range(3):
        x = (torch.randn(16, 8, 6, 6, generator=g) * 2 + 0.3).requires_grad_(True)
        x2 = x.detach().clone().requires_grad_(True)
        mine, official = ours.train()(x), theirs.train()(x2)
        assert torch.equal(mine, official)
        (mine.square().mean() + mine[:, 0].sum()).backward()
        (official.square().mean() + official[:, 0].sum()).backward()
        assert torch.equal(x.grad, x2.grad) and torch.equal(ours.weight.grad, theirs.weight.grad)
        assert torch.equal(ours.bias.grad, theirs.bias.grad)
        assert torch.equal(ours.running_mean, theirs.source_mean) and torch.equal(ours.running_var, theirs.source_var)
        assert not ours.running_mean.requires_grad and not ours.running_var.requires_grad
        with torch.no_grad():
            assert torch.equal(ours.eval()(x), theirs.eval()(x2)), f"eval forward after train step {step}"


def test_robust_bn_statistics_written_before_a_pending_backward_leave_the_gradient_alone() -> None:
    """The stored statistics share storage with the forward's graph (no copy, issue 51); writing
    them in place between forward and backward (a reset's state load does) changes neither the
    gradient nor the written values."""
    bn = source_bn(4)
    rbn, again = RobustBN2d(bn, momentum=0.5).train(), RobustBN2d(bn, momentum=0.5).train()
    x = torch.randn(8, 4, 3, 3, generator=torch.Generator().manual_seed(5), requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    out, expected = rbn(x), again(x2)
    with torch.no_grad():
        rbn.running_mean.copy_(bn.running_mean)
        rbn.running_var.copy_(bn.running_var)
    (out * torch.arange(4.0).view(1, -1, 1, 1)).square().sum().backward()
    (expected * torch.arange(4.0).view(1, -1, 1, 1)).square().sum().backward()
    assert torch.equal(x.grad, x2.grad) and torch.equal(rbn.weight.grad, again.weight.grad)
    assert torch.equal(rbn.running_mean, bn.running_mean) and torch.equal(rbn.running_var, bn.running_var)
