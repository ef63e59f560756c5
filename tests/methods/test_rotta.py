"""RoTTA (baselines.md §7, §0.1, §0.2): robust BN, CSTU memory, update schedule, teacher."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from stamplib import methods
from stamplib.blocks.entropy import logit_entropy, prob_entropy
from stamplib.blocks.robust_bn import RobustBN2d
from stamplib.blocks.views import cotta_augment_batch
from stamplib.methods.base import TTAOutput
from stamplib.methods.rotta import UNCERTAINTY_EPS, Rotta
from tests.blocks.test_memories import ReferenceCSTU
from tests.support import assert_same, method_state
from tests.support import image_batch as batch
from tests.support import two_bn_net as tiny_net

C = 4


def params_of(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def make(hyperparameter_set: str = "cifar10_c", net: nn.Module | None = None, **overrides) -> Rotta:
    method = methods.create("rotta", net if net is not None else tiny_net(), C, hyperparameter_set=hyperparameter_set,
                            seed=5, **overrides)
    assert isinstance(method, Rotta)
    return method


# -- robust BN ---------------------------------------------------------------------------------------------


# -- CSTU ------------------------------------------------------------------------------------------------------


# -- the method ------------------------------------------------------------------------------------------------
def test_hyperparameters_and_configuration() -> None:
    for hyperparameter_set in methods.HYPERPARAMETER_SETS:
        cfg = methods.resolve_config("rotta", hyperparameter_set)
        assert (cfg.lr, cfg.capacity, cfg.update_every, cfg.nu, cfg.bn_momentum) == (5e-3, 64, 64, 0.001, 0.05)
        assert (cfg.lambda_t, cfg.lambda_u, cfg.reset_counter) == (1.0, 1.0, False)
        assert cfg.clip_normalized_inputs == (hyperparameter_set == "imagenet_c")
    method = make()
    trainable = {n for n, p in method.model.named_parameters() if p.requires_grad}
    assert trainable == {"bn1.weight", "bn1.bias", "bn2.weight", "bn2.bias"}
    assert isinstance(method.optimizer, torch.optim.Adam) and method.optimizer.param_groups[0]["lr"] == 5e-3
    assert isinstance(method.teacher.bn1, RobustBN2d) and method.teacher.bn1 is not method.model.bn1
    assert all(not p.requires_grad for p in method.teacher.parameters())


def test_update_every_64_samples_mid_batch_and_counter_survives_reset() -> None:
    method = make()
    calls: list[int] = []
    original = method._update_model
    method._update_model = lambda: (calls.append(method.samples_seen), original())[1]  # type: ignore[method-assign]
    with torch.no_grad():
        method.step(batch(40, seed=1))
        assert calls == []
        method.step(batch(40, seed=2))
        assert calls == [64], "the update fires at the 64th sample, in the middle of the batch"
        method.reset()
        assert method.samples_seen == 80 and len(method.memory) == 0
        method.step(batch(60, seed=3))
    assert calls == [64, 128], "the global counter is not reset: the next update is at sample 128"
    assert method.updates == 1

    fixed = make(reset_counter=True)
    with torch.no_grad():
        fixed.step(batch(40, seed=1))
        fixed.reset()
        assert fixed.samples_seen == 0
        fixed.step(batch(40, seed=2))
    assert fixed.updates == 0


def test_step_returns_teacher_eval_logits_and_update_matches_hand_computation() -> None:
    method = make(update_every=16)
    with torch.no_grad():
        method.step(batch(16, seed=1))  # one update: the teacher now differs from the student
    x = batch(16, seed=2)
    teacher0, student0 = copy.deepcopy(method.teacher), copy.deepcopy(method.model)
    g = torch.Generator().manual_seed(0)
    g.set_state(method.generator.get_state())
    opt_state = copy.deepcopy(method.optimizer.state_dict())
    with torch.no_grad():
        t = teacher0.eval()(x)
        s = student0.eval()(x)
    assert not torch.allclose(t, s, atol=1e-4)
    with torch.no_grad():
        out = method.step(x)
    torch.testing.assert_close(out.probs, t.softmax(1))
    p = t.softmax(1)
    torch.testing.assert_close(out.ood_score, -(p * p.log()).sum(1))  # entropy: higher = outlier

    # Replay the update at the 32nd sample on the copies.
    data, ages = method.memory.get_memory()
    strong = cotta_augment_batch(data, g, None, shared=True)
    teacher0.train()
    student0.train()
    with torch.no_grad():
        t_mem = teacher0(data)
    s_mem = student0(strong)
    w = torch.exp(-ages) / (1 + torch.exp(-ages))
    loss = (w * -(t_mem.softmax(1) * s_mem.log_softmax(1)).sum(1)).mean()
    trainable = [q for q in student0.parameters() if q.requires_grad]
    opt = torch.optim.Adam(trainable, lr=5e-3)
    opt.load_state_dict(opt_state)
    loss.backward()
    opt.step()
    for got, want in zip(method.model.state_dict().values(), student0.state_dict().values()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for got, t0, s1 in zip(method.teacher.parameters(), teacher0.parameters(), student0.parameters()):
        torch.testing.assert_close(got, 0.999 * t0 + 0.001 * s1, rtol=1e-5, atol=1e-6)
    # The teacher's robust-BN statistics moved with its own train-mode forward only.
    torch.testing.assert_close(method.teacher.bn1.running_mean, teacher0.bn1.running_mean)
    assert not torch.allclose(method.teacher.bn1.running_mean, method.model.bn1.running_mean)


def test_memory_holds_pseudo_labelled_samples_with_uncertainty() -> None:
    method = make()
    x = batch(10, seed=4)
    with torch.no_grad():
        out = method.step(x)
    items = method.memory.items()
    assert len(items) == 10
    labels = out.probs.argmax(1)
    p = out.probs
    u = -(p * torch.log(p + 1e-6)).sum(1)
    for item in items:
        i = next(j for j in range(10) if torch.equal(x[j], item.data))
        assert item.label == int(labels[i]) and item.uncertainty == pytest.approx(float(u[i]), abs=1e-6)


def test_reset_restores_all_but_the_sample_counter_by_default_quirk() -> None:
    method = make(update_every=8)
    with torch.no_grad():
        for seed in (1, 2):
            method.step(batch(12, seed=seed))
    assert method.updates == 3 and len(method.memory) > 0
    method.reset()
    state, ref = method_state(method), method_state(make(update_every=8))
    assert state.pop("samples_seen") == 24 and ref.pop("samples_seen") == 0  # §7 "Reset"
    assert_same(state, ref)  # everything else is restored (reset_counter=True: the contract test)


def test_imagenet_quirk_needs_input_normalization() -> None:
    with pytest.raises(ValueError, match="InputNormalization"):
        make("imagenet_c")
    assert make("imagenet_c", clip_normalized_inputs=False).normalization is None


# -- the batched memory against the per-sample loop it replaced (issue 51) --------------------------
class LoopRotta(Rotta):
    """RoTTA as it was before issue 51: one memory insertion per sample, a copy each."""

    def setup(self) -> None:
        super().setup()
        cfg = self.config
        self.memory = ReferenceCSTU(self.num_classes, cfg.capacity, cfg.lambda_t, cfg.lambda_u)

    def step(self, x: torch.Tensor) -> TTAOutput:
        self.model.eval()
        self.teacher.eval()
        with torch.no_grad():
            teacher_logits = self.teacher(x)
            probs = teacher_logits.softmax(dim=1)
            labels = probs.argmax(dim=1).tolist()
            uncertainty = prob_entropy(probs, UNCERTAINTY_EPS).tolist()
        stored, loss = [], None
        tags = self.sample_tags(x.shape[0]).tolist()
        for i in range(x.shape[0]):
            stored.append(self.memory.add(x[i].detach().clone(), labels[i], uncertainty[i], tags[i]))
            self.samples_seen += 1
            if self.samples_seen % self.config.update_every == 0:
                loss = self._update_model()
        items = self.memory.items()
        self.report(passed=torch.tensor(stored, dtype=torch.bool), loss=loss,
                    memory_tags=torch.tensor([it[4] for it in items], dtype=torch.long),
                    memory_labels=torch.tensor([it[1] for it in items], dtype=torch.long), step_size=self.config.lr)
        return TTAOutput(probs, logit_entropy(teacher_logits))


def test_batched_memory_equals_the_per_sample_loop() -> None:
    """Predictions, scores, reports, memory contents and ages, weights and teacher: identical to the
    loop's, batch by batch, with updates in the middle of batches and across a reset."""
    options = dict(capacity=12, update_every=10, lambda_t=0.0)  # by uncertainty alone: newcomers get discarded
    ours = make(**options)
    loop = LoopRotta(tiny_net(), C, methods.resolve_config("rotta", "cifar10_c", **options), seed=5)
    discarded = False
    for s in range(7):
        if s == 4:
            ours.reset()
            loop.reset()
        g = torch.Generator().manual_seed(s)  # a contrast and a shift per image: two classes predicted
        x = (batch(14, seed=s) - 0.5) * 10 * torch.rand(14, 3, 1, 1, generator=g) + torch.randn(14, 3, 1, 1,
                                                                                                generator=g)
        with torch.no_grad():
            a, b = ours.step(x), loop.step(x)
        assert_same((a.probs, a.ood_score), (b.probs, b.ood_score))
        ra, rb = ours.take_report(), loop.take_report()
        assert_same(
            (ra.passed, ra.memory_tags, ra.memory_labels, ra.loss),
            (rb.passed, rb.memory_tags, rb.memory_labels, rb.loss),
        )
        assert_same(ours.memory.get_memory(), loop.memory.get_memory())
        discarded = discarded or not all(ra.passed.tolist())
    assert sum(n > 0 for n in ours.memory.occupancy()) >= 2 and ours.updates == loop.updates >= 2 and discarded
    assert_same(
        (ours.model.state_dict(), ours.teacher.state_dict()), (loop.model.state_dict(), loop.teacher.state_dict())
    )
