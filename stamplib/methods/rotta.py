"""RoTTA (Yuan et al., CVPR 2023) as run in the official STAMP evaluation (baselines.md §7).

Every BatchNorm2d becomes a :class:`~stamplib.blocks.robust_bn.RobustBN2d` (momentum 0.05)
whose affine parameters are the only trainable tensors (Adam, LR 5e-3 in every hyperparameter set).
A teacher (deep copy, detached parameters, own robust-BN buffers) labels the stream:

1. student and teacher in eval mode; t = teacher(x); p = softmax(t); pseudo-label argmax p,
   uncertainty u = −Σ p·log(p + 1e-6);
2. each sample in batch order goes into the CSTU memory; a global sample counter grows by
   one per sample and every ``update_every``-th sample triggers ``_update_model`` (possibly
   mid-batch: the batch goes to the memory in pieces that end at the updates);
3. return t: prediction softmax(t), OOD score H(softmax(t)) (§0.2, computed before the
   batch's updates).

``_update_model``: student and teacher in train mode; D = the memory, strong = CoTTA
augmentation of D (one shared parameter draw); loss = mean_i w_i·CE(softmax(teacher(D)_i),
student(strong)_i) with w = σ(−age/N); Adam step; teacher ← (1 − ν)·teacher + ν·student over
parameters only (the teacher's robust-BN statistics move with its own train-mode forwards).

Quirks of the official code, reproduced by default, each behind a switch:

* ``reset_counter=False``: ``reset()`` does not reset the global sample counter, so after the
  first corruption updates fall mid-batch (§7 "Reset"). ``True`` restarts it at zero.
* ``clip_normalized_inputs`` (on for ImageNet-C): the CoTTA augmentation runs on the
  mean/std-normalised tensor with its [0, 1] clipping (§7, §10); see :mod:`stamplib.methods.cotta`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from stamplib.blocks.cstu import CSTUMemory
from stamplib.blocks.ema import ema_update, make_teacher
from stamplib.blocks.entropy import logit_entropy, prob_entropy, soft_cross_entropy
from stamplib.blocks.normalization import input_normalization
from stamplib.blocks.robust_bn import use_robust_bn
from stamplib.blocks.views import cotta_augment_batch
from stamplib.methods.base import TTAMethod, TTAOutput, register

#: RoTTA's epsilon in the uncertainty −Σ p·log(p + ε) of its memory score.
UNCERTAINTY_EPS = 1e-6


@dataclass(frozen=True)
class RottaConfig:
    lr: float = 5e-3
    capacity: int = 64  # CSTU memory size N
    update_every: int = 64  # samples between two updates
    lambda_t: float = 1.0  # timeliness weight of the CSTU score
    lambda_u: float = 1.0  # uncertainty weight of the CSTU score
    nu: float = 0.001  # teacher EMA rate: teacher ← (1 − ν)·teacher + ν·student
    bn_momentum: float = 0.05  # robust-BN statistics momentum
    clip_normalized_inputs: bool = False  # ImageNet quirk: augment the normalised tensor
    reset_counter: bool = False  # quirk: the official reset() keeps the global sample counter

    def __post_init__(self) -> None:
        assert self.lr > 0 and self.capacity >= 1 and self.update_every >= 1
        assert 0.0 <= self.nu <= 1.0 and 0.0 <= self.bn_momentum <= 1.0


@register("rotta")
class Rotta(TTAMethod):
    reports_trace = True
    config_cls = RottaConfig
    exact_reset = {"reset_counter": True}
    configs = {
        "cifar10_c": RottaConfig(),
        "cifar100_c": RottaConfig(),
        "imagenet_c": RottaConfig(clip_normalized_inputs=True),
        "cifar10_c_8_2": RottaConfig(),
        "cifar100_c_80_20": RottaConfig(),
    }

    def setup(self) -> None:
        cfg = self.config
        self.model.requires_grad_(False)
        params = use_robust_bn(self.model, cfg.bn_momentum)
        assert params, "RoTTA needs BatchNorm2d layers to adapt"
        # foreach: one operator per parameter list, not per tensor; a GPU's default already, and the
        # same numbers as the per-tensor loop on a CPU.
        self.optimizer = torch.optim.Adam(params, lr=cfg.lr, betas=(0.9, 0.999), weight_decay=0.0, foreach=True)
        self.memory = CSTUMemory(self.num_classes, cfg.capacity, cfg.lambda_t, cfg.lambda_u)
        self.normalization = input_normalization(self.model) if cfg.clip_normalized_inputs else None
        self.samples_seen = 0  # global counter; survives reset() unless reset_counter

    def reset_buffers(self) -> None:
        self.memory.clear()
        self.teacher = make_teacher(self.model)
        self.updates = 0  # adaptation steps since the last reset (diagnostic)
        if self.config.reset_counter:
            self.samples_seen = 0

    def step(self, x: torch.Tensor) -> TTAOutput:
        self.model.eval()
        self.teacher.eval()
        with torch.no_grad():
            teacher_logits = self.teacher(x)
            probs = teacher_logits.softmax(dim=1)
            uncertainty = prob_entropy(probs, UNCERTAINTY_EPS)
            # The step's one device-to-host copy: the memory's insertions branch on every label
            # and uncertainty (float32 holds the labels exactly).
            labels, uncertainty = torch.stack([probs.argmax(dim=1).to(uncertainty.dtype), uncertainty]).tolist()
        labels = [int(label) for label in labels]
        stored, loss = [], None
        tags = self.sample_tags(x.shape[0]).tolist()
        start, every = 0, self.config.update_every
        while start < x.shape[0]:  # the batch in pieces that end where an update falls
            end = min(x.shape[0], start + every - self.samples_seen % every)
            stored += self.memory.add(x[start:end], labels[start:end], uncertainty[start:end], tags[start:end])
            self.samples_seen += end - start
            if self.samples_seen % every == 0:
                loss = self._update_model()
            start = end
        self.report(passed=torch.tensor(stored, dtype=torch.bool), loss=loss, memory_tags=self.memory.tags(),
                    memory_labels=self.memory.labels(), step_size=self.config.lr)
        return TTAOutput(probs, logit_entropy(teacher_logits))

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> TTAOutput:
        """The teacher's prediction in eval mode, as ``step`` returns it (its robust BN
        statistics move only in train mode, so nothing changes)."""
        self.teacher.eval()
        logits = self.teacher(x)
        return TTAOutput(logits.softmax(dim=1), logit_entropy(logits))

    def _update_model(self) -> torch.Tensor | None:
        """One Adam step on the whole memory, then the teacher EMA (§7 ``update_model``);
        returns the loss (None with an empty memory)."""
        loss = None
        self.model.train()
        self.teacher.train()
        if len(self.memory) > 0:
            data, ages = self.memory.get_memory()
            strong = cotta_augment_batch(data, self.generator, self.normalization, shared=True)
            with torch.no_grad():
                teacher_logits = self.teacher(data)  # train mode: moves the teacher's BN statistics
            with torch.enable_grad():
                student_logits = self.model(strong)
                weights = torch.exp(-ages) / (1.0 + torch.exp(-ages))
                loss = (soft_cross_entropy(student_logits, teacher_logits) * weights).mean()
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
            self.updates += 1
        ema_update(self.teacher, self.model, 1.0 - self.config.nu)
        return None if loss is None else loss.detach()
