"""OWTTT (baselines.md §9): Otsu threshold, prototype expansion and the FIFO pool, the confident
split, distribution alignment, source statistics, the encoder of wrapped torchvision ResNets,
score convention (after / before the update), reset semantics, end-to-end run on digits."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.distributions import MultivariateNormal
from torch.utils._python_dispatch import TorchDispatchMode

from stamplib import methods, models
from stamplib.blocks.otsu import otsu_threshold
from stamplib.blocks.precision import full_precision_matmul
from stamplib.methods.base import TTAOutput
from stamplib.methods.owttt import OWTTT, feature_encoder, grow_pool
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
    os = np.array([0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7], dtype=np.float32)
    seen = np.array([True] * 4 + [False] * 3)
    new_seen, new_unseen = OWTTT.confident_split(os, seen, ~seen)
    assert np.flatnonzero(new_seen).tolist() == [0]  # k = 2: drop os ≥ 2nd smallest
    assert np.flatnonzero(new_unseen).tolist() == [4]  # keep os > a[⌊3/2⌋] = 0.8
    one = np.array([True, False, False])
    s, u = OWTTT.confident_split(np.array([0.1, 0.8, 0.9], dtype=np.float32), one, ~one)
    assert not s.any()  # a single seen sample is dropped (a[-0] = a[0])
    assert np.flatnonzero(u).tolist() == [2]


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
    # The default step (CIFAR10-C hyperparameter set) weights the alignment loss exactly as λ = 1 does.
    default = _adapted_after_one_step(calibrated_model)
    assert_same(default, _adapted_after_one_step(calibrated_model, da_scale=1.0))
    five = _adapted_after_one_step(calibrated_model, da_scale=5.0)
    assert any(not torch.equal(a, b) for a, b in zip(default, five))
    for hyperparameter_set in methods.HYPERPARAMETER_SETS:
        config = methods.resolve_config("owttt", hyperparameter_set)
        assert config.da_scale == 1.0 and config.effective_da_scale == 1.0, hyperparameter_set


def test_intended_lambda_switch(calibrated_model):
    for hyperparameter_set, value in INTENDED_LAMBDA.items():
        config = methods.resolve_config("owttt", hyperparameter_set, da_scale_as_intended=True)
        assert config.effective_da_scale == value, hyperparameter_set
    assert_same(
        _adapted_after_one_step(calibrated_model, da_scale_as_intended=True),
        _adapted_after_one_step(calibrated_model, da_scale=5.0),
    )
    with pytest.raises(ValueError, match="da_scale"):
        methods.resolve_config("owttt", "cifar10_c", da_scale=2.0, da_scale_as_intended=True)


# -- the vectorised step against the per-sample loop it replaced (issue 51) -------------------------
class LoopOWTTT(OWTTT):
    """The step as it was before issue 51: a host wait per visited sample in the prototype
    expansion, boolean-mask indexing, the queue fed by ``tolist``. The reference of the step."""

    def push_prototype(self, z: torch.Tensor) -> None:
        if self.pool.shape[0] >= self.config.max_prototypes:
            self.pool = self.pool[1:]
        self.pool = torch.cat([self.pool, z.detach().view(1, -1)], dim=0)

    def expand_pool(self, feat, cos_src, tau1, tau2) -> None:  # noqa: ANN001
        z = F.normalize(feat.detach(), dim=1)
        cos_src = cos_src.detach()
        r = cos_src.max(dim=1).values.clone()
        while True:
            r_min, i = r.min(dim=0)
            if not bool(1 - r_min > tau1):
                return
            r_all = cos_src[i].max()
            if self.pool.shape[0] > 0:
                r_all = torch.maximum(r_all, (self.pool @ z[i]).max())
            r[i] = 1.0
            if bool(1 - r_all > tau2):
                self.push_prototype(z[i])

    @staticmethod
    def loop_confident_split(os, seen, unseen):  # noqa: ANN001, ANN205
        down = torch.sort(os[seen], descending=True).values
        up = torch.sort(os[unseen], descending=True).values
        return seen & (os < down[-int(down.numel() / 2)]), unseen & (os > up[int(up.numel() / 2)])

    def step(self, x):  # noqa: ANN001, ANN201
        cfg, c = self.config, self.num_classes
        self.optimizer.zero_grad(set_to_none=True)
        with torch.enable_grad():
            self.model.eval()
            feat = self.encode(x)
            cos_src = self._cosines(feat)
            had_pool = self.pool.shape[0] > 0
            cos = cos_src
            if had_pool:
                cos_pool = (F.normalize(feat, dim=1) @ self.pool.T).max(dim=1, keepdim=True).values
                cos = torch.cat([cos_src, cos_pool], dim=1)
            logits = cos / cfg.delta
            before = cos_src.detach()
            os_src = 1 - before.max(dim=1).values
            self.os_queue.extend(os_src.tolist())
            tau1 = otsu_threshold(list(self.os_queue))
            seen = os_src < tau1
            unseen = ~seen
            if unseen.any():
                os_all = 1 - cos.detach().max(dim=1).values
                self.expand_pool(feat, before, tau1, otsu_threshold(os_all[unseen]))
            labels = before.argmax(dim=1)
            terms = []
            if seen.any():
                self.model.train()
                terms.append(cfg.effective_da_scale * cfg.da_loss_scale * self.alignment_loss(self.encode(x)))
            if had_pool:
                if seen.any() and unseen.any():
                    seen, unseen = self.loop_confident_split(os_src, seen, unseen)
                ce = []
                if seen.any():
                    ce.append(F.cross_entropy(logits[seen, :c], labels[seen]))
                if unseen.any():
                    outlier = torch.full((int(unseen.sum()),), c, dtype=torch.long, device=x.device)
                    ce.append(F.cross_entropy(logits[unseen], outlier))
                if ce:
                    terms.append(cfg.ce_scale * 0.5 * torch.stack(ce).sum())
            if terms:
                torch.stack(terms).sum().backward()
                self.optimizer.step()
                self.num_updates += 1
            self.optimizer.zero_grad(set_to_none=True)
        self.model.eval()
        with torch.no_grad():
            after = self._cosines(self.encode(x))
        return TTAOutput(torch.softmax(after / cfg.delta, dim=1), -after.max(dim=1).values)


def _stream(n_batches: int) -> list[torch.Tensor]:
    """Seeded batches whose second half is far from the source images (contrast pushed up and
    shifted), so both groups, the prototype pool and the confident split all take part."""
    g = torch.Generator().manual_seed(51)
    out = []
    for k in range(n_batches):
        x = torch.rand(24, 3, 16, 16, generator=g)
        x[12:] = (x[12:] * 3.0 - 1.0 + 0.1 * k).clamp(0, 1)
        out.append(x)
    return out


def test_vectorised_step_equals_the_per_sample_loop(calibrated_model):
    """Predictions, scores, pool, queue, EMA Gaussian and weights: identical, batch by batch, to
    the loop the step replaced (the seeded stream fills the pool beyond its capacity of 5)."""
    vectorised = make(calibrated_model, max_prototypes=5, queue_length=40)
    config = methods.resolve_config("owttt", "cifar10_c", max_prototypes=5, queue_length=40)
    loop = LoopOWTTT(copy.deepcopy(calibrated_model), C, config, source_data=vectorised.source_data)
    pool_sizes = []
    for x in _stream(8):
        ours, theirs = vectorised.step(x), loop.step(x)
        assert_same((ours.probs, ours.ood_score), (theirs.probs, theirs.ood_score))
        assert_same(vectorised.pool, loop.pool)
        assert list(vectorised.os_queue) == list(loop.os_queue)
        pool_sizes.append(vectorised.pool.shape[0])
    assert_same((vectorised.ema_mean, vectorised.ema_cov), (loop.ema_mean, loop.ema_cov))
    assert_same(list(vectorised.model.state_dict().values()), list(loop.model.state_dict().values()))
    assert vectorised.num_updates == loop.num_updates == 8
    assert pool_sizes[0] > 0 and max(pool_sizes) == 5, pool_sizes  # the FIFO cap was reached


def test_grow_pool_equals_the_loop_on_random_cosines():
    """The host expansion against the loop, on random cosines with ties and a nearly full pool."""
    rng = np.random.default_rng(0)
    for trial in range(40):
        b, p, capacity = int(rng.integers(1, 12)), int(rng.integers(0, 6)), int(rng.integers(1, 8))
        p = min(p, capacity)
        z = F.normalize(torch.from_numpy(rng.normal(size=(b + p, 6))).float(), dim=1)
        r = torch.from_numpy(rng.choice([0.1, 0.2, 0.3, 0.45, 0.6], size=b)).float()  # ties
        m = LoopOWTTT.__new__(LoopOWTTT)
        m.config = methods.resolve_config("owttt", "cifar10_c", max_prototypes=capacity)
        m.pool = z[b:].clone()
        cos_src = r[:, None].expand(b, 3).clone()
        m.expand_pool(z[:b], cos_src, 0.5, 0.35)
        batch_z = F.normalize(z[:b], dim=1)  # as the loop normalises its features
        candidates = torch.cat([z[b:], batch_z])
        columns = grow_pool(r.numpy(), (batch_z @ candidates.T).numpy(), p, 0.5, 0.35, capacity)
        assert_same(candidates[columns], m.pool), trial


# -- TF32 (issue 51): the covariance, its Cholesky factor and the cosines at full float32 ------------
def _round_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 → the nearest value with TF32's 10 mantissa bits (ties to even)."""
    bits = t.contiguous().view(torch.int32)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF
    return bits.view(torch.float32)


class EmulatedTF32(TorchDispatchMode):
    """What a GPU does with float32 matrix products while TF32 is allowed, on the CPU: inputs
    rounded to TF32 whenever the switch, as read at the product, says TF32."""

    PRODUCTS = {"mm", "addmm", "bmm", "baddbmm", "mv", "dot"}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if func.overloadpacket.__name__ in self.PRODUCTS and torch.backends.cuda.matmul.fp32_precision == "tf32":
            args = [_round_to_tf32(a) if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a
                    for a in args]
        return func(*args, **(kwargs or {}))


@pytest.fixture()
def tf32_on():
    """TF32 allowed through the legacy switch (what ``--tf32`` sets), restored afterwards."""
    legacy = torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = True
    yield
    torch.set_float32_matmul_precision(legacy)


def _near_singular_features(m: OWTTT) -> torch.Tensor:
    """A batch far from the origin with a tiny spread: its covariance is a small difference of
    large products, which TF32's rounding turns indefinite (so no Cholesky factor)."""
    g = torch.Generator().manual_seed(3)
    return 1.0 + 1e-3 * torch.randn(16, m.feature_dim, generator=g)


def _tiny_template(m: OWTTT) -> None:
    """Far below TF32's rounding of the covariance (about 5e-4 here), far above float32's (1e-7)."""
    m.template = torch.eye(m.feature_dim) * 1e-5


def test_emulated_tf32_breaks_the_covariance_without_full_precision(calibrated_model, tf32_on):
    """The failure of issue 51 on a CPU: the same EMA update and Gaussian as ``alignment_loss``,
    computed under the (emulated) TF32 switch, have no Cholesky factor."""
    m = make(calibrated_model)
    _tiny_template(m)
    feats = _near_singular_features(m)
    with EmulatedTF32():
        diff = feats - m.ema_mean
        shift = diff.sum(dim=0) / feats.shape[0]
        cov = (diff.T @ diff) / feats.shape[0] - torch.outer(shift, shift)
        with pytest.raises(torch.linalg.LinAlgError):
            MultivariateNormal(m.ema_mean + shift, cov + m.template, validate_args=False)


def test_alignment_loss_under_tf32_is_the_float32_result(calibrated_model, tf32_on):
    m = make(calibrated_model)
    _tiny_template(m)
    feats = _near_singular_features(m)
    with EmulatedTF32():
        loss = m.alignment_loss(feats)
    assert torch.backends.cuda.matmul.fp32_precision == "tf32" and torch.backends.cuda.matmul.allow_tf32
    reference = make(calibrated_model)
    _tiny_template(reference)
    torch.backends.cuda.matmul.allow_tf32 = False
    assert_same(loss, reference.alignment_loss(feats))
    assert torch.isfinite(loss)


def test_owttt_steps_under_emulated_tf32_as_in_float32(calibrated_model, tf32_on):
    """Whole steps with the switch on give the float32 steps' numbers. The emulation rounds explicit
    matrix products only (not the network's convolutions), so this compares exactly the products
    OWTTT pins: the cosines, the covariance, the KL terms and their gradients."""
    tf32 = make(calibrated_model)
    with EmulatedTF32():
        outs = [tf32.step(x) for x in _stream(3)]
    torch.backends.cuda.matmul.allow_tf32 = False
    fp32 = make(calibrated_model)
    for out, x in zip(outs, _stream(3)):
        theirs = fp32.step(x)
        assert_same((out.probs, out.ood_score), (theirs.probs, theirs.ood_score))


def test_full_precision_matmul_restores_either_interface():
    cuda_matmul = torch.backends.cuda.matmul
    before = cuda_matmul.fp32_precision
    try:
        for switch_on in (lambda: setattr(cuda_matmul, "allow_tf32", True),
                          lambda: torch.set_float32_matmul_precision("high"),
                          lambda: setattr(cuda_matmul, "fp32_precision", "tf32")):
            switch_on()
            outside = (cuda_matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision)
            with full_precision_matmul():
                assert cuda_matmul.fp32_precision == "ieee" and not cuda_matmul.allow_tf32
                assert torch.get_float32_matmul_precision() == "highest"
            assert (cuda_matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision) == outside
            torch.set_float32_matmul_precision("highest")
    finally:
        torch.set_float32_matmul_precision("highest")
        cuda_matmul.fp32_precision = before
