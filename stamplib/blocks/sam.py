"""Sharpness-aware minimisation (Foret et al.) as a wrapper around a base optimiser.

Used by STAMP (SGD inside, stamp.md §4.4), SAR (SGD with momentum) and SoTTA (Adam, ρ = 0.5).
Usage per step: loss(θ).backward(); sam.first_step(); loss(θ + ε).backward(); sam.second_step().

Optimiser state across resets (baselines.md §0 "SAM optimiser state"): the authors' SAM saves
and restores only its own state (the remembered θ) and the shared parameter groups; the base
optimiser's state — SGD momentum buffers, Adam moments and step counts — lives elsewhere and
survives every "restore the optimiser" of SAR and SoTTA. That is the default here.
``reset_base_optimizer_state=True`` (the corrected behaviour) makes ``state_dict`` /
``load_state_dict`` carry the base optimiser's state too, so a restore clears it. Methods expose
the switch through :class:`SAMStateSwitch`, one config field shared by every SAM-based method
whose base optimiser has state (STAMP's plain SGD has none, so it has no such field).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class SAMStateSwitch:
    """Config mixin of the SAM-based methods (SAR, SoTTA): whether restoring the optimiser on a
    reset also clears the base optimiser's state. False = the authors' code (§0)."""

    reset_base_optimizer_state: bool = field(default=False, kw_only=True)


class SAM(torch.optim.Optimizer):
    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        base_optimizer: Callable[..., torch.optim.Optimizer],
        rho: float = 0.05,
        adaptive: bool = False,
        reset_base_optimizer_state: bool = False,
        **base_kwargs,
    ) -> None:
        assert rho >= 0.0, f"SAM radius rho must be non-negative, got {rho}"
        super().__init__(params, dict(rho=rho, adaptive=adaptive, **base_kwargs))
        self.reset_base_optimizer_state = reset_base_optimizer_state
        self.base_optimizer = base_optimizer(self.param_groups, **base_kwargs)
        # Share the groups so a scheduler that edits ``lr`` reaches the base optimiser.
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad: bool = True) -> None:
        """Move to θ + ρ·g/‖g‖ (the local worst case) and remember θ."""
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.detach().clone()
                weight = torch.pow(p, 2) if group["adaptive"] else 1.0
                p.add_(weight * p.grad * scale.to(p))
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad: bool = True) -> None:
        """Return to θ and take the base optimiser's step with the gradient from θ + ε."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None or "old_p" not in self.state[p]:
                    continue
                p.copy_(self.state[p]["old_p"])
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()

    def step(self, closure=None):  # noqa: D102 - SAM needs two explicit passes
        raise RuntimeError("SAM needs two passes: call first_step() and second_step().")

    def _grad_norm(self) -> torch.Tensor:
        norms = [
            ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2)
            for group in self.param_groups
            for p in group["params"]
            if p.grad is not None
        ]
        if not norms:
            return torch.tensor(0.0)
        return torch.stack(norms).norm(p=2)

    def state_dict(self) -> dict[str, Any]:
        """SAM's own state and the parameter groups; the base optimiser's state is included for
        inspection, but ``load_state_dict`` restores it only with ``reset_base_optimizer_state``."""
        return {"sam": super().state_dict(), "base": self.base_optimizer.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict["sam"])
        # Loading replaces the group dicts: share the new ones with the base optimiser again.
        self.base_optimizer.param_groups = self.param_groups
        if self.reset_base_optimizer_state:
            self.base_optimizer.load_state_dict(state_dict["base"])
            self.param_groups = self.base_optimizer.param_groups
