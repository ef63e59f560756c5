"""SAR (baselines.md §6): entropy filter, the SAM step against a hand computation, the EMA and
the model-reset trigger, reset semantics, score convention, end-to-end run on digits."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from stamplib import methods, models
from stamplib.blocks.bn import norm_affine_parameters
from stamplib.blocks.entropy import logit_entropy
from tests.support import assert_same

C = 4


@pytest.fixture(scope="module")
def base_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return models.create("resnet_cifar_tiny", C).eval()


def batch(seed: int, n: int = 16) -> torch.Tensor:
    return torch.rand(n, 3, 16, 16, generator=torch.Generator().manual_seed(seed))


def test_adapts_bn_affine_outside_the_last_stage(base_model):
    m = methods.create("sar", base_model, C)
    expected = norm_affine_parameters(m.model, exclude_last_stage=True)
    assert [id(p) for p in m.adapted_parameters()] == [id(p) for p in expected]
    assert len(expected) < len(norm_affine_parameters(m.model, exclude_last_stage=False))
    assert (
        m.optimizer.param_groups[0]["rho"] == 0.05
        and m.optimizer.param_groups[0]["momentum"] == 0.9
    )


def test_entropy_filter_on_hand_crafted_logits(base_model):
    m = methods.create("sar", base_model, C)
    e0 = 0.4 * math.log(C)
    logits = torch.tensor([[8.0, 0, 0, 0], [0.0, 0, 0, 0], [2.0, 1.9, 0, 0], [0.0, 0, 9, 0]])
    entropy = logit_entropy(logits)
    assert [i for i in range(4) if float(entropy[i]) < e0] == [0, 3]
    assert m.select(entropy).tolist() == [0, 3]


def test_step_matches_a_hand_computed_sam_step(base_model):
    m = methods.create("sar", base_model, C, reset_constant=0.0, e_margin_coef=0.99)
    ref = copy.deepcopy(m.model)
    params = norm_affine_parameters(ref, exclude_last_stage=True)
    x = batch(0, 32)

    h = logit_entropy(ref(x))
    s1 = torch.where(h < m.e_margin)[0]
    assert 0 < s1.numel() < 32  # the filter is active on this batch
    grads = torch.autograd.grad(h[s1].mean(), params)
    norm = torch.stack([g.norm() for g in grads]).norm()
    with torch.no_grad():
        for p, g in zip(params, grads):
            p.add_(0.05 * g / (norm + 1e-12))
    h2 = logit_entropy(ref(x))[s1]
    s2 = torch.where(h2 < m.e_margin)[0]
    assert s2.numel() > 0
    loss2 = h2[s2].mean()
    grads2 = torch.autograd.grad(loss2, params)
    with torch.no_grad():
        for p, g, g2 in zip(params, grads, grads2):
            p.sub_(0.05 * g / (norm + 1e-12))  # back to θ
            p.sub_(5e-3 * g2)  # first SGD step: momentum buffer = gradient

    out = m.step(x)
    assert m.ema == pytest.approx(float(loss2.detach()), rel=1e-5)  # first EMA value = loss₂
    for p, q in zip(params, m.adapted_parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    assert torch.isfinite(out.probs).all()


def test_no_reliable_sample_means_no_move_and_no_ema(base_model):
    m = methods.create("sar", base_model, C, e_margin_coef=1e-9)
    before = [p.detach().clone() for p in m.adapted_parameters()]
    out = m.step(batch(1))
    assert m.ema is None and m.num_model_resets == 0
    assert all(torch.equal(a, p) for a, p in zip(before, m.adapted_parameters()))
    assert torch.isfinite(out.probs).all()


def test_ema_follows_point_nine_point_one(base_model):
    m = methods.create("sar", base_model, C, reset_constant=0.0, e_margin_coef=2.0)
    m.step(batch(2))
    first = m.ema
    assert first is not None and first > 0
    m.step(batch(3))
    second = m.ema
    # ema = 0.9·first + 0.1·loss₂ with 0 < loss₂ ≤ ln C
    loss2 = (second - 0.9 * first) / 0.1
    assert 0 < loss2 <= math.log(C) + 1e-6


def test_reset_trigger_restores_source_model_and_optimizer(base_model):
    fresh = methods.create("sar", base_model, C)
    m = methods.create("sar", base_model, C, reset_constant=100.0, e_margin_coef=2.0)
    m.step(batch(4))
    assert m.num_model_resets == 1 and m.ema is None
    assert_same(m.model.state_dict(), fresh.model.state_dict())
    assert_same(m.optimizer.state_dict(), fresh.optimizer.state_dict())

    never = methods.create("sar", base_model, C, reset_constant=0.0, e_margin_coef=2.0)
    never.step(batch(4))
    assert never.num_model_resets == 0 and never.ema is not None
    assert any(
        not torch.equal(a, b)
        for a, b in zip(never.adapted_parameters(), fresh.adapted_parameters())
    )


def test_score_is_the_entropy_of_the_pre_update_prediction(base_model):
    m = methods.create("sar", base_model, C, reset_constant=0.0, e_margin_coef=2.0)
    x = batch(5)
    with torch.no_grad():
        expected = torch.softmax(copy.deepcopy(m.model)(x), 1)
    out = m.step(x)
    assert torch.allclose(out.probs, expected, atol=1e-6)  # from the first, unperturbed forward
    assert torch.allclose(out.ood_score, -(out.probs * out.probs.log()).sum(1), atol=1e-5)


