"""EATA (baselines.md §5): filters, moving probability vector, Fisher information and its
regulariser, reset semantics, score convention, end-to-end run on the digits benchmark."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from stamplib import methods
from stamplib.blocks.entropy import logit_entropy
from stamplib.blocks.fisher import fisher_information
from tests.support import assert_same, batch, method_state, source_data

C = 4


def make(base_model, name="eata-unit", **overrides) -> methods.TTAMethod:
    return methods.create(
        "eata", base_model, C, source_data=source_data(name, n=96), fisher_samples=64, **overrides
    )


# -- filters ---------------------------------------------------------------------------------------
def test_entropy_filter_keeps_exactly_the_samples_below_e0(base_model):
    m = make(base_model)
    e0 = 0.4 * math.log(C)
    assert m.e_margin == pytest.approx(e0)
    logits = torch.tensor(
        [[8.0, 0, 0, 0], [0.0, 0, 0, 0], [2.0, 1.9, 0, 0], [0.0, 0, 9, 0], [1.0, 0.5, 0.2, 0]]
    )
    entropy = logit_entropy(logits)
    expected = [i for i in range(5) if float(entropy[i]) < e0]
    assert expected == [0, 3]  # the hand-crafted rows really straddle E₀
    assert m.select(logits, entropy).tolist() == expected


def test_redundancy_filter_drops_samples_similar_to_the_moving_vector(base_model):
    m = make(base_model)  # ε = 0.2 (CIFAR-10 hyperparameter set)
    logits = torch.tensor([[9.0, 0, 0, 0], [0.0, 9, 0, 0], [0.0, 0, 9, 0], [0.0, 0, 0, 0]])
    entropy = logit_entropy(logits)
    m.moving_probs = torch.tensor([1.0, 0.0, 0.0, 0.0])
    # row 0 is parallel to m (cos ≈ 1), rows 1-2 orthogonal (cos ≈ 0), row 3 unreliable.
    assert m.select(logits, entropy).tolist() == [1, 2]
    m.moving_probs = None
    assert m.select(logits, entropy).tolist() == [0, 1, 2]


def test_moving_probability_vector_update(base_model):
    m = make(base_model)
    p1 = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1]])
    m.update_moving_probs(p1[:0])
    assert m.moving_probs is None  # nothing selected yet: still no vector
    m.update_moving_probs(p1)
    assert torch.allclose(m.moving_probs, p1.mean(0))
    p2 = torch.tensor([[0.1, 0.1, 0.1, 0.7]])
    m.update_moving_probs(p2)
    assert torch.allclose(m.moving_probs, 0.9 * p1.mean(0) + 0.1 * p2[0])
    before = m.moving_probs.clone()
    m.update_moving_probs(p2[:0])
    assert torch.equal(m.moving_probs, before)


# -- Fisher ----------------------------------------------------------------------------------------
def test_fisher_information_matches_a_hand_computation(base_model):
    # In float64: BN gradients cancel to rounding noise in places, which float32 kernels with
    # another summation order turn into other noise; float64 keeps that noise below 1e-12.
    m = make(copy.deepcopy(base_model).double(), name="eata-fisher-float64")
    images = source_data("x", n=100, seed=3).images
    g = torch.Generator().manual_seed(7)
    fisher = fisher_information(m.model, m.params, images, batch_size=64, generator=g)

    order = torch.randperm(100, generator=torch.Generator().manual_seed(7))
    expected = [torch.zeros_like(p) for p in m.params]
    for chunk in (order[:64], order[64:]):
        x = (images[chunk].permute(0, 3, 1, 2).double() / 255).contiguous()
        logits = m.model(x)
        loss = F.cross_entropy(logits, logits.argmax(1))
        grads = torch.autograd.grad(loss, m.params)
        for e, gr in zip(expected, grads):
            e += gr**2
    largest = max(float(e.max()) for e in expected)
    for f, e in zip(fisher, expected):
        assert f.dtype == torch.float64
        assert torch.allclose(f, e / 2, rtol=1e-9, atol=1e-12 * largest)
    assert all(p.grad is None for p in m.params)
    assert sum(float(f.sum()) for f in fisher) > 0


def test_fisher_uses_only_the_first_n_source_images(base_model):
    src = source_data("eata-first-n", n=96, seed=1)
    changed = src.images.clone()
    changed[64:] = 255 - changed[64:]
    a = methods.create("eata", base_model, C, source_data=src, fisher_samples=64)
    b = methods.create(
        "eata",
        base_model,
        C,
        source_data=methods.SourceData("eata-first-n-2", changed, src.labels),
        fisher_samples=64,
    )
    c = methods.create(
        "eata",
        base_model,
        C,
        source_data=methods.SourceData("eata-first-n-3", changed, src.labels),
        fisher_samples=96,
    )
    assert_same(a.fisher, b.fisher)
    assert any(not torch.equal(x, y) for x, y in zip(a.fisher, c.fisher))


def test_fisher_penalty_matches_a_hand_computation(base_model):
    m = make(base_model, fisher_alpha=3.0)
    g = torch.Generator().manual_seed(0)
    m.fisher = [torch.rand(p.shape, generator=g) for p in m.params]
    with torch.no_grad():
        for p in m.params:
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    expected = 0.0
    i = 0
    for mod in m.model.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            for p in (mod.weight, mod.bias):
                expected += 3.0 * float((m.fisher[i] * (p.detach() - m.anchor[i]) ** 2).sum())
                i += 1
    assert i == len(m.params)
    assert float(m.fisher_penalty().detach()) == pytest.approx(expected, rel=1e-5)
    assert expected > 0


# -- step ------------------------------------------------------------------------------------------
def test_no_update_when_nothing_is_selected(base_model):
    m = make(base_model, e_margin_coef=1e-9)  # E₀ ≈ 0: no sample is reliable
    before = [p.detach().clone() for p in m.params]
    out = m.step(batch(0))
    assert m.num_updates == 0 and m.moving_probs is None
    assert all(torch.equal(a, p) for a, p in zip(before, m.params))
    assert torch.isfinite(out.probs).all()


def test_update_when_samples_are_selected(base_model):
    m = make(base_model, e_margin_coef=2.0)  # E₀ = 2 ln C > max entropy: everything reliable
    before = [p.detach().clone() for p in m.params]
    m.step(batch(0))
    assert m.num_updates == 1 and m.moving_probs is not None
    assert any(not torch.equal(a, p) for a, p in zip(before, m.params))


def test_score_is_the_entropy_of_the_returned_prediction(base_model):
    m = make(base_model)
    out = m.step(batch(1))
    manual = -(out.probs * out.probs.log()).sum(1)
    assert torch.allclose(out.ood_score, manual, atol=1e-5)  # higher = less confident = outlier


# -- reset -----------------------------------------------------------------------------------------


def test_reset_keeps_the_moving_vector_by_default_quirk(base_model):
    fresh = make(base_model, e_margin_coef=2.0)
    m = make(base_model, e_margin_coef=2.0)
    for s in range(2):
        m.step(batch(s))
    kept = m.moving_probs.clone()
    m.reset()
    assert torch.equal(m.moving_probs, kept)  # §5: m persists across corruptions
    state, ref = method_state(m), method_state(fresh)
    assert ref.pop("moving_probs") is None
    state.pop("moving_probs")
    assert_same(state, ref)  # everything else is restored (the contract test covers the switch)


# -- end to end ------------------------------------------------------------------------------------
