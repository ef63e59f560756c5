"""CoTTA (baselines.md §4, §0.1, §0.2) and the shared blocks it uses (EMA teacher, shared
CoTTA augmentation)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from torch import nn

from stamplib import methods
from stamplib.blocks.bn import BatchStatsNorm2d
from stamplib.blocks.views import cotta_augment_batch, cotta_augment_shared
from stamplib.methods.cotta import PAPER_IMAGENET_RESTORE_PROB, Cotta
from stamplib.models import IMAGENET_MEAN, IMAGENET_STD, InputNormalization
from tests.support import image_batch as batch
from tests.support import two_bn_net as tiny_net

C = 4


def make(hyperparameter_set: str = "cifar10_c", net: nn.Module | None = None,
         execution: methods.Execution = methods.RECORD_EXECUTION,
         **overrides) -> Cotta:
    method = methods.create("cotta", net if net is not None else tiny_net(), C, hyperparameter_set=hyperparameter_set,
                            seed=3, execution=execution, **overrides)
    assert isinstance(method, Cotta)
    return method


def params_of(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


# -- blocks ------------------------------------------------------------------------------------------


# -- configuration -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dataset", "lr", "p", "ap", "loss"),
    [
        ("cifar10_c", 1e-3, 0.005, 0.95, "cross_entropy"),
        ("cifar100_c", 1e-3, 0.005, 0.9, "cross_entropy"),
        ("imagenet_c", 1e-4, 5e-4, 0.05, "symmetric"),
        ("cifar10_c_8_2", 1e-4, 0.02, 0.95, "cross_entropy"),
        ("cifar100_c_80_20", 1e-3, 0.01, 0.72, "cross_entropy"),
    ],
)
def test_hyperparameters_per_setting(dataset: str, lr: float, p: float, ap: float, loss: str) -> None:
    cfg = methods.resolve_config("cotta", dataset)
    assert (cfg.lr, cfg.restore_prob, cfg.aug_threshold, cfg.loss) == (lr, p, ap, loss)
    assert cfg.ema_momentum == 0.999 and cfg.num_augmentations == 32
    assert cfg.clip_normalized_inputs == (dataset == "imagenet_c")
    assert PAPER_IMAGENET_RESTORE_PROB == 5e-5


def test_configure_all_weights_trainable_and_batch_stat_bn() -> None:
    method = make()
    trainable = [n for n, p in method.model.named_parameters() if p.requires_grad]
    assert trainable == [n for n, _ in method.model.named_parameters()]  # conv, BN and fc
    assert {n.split(".")[0] for n in trainable} == {"conv1", "bn1", "conv2", "bn2", "fc"}
    assert all(isinstance(m, BatchStatsNorm2d) for m in (method.model.bn1, method.model.bn2))
    assert isinstance(method.optimizer, torch.optim.Adam)
    assert method.optimizer.param_groups[0]["lr"] == 1e-3
    assert sum(p.numel() for p in method.adapted_parameters()) == sum(p.numel() for p in method.model.parameters())


# -- per-batch behaviour ---------------------------------------------------------------------------------
def reference_student_step(method: Cotta, x: torch.Tensor, teacher_logits: torch.Tensor) -> list[torch.Tensor]:
    """The student after one Adam step on the §4 step-5 loss, from a copy taken before the step."""
    student = copy.deepcopy(method.model)
    opt = torch.optim.Adam(student.parameters(), lr=method.config.lr)
    opt.load_state_dict(copy.deepcopy(method.optimizer.state_dict()))
    s = student(x)
    ce = -(teacher_logits.softmax(1) * s.log_softmax(1)).sum(1)
    if method.config.loss == "symmetric":
        ce = 0.5 * ce + 0.5 * -(s.softmax(1) * teacher_logits.log_softmax(1)).sum(1)
    ce.mean().backward()
    opt.step()
    return params_of(student)


@pytest.mark.parametrize("dataset", ["cifar10_c", "imagenet_c"])
def test_step_without_augmentation_returns_teacher_and_updates_student_and_teacher(dataset: str) -> None:
    net = InputNormalization(tiny_net(), IMAGENET_MEAN, IMAGENET_STD) if dataset == "imagenet_c" else tiny_net()
    # AP = 0: the anchor confidence is never below it, so t = teacher(x); no restore.
    method = make(dataset, net, aug_threshold=0.0, restore_prob=0.0)
    x1, x2 = batch(seed=1), batch(seed=2)
    method.step(x1)
    assert not method.last_augmented
    teacher_before = copy.deepcopy(method.teacher)
    student_before = copy.deepcopy(method.model)
    with torch.no_grad():
        expected_t = teacher_before(x2)
        student_logits = student_before(x2)
    assert not torch.allclose(expected_t, student_logits, atol=1e-4), "teacher and student differ after a step"
    expected_student = reference_student_step(method, x2, expected_t)
    with torch.no_grad():
        out = method.step(x2)
    torch.testing.assert_close(out.probs, expected_t.softmax(1))
    # OOD score = entropy of softmax(teacher logits), higher = outlier (§0.2, sign flipped).
    p = expected_t.softmax(1)
    torch.testing.assert_close(out.ood_score, -(p * p.log()).sum(1))
    for got, want in zip(params_of(method.model), expected_student):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for t, t0, s in zip(method.teacher.parameters(), teacher_before.parameters(), expected_student):
        torch.testing.assert_close(t, 0.999 * t0 + 0.001 * s, rtol=1e-6, atol=1e-7)


def test_augmentation_averaged_pseudo_label() -> None:
    n_aug = 3
    method = make(aug_threshold=1.01, restore_prob=0.0, num_augmentations=n_aug)  # always fires
    x = batch()
    teacher = copy.deepcopy(method.teacher)
    g = torch.Generator().manual_seed(0)
    g.set_state(method.generator.get_state())
    forwards = []
    handle = method.teacher.register_forward_hook(lambda m, i, o: forwards.append(i[0].shape[0]))
    with torch.no_grad():
        out = method.step(x)
        augmented = [teacher(cotta_augment_batch(x, g, None, shared=True)) for _ in range(n_aug)]
        expected = torch.stack(augmented).mean(0)
        with_clean = (torch.stack(augmented).sum(0) + teacher(x)) / (n_aug + 1)
    handle.remove()
    assert method.last_augmented
    # The N views may share forwards (a small batch on a CPU groups them), but no image beyond them.
    assert sum(forwards) == n_aug * x.shape[0], "exactly N views through the teacher, not the clean batch"
    torch.testing.assert_close(out.probs, expected.softmax(1))
    assert not torch.allclose(out.probs, with_clean.softmax(1), atol=1e-5), "clean logits must not be averaged in"
    # Logits are averaged, not probabilities.
    assert not torch.allclose(out.probs, torch.stack(augmented).softmax(2).mean(0), atol=1e-5)


def test_augmentation_fires_only_below_anchor_confidence() -> None:
    x = batch()
    method = make(restore_prob=0.0)
    with torch.no_grad():
        conf = float(method.anchor(x).softmax(1).amax(1).mean())
    above = make(aug_threshold=conf - 1e-4, restore_prob=0.0, num_augmentations=2)
    below = make(aug_threshold=conf + 1e-4, restore_prob=0.0, num_augmentations=2)
    with torch.no_grad():
        above.step(x)
        below.step(x)
    assert not above.last_augmented and below.last_augmented


def test_stochastic_restore_extremes() -> None:
    x = batch()
    everything = make(restore_prob=1.0, aug_threshold=0.0)
    source = params_of(everything.model)
    teacher_before = params_of(everything.teacher)
    with torch.no_grad():
        everything.step(x)
    assert all(torch.equal(p, s) for p, s in zip(everything.model.parameters(), source))
    # The teacher is averaged before the restore and keeps its own values.
    assert any(not torch.equal(t, t0) for t, t0 in zip(everything.teacher.parameters(), teacher_before))

    nothing = make(restore_prob=0.0, aug_threshold=0.0)
    with torch.no_grad():
        t = nothing.teacher(x)
    expected = reference_student_step(nothing, x, t)
    with torch.no_grad():
        nothing.step(x)
    moved = 0
    for got, want, src in zip(nothing.model.parameters(), expected, source):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        moved += int((got != src).sum())
    # With p = 0 nothing is restored: every element with a gradient keeps its Adam step (only the
    # conv bias in front of a BN has an exactly zero gradient).
    assert moved / sum(s.numel() for s in source) > 0.95


def test_stochastic_restore_is_elementwise_bernoulli() -> None:
    method = make(restore_prob=0.3, aug_threshold=0.0)
    source = params_of(method.model)
    with torch.no_grad():
        method.step(batch())
    restored = sum(int((p == s).sum()) for p, s in zip(method.model.parameters(), source))
    total = sum(p.numel() for p in source)
    assert 0.24 < restored / total < 0.36, restored / total


# -- reset and the ImageNet quirk -------------------------------------------------------------------------


def test_clip_normalized_inputs_augments_the_normalised_tensor() -> None:
    net = InputNormalization(tiny_net(), IMAGENET_MEAN, IMAGENET_STD)
    method = make("imagenet_c", net, aug_threshold=1.01, num_augmentations=2)
    assert method.normalization is not None
    mean, std = method.normalization
    x = batch(seed=4)
    out = cotta_augment_batch(x, torch.Generator().manual_seed(0), method.normalization, shared=True)
    seen_by_net = (out - mean) / std
    reference = cotta_augment_shared((x - mean) / std, torch.Generator().manual_seed(0))
    torch.testing.assert_close(seen_by_net, reference, rtol=0, atol=1e-5)
    assert seen_by_net.min() >= -1e-5 and seen_by_net.max() <= 1 + 1e-5, "the quirk clips normalised values"
    assert ((x - mean) / std).min() < -1.0, "normalised inputs leave [0, 1], so the clipping distorts them"
    with torch.no_grad():
        res = method.step(x)
    assert torch.isfinite(res.probs).all()
    with pytest.raises(ValueError, match="InputNormalization"):
        make("imagenet_c", tiny_net())
    assert make("imagenet_c", tiny_net(), clip_normalized_inputs=False).normalization is None


# -- end to end -------------------------------------------------------------------------------------------------


# -- the augmented views in one forward (issue 42) --------------------------------------------------------------
@pytest.mark.parametrize("view_chunk", [4, 3])  # all four views at once; 3 + 1
def test_views_in_one_forward_equal_the_loop_of_forwards(view_chunk: int) -> None:
    """Each view keeps its own BN statistics in the batched teacher forward, and the views are
    drawn in the loop's order: outputs, student and teacher agree with the loop over steps."""
    from tests.support import tiny_net as resnet

    loop = make(net=resnet(), aug_threshold=1.01, num_augmentations=4, execution=methods.Execution(view_chunk=1))
    batched = make(net=resnet(), aug_threshold=1.01, num_augmentations=4,
                   execution=methods.Execution(view_chunk=view_chunk))
    forwards: list[int] = []
    batched.teacher.register_forward_hook(lambda m, i, o: forwards.append(i[0].shape[0]))
    for seed in range(3):
        x = batch(n=8, seed=seed, size=16)
        a, b = loop.step(x), batched.step(x)
        assert loop.last_augmented and batched.last_augmented
        torch.testing.assert_close(b.probs, a.probs, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(b.ood_score, a.ood_score, rtol=1e-4, atol=1e-5)
    assert forwards == [8 * view_chunk, 8 * (4 - view_chunk)][: 1 + (view_chunk < 4)] * 3
    for got, want in zip(batched.model.parameters(), loop.model.parameters()):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert torch.equal(batched.generator.get_state(), loop.generator.get_state())


def test_view_chunk_is_a_speed_switch_that_records_do_not_see() -> None:
    """Records store the config's repr: the speed switch is an execution option, out of the
    config and so out of it, and no record goes stale."""
    from stamplib.blocks.bn import views_per_forward

    chunked = make(execution=methods.Execution(view_chunk=8))
    assert chunked.config == make().config and "view_chunk" not in repr(chunked.config)
    assert "view_chunk" not in {f.name for f in dataclasses.fields(chunked.config)}
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert views_per_forward(0, 32, cpu, 64 * 32 * 32) == 1  # a CPU keeps one view per forward
    assert views_per_forward(0, 32, cpu, 16 * 32 * 32) == 1
    assert views_per_forward(0, 32, cpu, 4 * 32 * 32) == 8  # ... unless the batch is small
    assert views_per_forward(0, 32, cpu, 1 * 32 * 32) == 32 and views_per_forward(0, 32, cpu, 0) == 1
    assert views_per_forward(0, 32, gpu, 64 * 32 * 32) == 32  # CIFAR: all 32 in one forward
    assert views_per_forward(0, 32, gpu, 64 * 224 * 224) == 16  # ImageNet: STAMP's 16 views' pixels
    assert views_per_forward(5, 32, cpu, 0) == 5 and views_per_forward(64, 32, gpu, 0) == 32
