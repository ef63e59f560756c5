"""Sharpness-aware minimisation (Foret et al.) as a wrapper around a base optimiser.

Used by STAMP (SGD inside, stamp.md §4.4), SAR (SGD with momentum) and SoTTA (Adam, ρ = 0.5).
Usage per step: loss(θ).backward(); sam.first_step(); loss(θ + ε).backward(); sam.second_step().
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


class SAM(torch.optim.Optimizer):
    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        base_optimizer: Callable[..., torch.optim.Optimizer],
        rho: float = 0.05,
        adaptive: bool = False,
        **base_kwargs,
    ) -> None:
        assert rho >= 0.0, f"SAM radius rho must be non-negative, got {rho}"
        super().__init__(params, dict(rho=rho, adaptive=adaptive, **base_kwargs))
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

    def state_dict(self):
        return self.base_optimizer.state_dict()

    def load_state_dict(self, state_dict) -> None:
        self.base_optimizer.load_state_dict(state_dict)
        self.param_groups = self.base_optimizer.param_groups
