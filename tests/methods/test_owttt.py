"""OWTTT (baselines.md §9): Otsu threshold, prototype expansion and the FIFO pool, the confident
split, distribution alignment, source statistics, the encoder of wrapped torchvision ResNets,
score convention (after / before the update), reset semantics, end-to-end run on digits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from stamplib import methods, models
from stamplib.methods.owttt import OWTTT, feature_encoder
from tests.support import assert_same, batch, source_data

C = 4


def make(calibrated_model, **overrides) -> OWTTT:
    return methods.create(
        "owttt", calibrated_model, C, source_data=source_data("owttt-unit"), **overrides
    )


# -- Otsu ------------------------------------------------------------------------------------------


# -- prototype pool --------------------------------------------------------------------------------
def test_prototype_expansion_adds_only_far_away_features(calibrated_model):
    m = make(calibrated_model)
    d = m.feature_dim
    e = torch.eye(d)
    feat = torch.stack([e[0], e[0] + 1e-3 * e[1], 3.0 * e[2], e[3], e[4]])
    cos_src = torch.zeros(5, C)
    cos_src[:, 0] = torch.tensor([0.1, 0.2, 0.3, 0.8, 0.45])
    m.expand_pool(feat, cos_src, tau1=0.5, tau2=0.1)
    # Visit order by increasing max cos_src: 0, 1, 2, 4 (all 1 − max cos > τ₁), then 3 stops.
    #   0: pool empty, 1 − 0.1 > τ₂ → added;  1: nearly parallel to 0 → 1 − ≈1 < τ₂ → skipped;
    #   2: orthogonal to the pool → 1 − 0.3 > τ₂ → added;  4: likewise, 1 − 0.45 > τ₂ → added.
    assert m.pool.shape == (3, d)
    assert torch.allclose(m.pool, F.normalize(feat[[0, 2, 4]], dim=1))


def test_prototype_expansion_stops_at_tau1_and_uses_the_current_pool(calibrated_model):
    m = make(calibrated_model)
    d = m.feature_dim
    e = torch.eye(d)
    m.push_prototype(e[7])
    feat = torch.stack([e[7] + 1e-3 * e[0], e[8]])
    cos_src = torch.full((2, C), 0.05)
    m.expand_pool(feat, cos_src, tau1=0.5, tau2=0.1)
    assert m.pool.shape == (2, d)  # sample 0 is close to the existing prototype, sample 1 is new
    assert torch.equal(m.pool[1], e[8])
    # 1 − 0.6 ≤ τ₁: nothing is visited.
    m.expand_pool(feat, torch.full((2, C), 0.6), tau1=0.5, tau2=0.1)
    assert m.pool.shape == (2, d)


def test_pool_is_fifo_capped_at_100(calibrated_model):
    m = make(calibrated_model)
    vecs = F.normalize(
        torch.randn(105, m.feature_dim, generator=torch.Generator().manual_seed(0)), dim=1
    )
    for v in vecs:
        m.push_prototype(v)
    assert m.pool.shape == (100, m.feature_dim)
    assert torch.equal(m.pool, vecs[5:])


def test_confident_split_keeps_the_most_confident_halves():
    os = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7])
    seen = torch.tensor([True] * 4 + [False] * 3)
    new_seen, new_unseen = OWTTT.confident_split(os, seen, ~seen)
    assert new_seen.nonzero().view(-1).tolist() == [0]  # k = 2: drop os ≥ 2nd smallest
    assert new_unseen.nonzero().view(-1).tolist() == [4]  # keep os > a[⌊3/2⌋] = 0.8
    one = torch.tensor([True, False, False])
    s, u = OWTTT.confident_split(torch.tensor([0.1, 0.8, 0.9]), one, ~one)
    assert not s.any()  # a single seen sample is dropped (a[-0] = a[0])
    assert u.nonzero().view(-1).tolist() == [2]


# -- distribution alignment ------------------------------------------------------------------------
def _source_features(m: OWTTT) -> torch.Tensor:
    x = m.source_data.images.permute(0, 3, 1, 2).float().div(255).contiguous()
    with torch.no_grad():
        m.model.eval()
        return m.encode(x)


def test_alignment_ema_first_batch_is_the_batch_gaussian(calibrated_model):
    m = make(calibrated_model)
    f = _source_features(m)[:32]
    m.alignment_loss(f)
    centred = f - f.mean(0)
    assert torch.allclose(m.ema_mean, f.mean(0), atol=1e-6)
    assert torch.allclose(m.ema_cov, centred.T @ centred / 32, atol=1e-5)
    assert m.ema_count == 32


def test_alignment_loss_grows_and_has_gradient_when_feature_statistics_shift(calibrated_model):
    m = make(calibrated_model)
    f = _source_features(m)
    shifted = f + 3.0 * (f.mean(0) - m.source_gaussian.loc)  # same covariance, mean moved away
    losses = []
    for feats in (f, shifted):
        m.reset()
        leaf = feats.clone().requires_grad_(True)
        loss = m.alignment_loss(leaf)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(leaf.grad).all()
        assert leaf.grad.abs().sum() > 0
        losses.append(float(loss.detach()))
    assert losses[1] > 2 * losses[0] > 0


def test_source_statistics(calibrated_model):
    m = make(calibrated_model)
    f = _source_features(m)
    labels = m.source_data.labels
    protos = F.normalize(torch.stack([f[labels == c].mean(0) for c in range(C)]), dim=1)
    assert torch.allclose(m.prototypes, protos, atol=1e-5)
    assert torch.allclose(m.source_gaussian.loc, protos.mean(0), atol=1e-5)
    original = make(calibrated_model, source_mean="features")
    assert torch.allclose(original.source_gaussian.loc, f.mean(0), atol=1e-5)
    cov = torch.cov(f.T)
    template = torch.eye(m.feature_dim) * cov.max() / 30
    assert torch.allclose(m.source_gaussian.covariance_matrix, cov + template, atol=1e-4)


# -- encoder ---------------------------------------------------------------------------------------
def test_encoder_of_a_wrapped_torchvision_resnet():
    from torchvision.models import resnet18

    torch.manual_seed(0)
    model = models.InputNormalization(
        resnet18(num_classes=C), models.IMAGENET_MEAN, models.IMAGENET_STD
    ).eval()
    keys = list(model.state_dict())
    encode = feature_encoder(model)
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        f = encode(x)
        assert f.shape == (2, 512)
        assert torch.allclose(model.net.fc(f), model(x), atol=1e-5)
    assert list(model.state_dict()) == keys  # fc is back in place
    m = methods.create("owttt", model, C, source_data=source_data("owttt-tv", n=8, size=32))
    out = m.step(torch.rand(8, 3, 32, 32))
    assert (
        m.feature_dim == 512
        and torch.isfinite(out.probs).all()
        and torch.isfinite(out.ood_score).all()
    )


def test_encoder_of_our_cifar_resnet_is_features(calibrated_model):
    m = make(calibrated_model)
    x = batch(0, 4)
    with torch.no_grad():
        assert torch.equal(m.encode(x), m.model.features(x))


# -- step, score, reset ----------------------------------------------------------------------------
def test_score_is_negative_max_cosine_after_the_update(calibrated_model):
    m = make(calibrated_model)
    m.push_prototype(F.normalize(torch.rand(m.feature_dim), dim=0))  # exercise the CE path too
    x = batch(1)
    out = m.step(x)
    assert m.num_updates == 1
    with torch.no_grad():
        cos = F.normalize(m.model.eval().features(x), dim=1) @ m.prototypes.T
    assert torch.allclose(out.probs, torch.softmax(cos / 0.1, 1), atol=1e-5)
    assert torch.allclose(out.ood_score, -cos.max(1).values, atol=1e-6)  # = os − 1


def test_score_before_the_update_switch(calibrated_model):
    m = make(calibrated_model, score_after_update=False)
    x = batch(2)
    with torch.no_grad():
        cos = F.normalize(m.model.eval().features(x), dim=1) @ m.prototypes.T
    out = m.step(x)
    assert torch.allclose(out.ood_score, -cos.max(1).values, atol=1e-6)
    assert torch.allclose(out.probs, torch.softmax(cos / 0.1, 1), atol=1e-5)


# -- λ as the authors ran it (baselines.md §9 "Correction") -----------------------------------------
INTENDED_LAMBDA = {"cifar10_c": 5.0, "cifar100_c": 1.0, "imagenet_c": 1.0, "cifar10_c_8_2": 1.0,
                   "cifar100_c_80_20": 0.2}


def _adapted_after_one_step(calibrated_model, **overrides) -> list[torch.Tensor]:
    m = make(calibrated_model, **overrides)
    m.step(batch(3))
    assert m.num_updates == 1 and m.ema_count > 0  # the alignment term was part of the step
    return [p.detach().clone() for p in m.model.parameters()]


def test_lambda_is_one_in_every_setting(calibrated_model):
    # The default step (CIFAR10-C setting) weights the alignment loss exactly as λ = 1 does.
    default = _adapted_after_one_step(calibrated_model)
    assert_same(default, _adapted_after_one_step(calibrated_model, da_scale=1.0))
    five = _adapted_after_one_step(calibrated_model, da_scale=5.0)
    assert any(not torch.equal(a, b) for a, b in zip(default, five))
    for setting in methods.SETTINGS:
        config = methods.resolve_config("owttt", setting)
        assert config.da_scale == 1.0 and config.effective_da_scale == 1.0, setting


def test_intended_lambda_switch(calibrated_model):
    for setting, value in INTENDED_LAMBDA.items():
        config = methods.resolve_config("owttt", setting, da_scale_as_intended=True)
        assert config.effective_da_scale == value, setting
    assert_same(
        _adapted_after_one_step(calibrated_model, da_scale_as_intended=True),
        _adapted_after_one_step(calibrated_model, da_scale=5.0),
    )
    with pytest.raises(ValueError, match="da_scale"):
        methods.resolve_config("owttt", "cifar10_c", da_scale=2.0, da_scale_as_intended=True)
