"""SAR (baselines.md §6): entropy filter, the SAM step against a hand computation, the EMA and
the model-reset trigger, reset semantics, score convention, end-to-end run on digits."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from stamplib import methods
from stamplib.blocks.bn import norm_affine_parameters
from stamplib.blocks.entropy import logit_entropy
from tests.support import assert_same, batch, method_state

C = 4


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
    assert m.num_model_resets == 1 and m.ema is not None  # the authors keep the EMA
    assert_same(m.model.state_dict(), fresh.model.state_dict())
    assert_same(m.optimizer.state_dict()["sam"], fresh.optimizer.state_dict()["sam"])
    corrected = methods.create(
        "sar", base_model, C, reset_constant=100.0, e_margin_coef=2.0,
        clear_ema_on_reset=True, reset_base_optimizer_state=True,
    )
    corrected.step(batch(4))
    assert corrected.num_model_resets == 1 and corrected.ema is None
    assert_same(corrected.model.state_dict(), fresh.model.state_dict())
    assert_same(corrected.optimizer.state_dict(), fresh.optimizer.state_dict())

    never = methods.create("sar", base_model, C, reset_constant=0.0, e_margin_coef=2.0)
    never.step(batch(4))
    assert never.num_model_resets == 0 and never.ema is not None
    assert any(
        not torch.equal(a, b)
        for a, b in zip(never.adapted_parameters(), fresh.adapted_parameters())
    )


def test_reset_clears_the_ema_and_with_the_switch_is_bit_identical(base_model):
    """``reset()`` clears the EMA (the authors' ``reset`` does); with the base optimiser's state
    cleared too it restores the bit-identical initial state (the momentum case is tested above)."""
    options = dict(reset_constant=0.0, e_margin_coef=2.0, reset_base_optimizer_state=True)
    fresh = methods.create("sar", base_model, C, **options)
    m = methods.create("sar", base_model, C, **options)
    for s in range(3):
        m.step(batch(s))
    assert m.ema is not None
    m.reset()
    assert m.ema is None
    assert_same(method_state(m), method_state(fresh))
    assert_same(m.step(batch(7)).probs, fresh.step(batch(7)).probs)
    assert_same(method_state(m), method_state(fresh))


def test_score_is_the_entropy_of_the_pre_update_prediction(base_model):
    m = methods.create("sar", base_model, C, reset_constant=0.0, e_margin_coef=2.0)
    x = batch(5)
    with torch.no_grad():
        expected = torch.softmax(copy.deepcopy(m.model)(x), 1)
    out = m.step(x)
    assert torch.allclose(out.probs, expected, atol=1e-6)  # from the first, unperturbed forward
    assert torch.allclose(out.ood_score, -(out.probs * out.probs.log()).sum(1), atol=1e-5)


# -- the authors' behaviour after a reset (baselines.md §6 step 5 "Correction", §0 "SAM optimiser state")
def _loss2_on_source(base_model, seed: int) -> float:
    """loss₂ of one step from the source state: the first EMA value of a fresh method."""
    m = methods.create("sar", base_model, C, reset_constant=0.0, e_margin_coef=2.0)
    m.step(batch(seed))
    return m.ema


def test_collapse_reset_keeps_the_ema_so_the_next_batch_resets_again(base_model):
    losses = {s: _loss2_on_source(base_model, s) for s in range(8)}
    low, high = min(losses, key=losses.get), max(losses, key=losses.get)
    l_low, l_high = losses[low], losses[high]
    assert l_high - l_low > 1e-3  # the premise: two batches with clearly different loss₂
    # e₀ above the low loss and above 0.9·low + 0.1·high, below the high loss
    e0 = 0.5 * ((0.9 * l_low + 0.1 * l_high) + l_high)

    authors = methods.create("sar", base_model, C, reset_constant=e0, e_margin_coef=2.0)
    authors.step(batch(low))
    assert authors.num_model_resets == 1 and authors.ema == pytest.approx(l_low, rel=1e-6)
    # After the reset the model is the source again, so loss₂ of the next batch is l_high, and
    # the kept EMA 0.9·l_low + 0.1·l_high is still below e₀: the model is reset once more.
    authors.step(batch(high))
    assert authors.num_model_resets == 2
    assert authors.ema == pytest.approx(0.9 * l_low + 0.1 * l_high, rel=1e-6)

    cleared = methods.create(
        "sar", base_model, C, reset_constant=e0, e_margin_coef=2.0, clear_ema_on_reset=True
    )
    cleared.step(batch(low))
    assert cleared.num_model_resets == 1 and cleared.ema is None
    cleared.step(batch(high))  # a fresh EMA = l_high > e₀: no second reset
    assert cleared.num_model_resets == 1 and cleared.ema == pytest.approx(l_high, rel=1e-6)


def _momentum(m: methods.TTAMethod) -> list[torch.Tensor]:
    state = m.optimizer.base_optimizer.state
    return [state[p]["momentum_buffer"].clone() for p in m.adapted_parameters() if "momentum_buffer" in state[p]]


def test_sgd_momentum_survives_the_per_corruption_reset(base_model):
    fresh = methods.create("sar", base_model, C, reset_constant=0.0, e_margin_coef=2.0)
    m = methods.create("sar", base_model, C, reset_constant=0.0, e_margin_coef=2.0)
    for s in range(3):
        m.step(batch(s))
    before = _momentum(m)
    assert len(before) == len(m.adapted_parameters()) and any(b.abs().sum() > 0 for b in before)
    m.reset()
    assert_same(m.model.state_dict(), fresh.model.state_dict())  # the weights are the source's
    assert_same(_momentum(m), before)  # the base optimiser's momentum is not
    m.step(batch(7))
    fresh.step(batch(7))
    assert any(not torch.equal(a, b) for a, b in zip(m.adapted_parameters(), fresh.adapted_parameters()))


def test_sgd_momentum_survives_the_collapse_reset(base_model):
    m = methods.create("sar", base_model, C, reset_constant=100.0, e_margin_coef=2.0)
    m.step(batch(4))
    assert m.num_model_resets == 1
    buffers = _momentum(m)
    assert len(buffers) == len(m.adapted_parameters()) and any(b.abs().sum() > 0 for b in buffers)

    cleared = methods.create(
        "sar", base_model, C, reset_constant=100.0, e_margin_coef=2.0, reset_base_optimizer_state=True
    )
    cleared.step(batch(4))
    assert cleared.num_model_resets == 1 and _momentum(cleared) == []


def test_corrections_work_as_run_spec_overrides():
    from stamplib.evaluation.spec import RunSpec

    spec = RunSpec.make("sar", overrides={"clear_ema_on_reset": True, "reset_base_optimizer_state": True})
    config = methods.resolve_config("sar", spec.resolved_hyperparameter_set(), **dict(spec.overrides))
    assert config.clear_ema_on_reset and config.reset_base_optimizer_state
    defaults = methods.resolve_config("sar", "cifar10_c")
    assert not defaults.clear_ema_on_reset and not defaults.reset_base_optimizer_state
