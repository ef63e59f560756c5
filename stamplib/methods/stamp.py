"""STAMP: outlier-aware test-time adaptation with stable memory replay (Yu et al., ECCV 2024).

Per batch (stamp.md §4, §8):

1. K views (view 0 clean, K−1 augmented, §3); p̂ = mean of the K softmax outputs, each view
   normalised with its own BN statistics (§9 row 16).
2. Reliability filters: entropy H(p̂) < α·ln C (with the 1e-5 epsilon, §4.1.7–8) and, outside
   ImageNet, consistency between the current model's clean-view label and a frozen copy of the
   source weights in batch-statistics mode (§9 rows 1–2).
3. Reliable samples (clean view, clean-view label, §9 row 3) enter the class-balanced memory.
4. Prediction argmax p̂ and OOD score H(p̂) are emitted *before* adapting.
5. One adaptation step on the whole memory: self-weighted entropy whose weights keep their
   gradient (§4.4), SAM over plain SGD, cosine step size that is periodic (§4.5).

Defaults reproduce the authors' code; ``variant="paper"`` switches every row of §9 where the
paper says otherwise, and the ablation switches (memory, weighting, sam, lr_decay, num_views,
consistency_filter) serve Table 5 and Figs. 3–4. How the views are computed (batched, chunked,
channels-last, bfloat16) is no hyperparameter: :class:`~stamplib.methods.base.Execution` says.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import torch

from stamplib.blocks.bn import view_groups, views_per_forward
from stamplib.blocks.entropy import logit_entropy, prob_entropy
from stamplib.blocks.memory import ClassBalancedMemory
from stamplib.blocks.normalization import IMAGENET_MEAN
from stamplib.blocks.sam import SAM
from stamplib.blocks.views import ViewKind, make_views
from stamplib.methods.base import RECORD_EXECUTION, Execution, TTAMethod, TTAOutput, register

Weighting = Literal["adaptive", "static", "eata", "none"]


@dataclass(frozen=True)
class StampConfig:
    lr: float  # η₀ (stamp.md §7, run-script values)
    alpha: float  # entropy threshold coefficient: H_thr = α·ln C
    period: int = 150  # T of the cosine step size: 150 CIFAR, 750 ImageNet (§2.5)
    capacity: int = 64  # memory size, also the loss scale constant (§4.4.5)
    beta: float = 0.1  # class-frequency EMA rate (Eq. 5)
    rho: float = 0.05  # SAM radius
    num_views: int = 16  # K, the clean view included; 1 = no augmentation averaging
    view_kind: ViewKind = "cotta"  # CoTTA views for CIFAR10-C, crop+flip elsewhere (§3)
    crop_fill: tuple[float, ...] = (0.0,)  # padding colour of crop views ([0,1] space)
    consistency_filter: bool = True  # off on ImageNet (§4.2)
    # ablation switches (Table 5, Fig. 3)
    memory: bool = True  # off: optimise on the current batch's clean view
    weighting: Weighting = "adaptive"  # adaptive (with gradient) / static / eata / none
    sam: bool = True
    lr_decay: bool = True
    # paper-vs-code switches (stamp.md §9); defaults = the authors' code
    variant: Literal["code", "paper"] = "code"  # "paper" sets every switch below to the paper
    consistency_reference: Literal["bn_stats", "source_eval"] = "bn_stats"  # row 1
    compare_label: Literal["clean", "averaged"] = "clean"  # row 2
    stored_label: Literal["clean", "averaged"] = "clean"  # row 3
    loss_scale: Literal["capacity", "sum"] = "capacity"  # row 5
    score_eps: float = 1e-5  # row 6 (paper: exact entropy)
    schedule: Literal["periodic", "clamped"] = "periodic"  # row 7
    xi_update: Literal["before_step", "after_step"] = "before_step"  # row 8

    def __post_init__(self) -> None:
        assert self.lr > 0 and self.alpha > 0, "lr and alpha must be positive"
        assert self.num_views >= 1 and self.capacity >= 1 and self.period >= 1, (
            "num_views, capacity and period must be at least 1")
        assert self.weighting in ("adaptive", "static", "eata", "none"), self.weighting
        if self.variant == "paper":  # the config says what runs: every row of §9 as the paper has it
            for name, value in PAPER_SWITCHES.items():
                object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        """The dataclass's repr, then the execution options at the values every record runs under
        (``Execution()``): records written while those options sat in this config name them
        there, and a record stays current only while this text is what it stores."""
        fields = (f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr)
        recorded = (f"{name}={getattr(RECORD_EXECUTION, name)!r}" for name in Execution.names())
        return f"{type(self).__qualname__}({', '.join([*fields, *recorded])})"


#: The switches ``variant="paper"`` sets (stamp.md §9 rows 1–8, where the paper and the code differ).
PAPER_SWITCHES = {
    "consistency_reference": "source_eval",
    "compare_label": "averaged",
    "stored_label": "averaged",
    "loss_scale": "sum",
    "score_eps": 0.0,
    "schedule": "clamped",
    "xi_update": "after_step",
}



def cosine_step_size(lr0: float, step: int, period: int, periodic: bool = True) -> float:
    """η at the (step+1)-th adaptation step: η₀·½(1 + cos(π·n/T)) (stamp.md §4.5).

    ``periodic`` reproduces PyTorch's CosineAnnealingLR, which rises again after T;
    otherwise n is clamped at T (the paper's reading of a decay).
    """
    n = step if periodic else min(step, period)
    return lr0 * 0.5 * (1.0 + math.cos(math.pi * n / period))


@register("stamp")
class Stamp(TTAMethod):
    reports_trace = True
    accepts_oracle = True
    config_cls = StampConfig
    configs = {
        "cifar10_c": StampConfig(lr=0.1, alpha=0.25),
        "cifar100_c": StampConfig(lr=0.05, alpha=0.9, view_kind="crop_flip"),
        "imagenet_c": StampConfig(
            lr=0.01, alpha=0.8, period=750, view_kind="crop_flip", crop_fill=IMAGENET_MEAN,
            consistency_filter=False,
        ),
        "cifar10_c_8_2": StampConfig(lr=0.1, alpha=0.25, view_kind="crop_flip"),
        "cifar100_c_80_20": StampConfig(lr=0.1, alpha=0.6, view_kind="crop_flip"),
    }

    def setup(self) -> None:
        cfg = self.config
        if cfg.consistency_reference == "source_eval":
            self.reference = copy.deepcopy(self.model).eval()
        params = self.adapt_bn_affine(exclude_last_stage=True)
        if cfg.consistency_reference == "bn_stats":
            self.reference = copy.deepcopy(self.model)
        self.reference.requires_grad_(False)
        self.memory_format = torch.channels_last if self.execution.channels_last else torch.contiguous_format
        if self.execution.channels_last:
            # Module.to keeps the Parameter objects (only their data moves): ``params`` holds.
            self.model.to(memory_format=self.memory_format)
            self.reference.to(memory_format=self.memory_format)
        self.autocast = self.execution.bf16_autocast and self.device.type == "cuda"  # never on CPU
        if cfg.sam:
            # one operator per list: a GPU's default, the same numbers on a CPU
            self.optimizer = SAM(params, torch.optim.SGD, rho=cfg.rho, lr=cfg.lr, foreach=True)
        else:
            self.optimizer = torch.optim.SGD(params, lr=cfg.lr, foreach=True)
        self.threshold = cfg.alpha * math.log(self.num_classes)
        self.memory = ClassBalancedMemory(
            self.num_classes, cfg.capacity, cfg.beta, generator=self.cpu_generator
        )

    def reset_buffers(self) -> None:
        self.memory.clear()
        self.adaptation_steps = 0
        self._set_lr(self.config.lr)

    # -- per batch --------------------------------------------------------------------------------
    def step(self, x: torch.Tensor) -> TTAOutput:
        fill = torch.tensor(self.config.crop_fill, device=x.device, dtype=x.dtype)
        views = make_views(x, self.config.num_views, self.config.view_kind, self.generator, fill=fill)
        return self.step_on_views(views)

    def step_on_views(self, views: torch.Tensor) -> TTAOutput:
        """One STAMP step on given views [K, B, 3, H, W] (view 0 = the clean batch)."""
        cfg = self.config
        k, b = views.shape[:2]
        clean = views[0]
        revealed = self.take_revealed()  # the oracle diagnostic only: these never enter memory or loss
        tags = self.sample_tags(b)
        with torch.no_grad():
            logits = self._view_logits(views)  # [K, B, C]
            probs = torch.softmax(logits, dim=2).mean(dim=0)
            entropy = prob_entropy(probs, cfg.score_eps)
            clean_label = logits[0].argmax(dim=1)
            averaged_label = probs.argmax(dim=1)
            reliable = entropy < self.threshold
            if cfg.consistency_filter:
                reference_label = self._forward(self.reference, clean).argmax(dim=1)
                own = clean_label if cfg.compare_label == "clean" else averaged_label
                reliable &= own == reference_label
            if revealed is not None:
                reliable &= ~revealed.to(reliable.device)
            stored = clean_label if cfg.stored_label == "clean" else averaged_label
            if cfg.memory:
                self.memory.add(clean[reliable], stored[reliable].cpu(), tags[reliable.cpu()])
        output = TTAOutput(probs, entropy)
        step_size = self.optimizer.param_groups[0]["lr"]  # before _adapt moves it on the schedule
        loss, adapted = None, None
        if cfg.memory:
            if len(self.memory) > 0:
                adapted = self.memory.tags()
                loss = self._adapt(self.memory.samples(), scale=cfg.capacity)
        else:
            keep = ~revealed.to(clean.device) if revealed is not None else slice(None)
            adapted = tags[keep.cpu()] if revealed is not None else tags
            loss = self._adapt(clean[keep], scale=b)
        self.report(passed=reliable, loss=loss, memory_tags=self.memory.tags(), memory_labels=self.memory.labels(),
                    step_size=step_size, adapted_tags=adapted)
        return output

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> TTAOutput:
        """The clean view alone (a busy method has no time for K views), scored with the
        entropy ``step`` uses."""
        probs = torch.softmax(self._forward(self.model, x), dim=1)
        return TTAOutput(probs, prob_entropy(probs, self.config.score_eps))

    def views_per_forward(self, num_views: int, device: torch.device, pixels_per_view: int) -> int:
        """Views per forward: the execution's ``view_chunk``, or (0 = auto) :func:`blocks.bn.views_per_forward`'s
        choice for views of ``pixels_per_view`` pixels (batch size × height × width).

        Every view keeps its own BN statistics (stamp.md §4.1 step 5, §9 row 16) whatever the
        chunk, so this is a speed choice only. On one CPU thread, one view of a batch of 64 per
        forward was the fastest (benchmarks/stamp_throughput.py --chunks 1,2,4,16: 2 or 4 views
        per forward cost 1.2–1.6x more, all 16 views 2–3x more; the activations leave the
        cache), while views of a few images are grouped; on a GPU the single big launch keeps
        the device busy.
        """
        if not self.execution.batched_views:
            return 1
        return views_per_forward(self.execution.view_chunk, num_views, device, pixels_per_view)

    def _view_logits(self, views: torch.Tensor) -> torch.Tensor:
        """Logits [K, B, C] of the K views, each view normalised with its own BN statistics."""
        k, b, _, h, w = views.shape
        chunk = self.views_per_forward(k, views.device, b * h * w)
        if chunk == 1:
            return torch.stack([self._forward(self.model, v) for v in views])
        parts = []
        for start in range(0, k, chunk):
            part = views[start : start + chunk]
            with view_groups(self.model, part.shape[0]):
                logits = self._forward(self.model, part.reshape(-1, *views.shape[2:]))
            parts.append(logits.view(part.shape[0], b, -1))
        return torch.cat(parts)

    def _forward(self, model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        """Logits of ``model`` on ``x`` in the execution's memory format, in ``x``'s precision
        (bf16 autocast computes in bfloat16 and hands back float32 for float32 inputs)."""
        x = x.contiguous(memory_format=self.memory_format)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.autocast):
            return model(x).to(x.dtype)

    # -- adaptation ---------------------------------------------------------------------------------
    def loss(self, logits: torch.Tensor, scale: int) -> torch.Tensor:
        """Self-weighted entropy (stamp.md §4.4.3–5): mean_i H_i·scale·ŵ_i, ŵ = softmax(−H).

        With ``weighting='adaptive'`` the weights keep their gradient (the paper's point);
        'static' detaches them; 'eata' uses exp(H_thr − H) detached; 'none' is plain mean entropy.
        """
        entropy = logit_entropy(logits)
        weighting = self.config.weighting
        if weighting == "none":
            return entropy.mean()
        if weighting == "eata":
            return (entropy * torch.exp(self.threshold - entropy.detach())).mean()
        weights = torch.softmax(-entropy, dim=0)
        if weighting == "static":
            weights = weights.detach()
        if self.config.loss_scale == "sum":
            return (entropy * weights).sum()
        return (entropy * scale * weights).mean()

    def _adapt(self, data: torch.Tensor, scale: int) -> torch.Tensor:
        """One (SAM) update on ``data``; returns the loss before it (detached)."""
        cfg = self.config
        if cfg.memory and cfg.xi_update == "before_step":
            self.memory.update_frequency()
        with torch.enable_grad():
            loss = self.loss(self._forward(self.model, data), scale)
            loss.backward()
            if cfg.sam:
                self.optimizer.first_step(zero_grad=True)
                self.loss(self._forward(self.model, data), scale).backward()
                self.optimizer.second_step(zero_grad=True)
            else:
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
        if cfg.memory and cfg.xi_update == "after_step":
            self.memory.update_frequency()
        self.adaptation_steps += 1
        if cfg.lr_decay:
            self._set_lr(
                cosine_step_size(cfg.lr, self.adaptation_steps, cfg.period, cfg.schedule == "periodic")
            )
        return loss.detach()

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr
