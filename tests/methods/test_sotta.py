"""SoTTA (baselines.md §8): HUS confidence threshold and eviction rule, no update on an empty
memory, the SAM/BN configuration, the score quirk, reset semantics, end-to-end run on digits."""

from __future__ import annotations

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


# -- HUS memory ------------------------------------------------------------------------------------


# -- method ----------------------------------------------------------------------------------------
def test_configuration(base_model):
    m = methods.create("sotta", base_model, C)
    expected = norm_affine_parameters(m.model, exclude_last_stage=True)
    assert [id(p) for p in m.adapted_parameters()] == [id(p) for p in expected]
    assert all(
        mod.momentum == 0.2 and mod.track_running_stats and mod.running_mean is not None
        for mod in m.model.modules()
        if isinstance(mod, torch.nn.BatchNorm2d)
    )
    for setting in methods.SETTINGS:
        assert methods.resolve_config("sotta", setting).rho == 0.5  # the STAMP runs' radius
    assert isinstance(m.optimizer.base_optimizer, torch.optim.Adam)


def test_no_update_on_an_empty_memory(base_model):
    m = methods.create("sotta", base_model, C, threshold=1.0)  # a random net is never that sure
    before = {k: v.clone() for k, v in m.model.state_dict().items()}
    out = m.step(batch(0))
    assert len(m.memory) == 0 and m.num_updates == 0
    assert_same(m.model.state_dict(), before)  # parameters and running statistics untouched
    assert torch.isfinite(out.probs).all()


def test_update_on_a_non_empty_memory_moves_params_and_running_stats(base_model):
    m = methods.create("sotta", base_model, C, threshold=0.0, lr=1e-2)
    before = {k: v.clone() for k, v in m.model.state_dict().items()}
    x = batch(1)
    with torch.no_grad():
        expected = torch.softmax(m.model.eval()(x), 1)
    out = m.step(x)
    assert len(m.memory) == 16 and m.num_updates == 1
    assert torch.allclose(out.probs, expected, atol=1e-6)  # prediction from before the update
    after = m.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert any(k.endswith("running_mean") for k in changed)
    assert any(k.endswith(".weight") and "conv5_x" not in k for k in changed)
    assert not any("conv5_x" in k and k.endswith((".weight", ".bias")) for k in changed)
    assert not m.model.training  # left in eval mode for the next prediction


def test_loss_is_entropy_over_classes_averaged(base_model):
    m = methods.create("sotta", base_model, C)
    logits = torch.tensor([[2.0, 0.0, -1.0, 0.5], [0.0, 0.0, 0.0, 0.0]])
    p = torch.softmax(logits, 1)
    expected = float((-(p * torch.log(p + 1e-6)).sum(1) / C).mean())
    assert float(m.loss(logits)) == pytest.approx(expected, rel=1e-6)


def test_score_quirk_and_corrected_score(base_model):
    x = batch(2)
    quirk = methods.create("sotta", base_model, C, threshold=1.0).step(x)
    fixed = methods.create("sotta", base_model, C, threshold=1.0, score="entropy").step(x)
    assert torch.equal(quirk.probs, fixed.probs)
    # §0.2: the evaluator applies softmax to the returned probabilities.
    assert torch.allclose(quirk.ood_score, logit_entropy(quirk.probs), atol=1e-6)
    assert torch.allclose(fixed.ood_score, -(fixed.probs * fixed.probs.log()).sum(1), atol=1e-5)
    # softmax of a probability vector is nearly uniform: the quirk squeezes scores towards ln C.
    assert (quirk.ood_score.max() - quirk.ood_score.min()) < (
        fixed.ood_score.max() - fixed.ood_score.min()
    )
    sure = torch.tensor([[0.97, 0.01, 0.01, 0.01]])
    unsure = torch.full((1, 4), 0.25)
    assert logit_entropy(sure) < logit_entropy(unsure)  # same ranking direction: higher = outlier


