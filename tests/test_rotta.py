"""RoTTA (baselines.md §7, §0.1, §0.2): robust BN, CSTU memory, update schedule, teacher."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from conftest import image_batch as batch
from conftest import two_bn_net as tiny_net
from torch import nn

from stamplib import methods
from stamplib.blocks.cstu import CSTUMemory
from stamplib.blocks.robust_bn import RobustBN2d, use_robust_bn
from stamplib.methods.cotta import augment_batch
from stamplib.methods.rotta import Rotta

C = 4


def params_of(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def make(dataset: str = "cifar10_c", net: nn.Module | None = None, **overrides) -> Rotta:
    method = methods.create("rotta", net if net is not None else tiny_net(), C, dataset=dataset, seed=5, **overrides)
    assert isinstance(method, Rotta)
    return method


# -- robust BN ---------------------------------------------------------------------------------------------
def source_bn(channels: int = 3) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(channels, eps=1e-3)
    g = torch.Generator().manual_seed(0)
    bn.running_mean.copy_(torch.rand(channels, generator=g) - 0.5)
    bn.running_var.copy_(torch.rand(channels, generator=g) + 0.5)
    bn.weight.data.copy_(torch.rand(channels, generator=g) + 0.5)
    bn.bias.data.copy_(torch.rand(channels, generator=g) - 0.5)
    return bn


# The robust-BN tests run in float64: the hand computations reduce in another order than the
# module, and only in float64 does a tight tolerance hold whatever the CPU's kernels.
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
    assert not torch.allclose(out, nn.functional.batch_norm(x, None, None, bn.weight, bn.bias, True, 0.0, 1e-3), atol=1e-3)
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


# -- CSTU ------------------------------------------------------------------------------------------------------
def tag(v: float) -> torch.Tensor:
    return torch.tensor([v])


def contents(mem: CSTUMemory) -> list[list[float]]:
    return [[float(item.data) for item in items] for items in mem.data]


def test_cstu_score_formula() -> None:
    mem = CSTUMemory(num_classes=4, capacity=8)
    assert mem.score(0, 0.3) == pytest.approx(0.5 + 0.3 / math.log(4))
    assert mem.score(8, 0.0) == pytest.approx(1 / (1 + math.exp(-1)))


def test_cstu_fills_then_replaces_within_full_class_by_score_and_age() -> None:
    mem = CSTUMemory(num_classes=2, capacity=4)  # quota 2 per class
    assert mem.add(tag(1), 0, 0.1) and mem.add(tag(2), 0, 0.2)
    assert [i.age for i in mem.items()] == [2, 1], "every stored item ages after each attempt"
    # Class 0 is at its quota: the new item competes within class 0 only. Scores (N = 4):
    # item 1: σ(2/4) + 0.1/ln2 ≈ 0.767; item 2: σ(1/4) + 0.2/ln2 ≈ 0.851; new: 0.5 + 0.05/ln2.
    assert mem.add(tag(3), 0, 0.05)
    assert contents(mem) == [[1.0, 3.0], []]
    # A very uncertain newcomer scores higher than everything stored: it is discarded, ages grow.
    ages = [i.age for i in mem.items()]
    assert not mem.add(tag(4), 0, 0.69)
    assert contents(mem) == [[1.0, 3.0], []]
    assert [i.age for i in mem.items()] == [a + 1 for a in ages]


def test_cstu_age_decides_between_equal_uncertainties() -> None:
    mem = CSTUMemory(num_classes=2, capacity=4)
    mem.add(tag(1), 0, 0.3)  # older
    mem.add(tag(2), 0, 0.3)
    mem.add(tag(3), 0, 0.0)
    assert contents(mem) == [[2.0, 3.0], []], "the older of two equally uncertain items goes"
    # Ages keep accumulating: the oldest remaining item is now the victim.
    mem.add(tag(4), 0, 0.0)
    assert contents(mem) == [[3.0, 4.0], []]


def test_cstu_full_memory_evicts_from_the_largest_classes() -> None:
    mem = CSTUMemory(num_classes=3, capacity=4)  # quota 4/3
    mem.add(tag(1), 0, 0.9)
    mem.add(tag(2), 0, 0.1)  # class 0 holds 2 > quota: allowed while the memory is not full
    mem.add(tag(3), 1, 1.0)
    mem.add(tag(4), 2, 0.0)
    assert len(mem) == 4 and mem.occupancy() == [2, 1, 1]
    # Class 1 is under quota but the memory is full: the victim comes from class 0 (largest),
    # even though the most uncertain item overall is in class 1.
    assert mem.add(tag(5), 1, 0.0)
    assert contents(mem) == [[2.0], [3.0, 5.0], [4.0]]
    # A newcomer scoring above every item of the largest classes is discarded.
    assert not mem.add(tag(6), 2, 1.3)
    assert contents(mem) == [[2.0], [3.0, 5.0], [4.0]]


def test_cstu_ties_go_to_the_later_item() -> None:
    mem = CSTUMemory(num_classes=3, capacity=4, lambda_t=0.0)  # score = u / ln C: ties possible
    for v, k in ((1, 0), (2, 0), (3, 1), (4, 1)):
        mem.add(tag(v), k, 0.5)
    assert mem.occupancy() == [2, 2, 0]
    mem.add(tag(5), 2, 0.1)  # majority classes 0 and 1 tie on every score: the last item goes
    assert contents(mem) == [[1.0, 2.0], [3.0], [5.0]]


def test_cstu_get_memory_order_and_ages() -> None:
    mem = CSTUMemory(num_classes=2, capacity=4)
    mem.add(tag(1), 1, 0.1)
    mem.add(tag(2), 0, 0.1)
    mem.add(tag(3), 1, 0.1)
    data, ages = mem.get_memory()
    assert data.flatten().tolist() == [2.0, 1.0, 3.0], "class order, then insertion order"
    assert ages.tolist() == [2 / 4, 3 / 4, 1 / 4]
    mem.clear()
    assert len(mem) == 0


# -- the method ------------------------------------------------------------------------------------------------
def test_hyperparameters_and_configuration() -> None:
    for setting in methods.SETTINGS:
        cfg = methods.resolve_config("rotta", setting)
        assert (cfg.lr, cfg.capacity, cfg.update_every, cfg.nu, cfg.bn_momentum) == (5e-3, 64, 64, 0.001, 0.05)
        assert (cfg.lambda_t, cfg.lambda_u, cfg.reset_counter) == (1.0, 1.0, False)
        assert cfg.clip_normalized_inputs == (setting == "imagenet_c")
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
    strong = augment_batch(data, g, None, shared=True)
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


def all_state(method: Rotta) -> dict[str, torch.Tensor]:
    state = {f"model.{k}": v for k, v in method.model.state_dict().items()}
    state |= {f"teacher.{k}": v for k, v in method.teacher.state_dict().items()}
    state["generator"] = method.generator.get_state()
    state["cpu_generator"] = method.cpu_generator.get_state()
    for i, s in method.optimizer.state_dict()["state"].items():
        for k, v in s.items():
            state[f"optim.{i}.{k}"] = torch.as_tensor(v)
    for i, item in enumerate(method.memory.items()):
        state[f"memory.{i}"] = item.data
    return state


@pytest.mark.parametrize("reset_counter", [False, True])
def test_reset_is_bit_identical_to_a_fresh_instance(reset_counter: bool) -> None:
    method = make(update_every=8, reset_counter=reset_counter)
    with torch.no_grad():
        for seed in (1, 2):
            method.step(batch(12, seed=seed))
    assert method.updates == 3 and len(method.memory) > 0
    method.reset()
    fresh = make(update_every=8, reset_counter=reset_counter)
    got, want = all_state(method), all_state(fresh)
    assert got.keys() == want.keys()
    for k in want:
        assert torch.equal(got[k], want[k]), k
    assert method.updates == 0 and len(method.memory) == 0
    assert method.samples_seen == (0 if reset_counter else 24)
    if reset_counter:
        with torch.no_grad():
            a, b = method.step(batch(12, seed=9)), fresh.step(batch(12, seed=9))
        assert torch.equal(a.probs, b.probs) and torch.equal(a.ood_score, b.ood_score)
        assert all(torch.equal(u, v) for u, v in zip(params_of(method.model), params_of(fresh.model)))


def test_imagenet_quirk_needs_input_normalization() -> None:
    with pytest.raises(ValueError, match="InputNormalization"):
        make("imagenet_c")
    assert make("imagenet_c", clip_normalized_inputs=False).normalization is None


def test_digits_end_to_end_finite() -> None:
    from stamplib.data import build_stream
    from stamplib.models import source_model

    stream = build_stream("digits", "noise", "none", max_id=128)
    model = source_model("digits", progress=False)
    num_classes = model.fc.out_features
    method = methods.create("rotta", model, num_classes, dataset="digits")
    with torch.no_grad():
        for b in stream.batches():
            out = method.step(b.x)
            assert out.probs.shape == (b.x.shape[0], num_classes)
            assert torch.isfinite(out.probs).all() and torch.isfinite(out.ood_score).all()
    assert method.samples_seen == 160 and method.updates == 2
    assert all(torch.isfinite(t).all() for t in method.model.state_dict().values())
    assert all(torch.isfinite(t).all() for t in method.teacher.state_dict().values())
