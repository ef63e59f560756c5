"""Mean-teacher helpers: a detached teacher copy and its exponential-moving-average update.

CoTTA (baselines.md §4 step 7) and RoTTA (§7 ``update_model``) keep a teacher whose
*parameters* follow the student as teacher ← m·teacher + (1 − m)·student after every
optimisation step. Buffers (BN running statistics) are not averaged: in the authors' code the
teacher's buffers evolve only through its own forwards.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


def make_teacher(student: nn.Module) -> nn.Module:
    """A deep copy of ``student`` whose parameters never receive gradients.

    The authors call ``param.detach_()`` on every parameter of the copy; ``requires_grad=False``
    is the same thing for a leaf parameter. Training/eval mode is copied along.
    """
    teacher = copy.deepcopy(student)
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


@torch.no_grad()
def ema_update(teacher: nn.Module, student: nn.Module, momentum: float) -> None:
    """teacher ← momentum·teacher + (1 − momentum)·student, in place, over *all* parameters.

    All parameters are averaged, the frozen ones included, as in the authors' code (zip over
    ``parameters()``); for tensors the student never changes this is the identity up to float
    rounding. Buffers are left alone.
    """
    assert 0.0 <= momentum <= 1.0, f"EMA momentum must be in [0, 1], got {momentum}"
    t_params = list(teacher.parameters())
    s_params = list(student.parameters())
    assert len(t_params) == len(s_params), "teacher and student must have the same parameters"
    for t, s in zip(t_params, s_params):
        assert t.shape == s.shape, f"teacher/student shape mismatch {tuple(t.shape)} vs {tuple(s.shape)}"
    # One operator per list rather than four per tensor (a GPU's default, the same numbers on a CPU); each is the
    # elementwise
    # operation of momentum·t + (1 − momentum)·s, in that order, so the numbers are the same.
    averaged = torch._foreach_mul(t_params, momentum)
    torch._foreach_add_(averaged, torch._foreach_mul(s_params, 1.0 - momentum))
    torch._foreach_copy_(t_params, averaged)
