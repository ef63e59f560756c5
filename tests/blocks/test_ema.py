"""The EMA teacher (stamplib.blocks.ema) of CoTTA and RoTTA."""

from __future__ import annotations

import torch

from stamplib.blocks.ema import ema_update, make_teacher
from tests.support import two_bn_net as tiny_net


def params_of(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def test_make_teacher_is_a_detached_independent_copy() -> None:
    student = tiny_net()
    teacher = make_teacher(student)
    assert all(not p.requires_grad for p in teacher.parameters())
    assert all(p.requires_grad for p in student.parameters())
    with torch.no_grad():
        next(student.parameters()).add_(1.0)
    assert not torch.equal(next(student.parameters()), next(teacher.parameters()))


def test_ema_update_formula_parameters_only() -> None:
    teacher, student = tiny_net(0), tiny_net(1)
    before_t, before_s = params_of(teacher), params_of(student)
    buffers_before = {k: v.clone() for k, v in teacher.named_buffers()}
    ema_update(teacher, student, 0.9)
    for t, t0, s0 in zip(teacher.parameters(), before_t, before_s):
        # A few float32 roundings of the two terms and their sum, however the kernel fuses them.
        rounding = 4 * torch.finfo(torch.float32).eps * (0.9 * t0.abs() + 0.1 * s0.abs())
        assert ((t - (0.9 * t0 + 0.1 * s0)).abs() <= rounding).all()
    for k, v in teacher.named_buffers():
        assert torch.equal(v, buffers_before[k]), f"buffer {k} must not be averaged"
    assert all(torch.equal(s, s0) for s, s0 in zip(student.parameters(), before_s))

