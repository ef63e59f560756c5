"""A template for your own test-time adaptation method, usable everywhere a method name is.

Copy this file into a package of yours (say ``my_tta/confident_tent.py``), change what it does,
and name it by its import path::

    PYTHONPATH=. python -m stamplib run --method my_tta.confident_tent:ConfidentTent --profile smoke
    PYTHONPATH=. python -m stamplib check-method my_tta.confident_tent:ConfidentTent   # the contract
    PYTHONPATH=. python -m stamplib notebooks --only 02 --param methods=stamp,my_tta.confident_tent:ConfidentTent

An installed package can give it a short name instead, through an entry point in its
``pyproject.toml``::

    [project.entry-points."stamplib.methods"]
    confident_tent = "my_tta.confident_tent:ConfidentTent"

It registers no name of its own, so it is not a file of ``stamplib/methods/`` as it is: copied
there, ``check-method`` says to put ``@register("name")`` above its class (the package's own
methods are such files; docs/architecture.md, "Adding a method"). The README's words for this
template are followed on a scratch copy of the package by ``tests/recipes/test_method_template.py``.

What a method must do (``stamplib.methods.base.TTAMethod``): hold its hyperparameters in a
frozen config, one ``fallback_config`` for every hyperparameter set (as here) or one per
hyperparameter set in ``configs`` (the paper's five, each falling back to
``fallback_config`` when missing; a hyperparameter set with neither is refused when the method is
created), build its optimiser
and BN configuration in ``setup()`` (``self.adapt_bn_affine`` makes Tent's), and in
``step(x)`` adapt on the batch and return the class probabilities [B, C] and an OOD score
[B], higher meaning more likely an outlier. The base class copies the caller's model, and
``reset()`` restores everything ``setup`` built, bit for bit, before every corruption.
Randomness must come from ``self.generator``. ``check-method`` checks all of this
(:mod:`stamplib.methods.contract`).

This example is Tent restricted to confident samples: entropy minimisation on the samples
whose entropy is below ``margin · log C``, BN affine parameters only, with the entropy of the
pre-update prediction as the OOD score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from stamplib.blocks.entropy import logit_entropy
from stamplib.methods.base import TTAMethod, TTAOutput


@dataclass(frozen=True)
class ConfidentTentConfig:
    lr: float = 1e-3
    margin: float = 0.4  # adapt on samples with entropy < margin · log(C)


class ConfidentTent(TTAMethod):
    config_cls = ConfidentTentConfig
    fallback_config = ConfidentTentConfig()  # every hyperparameter set; add configs = {"imagenet_c": ...} to tune one

    def setup(self) -> None:
        params = self.adapt_bn_affine(exclude_last_stage=False)
        self.optimizer = torch.optim.Adam(params, lr=self.config.lr)

    def step(self, x: torch.Tensor) -> TTAOutput:
        with torch.enable_grad():
            logits = self.model(x)
            entropy = logit_entropy(logits)
            confident = entropy < self.config.margin * math.log(self.num_classes)
            if confident.any():
                entropy[confident].mean().backward()
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
        logits = logits.detach()
        return TTAOutput(torch.softmax(logits, dim=1), entropy.detach())
