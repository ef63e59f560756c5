"""SAR (Niu et al., ICLR 2023) as run in the STAMP evaluation (baselines.md §6, §0.1, §0.2).

Reliable (H < E₀ = 0.4·ln C) entropy minimisation with sharpness-aware minimisation (SAM,
ρ = 0.05, over SGD with momentum 0.9) on the BN affine parameters outside the last stage, BN
on batch statistics. After the perturbed forward, the samples of the first filter whose
perturbed entropy is still below E₀ give loss₂; an EMA of loss₂ (0.9/0.1) below e₀ means the
model has collapsed onto trivial solutions, and model + optimiser go back to the source state.
Prediction and score come from the first (unperturbed) forward, before the update.

Empty selections are not special-cased, as in the authors' code: the mean over an empty set
is NaN but back-propagates zero gradients, so SGD's momentum still moves the parameters.

Authors' behaviour kept by default, each with a switch for the corrected one:

* The collapse reset does *not* clear the EMA (§6 step 5, "Correction"): the authors' ``reset()``
  sets it to None and the next line puts the low value back, so the model is reset after every
  batch until 0.9·ema + 0.1·loss₂ rises above e₀. ``clear_ema_on_reset=True`` clears it. The
  per-corruption ``reset()`` always clears it, as the authors' does.
* Restoring the optimiser (collapse reset and per-corruption reset) keeps SGD's momentum
  buffers (§0 "SAM optimiser state"); ``reset_base_optimizer_state=True`` clears them.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch

from stamplib.blocks.entropy import logit_entropy
from stamplib.blocks.sam import SAM, SAMStateSwitch
from stamplib.methods.base import SAMBaseline, TTAOutput, index_mask, register


@dataclass(frozen=True)
class SARConfig(SAMStateSwitch):
    lr: float
    reset_constant: float  # e₀: model reset when the EMA of loss₂ drops below it
    e_margin_coef: float = 0.4  # E₀ = coef·ln C
    rho: float = 0.05
    momentum: float = 0.9
    ema_momentum: float = 0.9  # ema ← 0.9·ema + 0.1·loss₂
    #: False (authors' code, §6 step 5): the EMA survives the collapse reset; True: cleared.
    clear_ema_on_reset: bool = False

    def __post_init__(self) -> None:
        assert self.lr > 0 and self.reset_constant >= 0 and self.rho >= 0


@register("sar")
class SAR(SAMBaseline):
    config_cls = SARConfig
    configs = {
        "cifar10_c": SARConfig(lr=5e-3, reset_constant=0.3),
        "cifar100_c": SARConfig(lr=5e-3, reset_constant=0.2),
        "imagenet_c": SARConfig(lr=5e-4, reset_constant=0.1),
        "cifar10_c_8_2": SARConfig(lr=5e-3, reset_constant=0.1),
        "cifar100_c_80_20": SARConfig(lr=5e-3, reset_constant=0.1),
    }

    def setup(self) -> None:
        params = self.adapt_bn_affine(exclude_last_stage=True)
        self.optimizer = self.sam(params, torch.optim.SGD, momentum=self.config.momentum, dampening=0.0,
                                  # one operator per list: a GPU's default, the same numbers on a CPU
                                  weight_decay=0.0, foreach=True)
        self.e_margin = self.config.e_margin_coef * math.log(self.num_classes)

    def reset_buffers(self) -> None:
        self.ema: float | None = None
        self.num_model_resets = 0

    def _reset_model(self) -> None:
        """SAR's own collapse reset: model and optimiser back to the source state (the EMA only
        with ``clear_ema_on_reset``; the method's counters and generators are not part of it)."""
        self.model.load_state_dict(self._initial["model"])
        self.optimizer.load_state_dict(copy.deepcopy(self._initial["optimizer"]))
        if self.config.clear_ema_on_reset:
            self.ema = None
        self.num_model_resets += 1

    def select(self, entropy: torch.Tensor) -> torch.Tensor:
        """Indices of the samples with entropy below E₀ (used for both filters)."""
        return torch.where(entropy.detach() < self.e_margin)[0]

    def step(self, x: torch.Tensor) -> TTAOutput:
        sam: SAM = self.optimizer
        sam.zero_grad(set_to_none=True)
        with torch.enable_grad():
            logits = self.model(x)
            entropy = logit_entropy(logits)
            reliable = self.select(entropy)
            entropy[reliable].mean().backward()
            sam.first_step(zero_grad=True)

            entropy2 = logit_entropy(self.model(x))[reliable]
            keep = self.select(entropy2)
            loss2 = entropy2[keep].mean()
            value = float(loss2.detach())
            if not math.isnan(value):
                k = self.config.ema_momentum
                self.ema = value if self.ema is None else k * self.ema + (1.0 - k) * value
            loss2.backward()
            sam.second_step(zero_grad=True)
        self.report(passed=index_mask(reliable, x.shape[0]), loss=loss2, step_size=self.config.lr)
        if self.ema is not None and self.ema < self.config.reset_constant:
            self._reset_model()
        logits = logits.detach()
        return TTAOutput(torch.softmax(logits, dim=1), entropy.detach())
