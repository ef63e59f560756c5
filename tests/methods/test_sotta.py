"""SoTTA (baselines.md §8): HUS confidence threshold and eviction rule, no update on an empty
memory, the SAM/BN configuration, the score quirk, reset semantics, end-to-end run on digits."""

from __future__ import annotations

import copy

import pytest
import torch

from stamplib import methods
from stamplib.blocks.bn import norm_affine_parameters
from stamplib.blocks.entropy import logit_entropy
from stamplib.methods.sotta import SoTTA
from tests.blocks.test_memories import ReferenceHUS
from tests.support import assert_same, batch, method_state

C = 4


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
    for hyperparameter_set in methods.HYPERPARAMETER_SETS:
        assert methods.resolve_config("sotta", hyperparameter_set).rho == 0.5  # the STAMP runs' radius
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




def test_reset_with_the_base_optimizer_switch_is_bit_identical(base_model):
    options = dict(threshold=0.0, capacity=20, reset_base_optimizer_state=True)
    m = methods.create("sotta", base_model, C, **options)
    fresh = methods.create("sotta", base_model, C, **options)
    for s in range(3):
        m.step(batch(s))
    assert m.num_updates == 3 and len(m.memory) == 20
    m.reset()
    assert_same(method_state(m), method_state(fresh))
    assert_same(m.step(batch(5)).probs, fresh.step(batch(5)).probs)
    assert_same(method_state(m), method_state(fresh))



# -- the authors' SAM keeps its base optimiser's state across resets (baselines.md §0) ----------------
def _adam_state(m: methods.TTAMethod) -> list[dict]:
    state = m.optimizer.base_optimizer.state
    return [{k: v.clone() for k, v in state[p].items()} for p in m.adapted_parameters() if state[p]]


def test_adam_moments_and_step_counts_survive_reset(base_model):
    m = methods.create("sotta", base_model, C, threshold=0.0, capacity=20)
    fresh = methods.create("sotta", base_model, C, threshold=0.0, capacity=20)
    for s in range(3):
        m.step(batch(s))
    moments = _adam_state(m)
    assert len(moments) == len(m.adapted_parameters())
    assert all(int(s["step"]) == 3 and s["exp_avg_sq"].abs().sum() > 0 for s in moments)
    m.reset()
    assert_same(m.model.state_dict(), fresh.model.state_dict())  # the weights are the source's
    assert len(m.memory) == 0 and m.num_updates == 0
    assert_same(_adam_state(m), moments)  # Adam's moments and step counts are not
    m.step(batch(5))
    fresh.step(batch(5))
    assert all(int(s["step"]) == 4 for s in _adam_state(m))
    assert any(not torch.equal(a, b) for a, b in zip(m.adapted_parameters(), fresh.adapted_parameters()))


def test_reset_base_optimizer_state_switch_clears_adam(base_model):
    m = methods.create("sotta", base_model, C, threshold=0.0, capacity=20, reset_base_optimizer_state=True)
    for s in range(2):
        m.step(batch(s))
    assert _adam_state(m)
    m.reset()
    assert _adam_state(m) == []


# -- the batched memory against the per-sample loop it replaced (issue 51) --------------------------
class LoopSoTTA(SoTTA):
    """SoTTA with the memory as it was before issue 51 (a copy per stored sample, then a stack)."""

    def setup(self) -> None:
        super().setup()
        cfg = self.config
        self.memory = ReferenceHUS(self.num_classes, cfg.capacity, cfg.threshold, generator=self.cpu_generator)


def test_batched_memory_equals_the_per_sample_loop(base_model):
    """Predictions, scores, reports, memory contents and weights: identical to the loop's, batch by
    batch, across evictions and a reset."""
    options = dict(threshold=0.27, capacity=20, lr=1e-2)
    ours = methods.create("sotta", base_model, C, **options)
    loop = LoopSoTTA(copy.deepcopy(base_model), C, methods.resolve_config("sotta", "cifar10_c", **options))
    dropped = full = False
    for s in range(6):
        if s == 3:
            ours.reset()
            loop.reset()
        x = batch(s, n=24)
        a, b = ours.step(x), loop.step(x)
        assert_same((a.probs, a.ood_score), (b.probs, b.ood_score))
        ra, rb = ours.take_report(), loop.take_report()
        assert_same((ra.passed, ra.memory_tags, ra.memory_labels, ra.loss), (rb.passed, rb.memory_tags,
                                                                             rb.memory_labels, rb.loss))
        assert len(ours.memory) == len(loop.memory)
        if len(loop.memory):
            assert_same(ours.memory.samples(), loop.memory.samples())
        dropped = dropped or not all(ra.passed.tolist())
        full = full or len(ours.memory) == 20  # later insertions evict
    assert full and ours.num_updates == loop.num_updates > 0 and dropped
    assert_same(ours.model.state_dict(), loop.model.state_dict())

