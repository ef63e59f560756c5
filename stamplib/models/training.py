"""Supervised training of source networks on resident uint8 tensors (protocol.md §4.2).

The whole training set stays in memory as uint8 N×H×W×3 (on the training device); every batch
is converted and augmented with batched tensor ops (crop, flip, rotation through
``affine_grid``), never image by image. All randomness comes from one ``torch.Generator`` on
the CPU, so a run is reproducible and can be resumed bit-for-bit from its saved state.
"""

from __future__ import annotations

import dataclasses
import io
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from stamplib import paths


@dataclass(frozen=True)
class TrainRecipe:
    """SGD recipe of a source network (protocol.md §4.2)."""

    epochs: int
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    nesterov: bool = False
    batch_size: int = 128
    crop_padding: int = 4  # RandomCrop(H, padding=p); 0 = no crop
    hflip: bool = True  # RandomHorizontalFlip(0.5)
    rotation_degrees: float = 0.0  # RandomRotation(d): angle ~ U[-d, d], nearest, zero fill
    # "cosine" (per epoch, T_max = epochs, η_min = 0), "multistep" (per epoch) or "onecycle"
    # (per batch: linear warm-up to ``lr`` over ``warmup_fraction`` of the steps, then linear
    # decay to lr/25/1e4, momentum constant)
    schedule: str = "cosine"
    milestones: tuple[int, ...] = ()  # multistep epochs; () = 30/60/80 % of the epochs
    gamma: float = 0.2  # multistep decay factor
    warmup_fraction: float = 0.25  # onecycle only
    # Progressive resizing: the side length each epoch trains at (the augmented batch is
    # resized with antialiasing); () = the images' own size throughout. Evaluation is always
    # at the images' own size.
    resolutions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        assert self.epochs >= 1, "a recipe trains at least one epoch"
        assert self.schedule in ("cosine", "multistep", "onecycle"), f"unknown schedule {self.schedule!r}"
        assert 0.0 < self.warmup_fraction < 1.0, "warmup_fraction lies in (0, 1)"
        assert not self.resolutions or len(self.resolutions) == self.epochs, (
            f"resolutions gives one size per epoch: {len(self.resolutions)} sizes for {self.epochs} epochs"
        )

    def with_epochs(self, epochs: int) -> TrainRecipe:
        """The same recipe over ``epochs`` epochs; multistep milestones and the progressive
        resizing schedule keep their relative position (60/120/160 of 200 → 30/60/80 %),
        milestones never earlier than epoch 1."""
        if epochs == self.epochs:
            return self
        milestones = tuple(max(1, round(m * epochs / self.epochs)) for m in self.milestones)
        resolutions = (tuple(self.resolutions[e * self.epochs // epochs] for e in range(epochs))
                       if self.resolutions else ())
        return dataclasses.replace(self, epochs=epochs, milestones=milestones, resolutions=resolutions)

    @property
    def per_batch_schedule(self) -> bool:
        return self.schedule == "onecycle"


def make_scheduler(
    opt: torch.optim.Optimizer, recipe: TrainRecipe, steps_per_epoch: int = 1,
) -> torch.optim.lr_scheduler.LRScheduler:
    """Learning-rate schedule of ``recipe``: stepped once per epoch, or once per batch for
    ``onecycle`` (which needs ``steps_per_epoch``)."""
    if recipe.schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=recipe.lr, total_steps=recipe.epochs * steps_per_epoch,
            pct_start=recipe.warmup_fraction, anneal_strategy="linear", cycle_momentum=False,
        )
    if recipe.schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=recipe.epochs)
    milestones = list(recipe.milestones) or [int(recipe.epochs * f) for f in (0.3, 0.6, 0.8)]
    return torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=recipe.gamma)


def _augment(x: torch.Tensor, recipe: TrainRecipe, g: torch.Generator) -> torch.Tensor:
    """RandomCrop(padding) → RandomHorizontalFlip → RandomRotation, the authors' order.

    Random parameters are drawn on the CPU generator ``g`` (one draw per image), the pixels
    are moved on ``x``'s device. A recipe without rotation draws exactly what it did before
    rotation existed, so older cached models (the digits one) are reproduced.
    """
    n, _, h, w = x.shape
    dev = x.device
    p = recipe.crop_padding
    if p:
        padded = F.pad(x, (p, p, p, p))
        oy = torch.randint(0, 2 * p + 1, (n,), generator=g).to(dev)
        ox = torch.randint(0, 2 * p + 1, (n,), generator=g).to(dev)
        rows = (oy.view(-1, 1) + torch.arange(h, device=dev)).view(n, h, 1)
        cols = (ox.view(-1, 1) + torch.arange(w, device=dev)).view(n, 1, w)
        batch = torch.arange(n, device=dev).view(n, 1, 1)
        x = padded.permute(0, 2, 3, 1)[batch, rows, cols].permute(0, 3, 1, 2)
    if recipe.hflip:
        flip = (torch.rand(n, generator=g) < 0.5).to(dev).view(-1, 1, 1, 1)
        x = torch.where(flip, x.flip(-1), x)
    if recipe.rotation_degrees:
        # torchvision's RandomRotation: rotation about the image centre, nearest-neighbour
        # sampling, zero fill, same size. With align_corners=False the normalised grid's origin
        # is that centre, so a pure rotation matrix reproduces it (the angle's sign convention
        # is irrelevant: the distribution is symmetric).
        angle = (torch.rand(n, generator=g) * 2 - 1) * math.radians(recipe.rotation_degrees)
        cos, sin, zero = angle.cos(), angle.sin(), torch.zeros(n)
        theta = torch.stack([torch.stack([cos, -sin, zero], 1), torch.stack([sin, cos, zero], 1)], 1)
        grid = F.affine_grid(theta.to(device=dev, dtype=x.dtype), list(x.shape), align_corners=False)
        x = F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False)
    return x


def _resize(x: torch.Tensor, size: int) -> torch.Tensor:
    """Antialiased bilinear resize of a float N×3×H×W batch to size×size (no-op at its size)."""
    if x.shape[-1] == size and x.shape[-2] == size:
        return x
    return F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)


def _compiled(model: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    import torch._dynamo

    # Each resolution of a progressive schedule, with and without the last partial batch, is
    # its own static graph: allow enough of them before dynamo falls back to eager.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 32)
    return torch.compile(model, dynamic=False)


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 N×H×W×3 → float N×3×H×W in [0,1]."""
    return images.permute(0, 3, 1, 2).float().div(255.0)


def _model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def evaluate_accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 512) -> float:
    """Top-1 accuracy in eval mode, fp32, on the model's device."""
    model.eval()
    dev = _model_device(model)
    correct = 0
    for start in range(0, images.shape[0], batch_size):
        logits = model(to_float(images[start : start + batch_size].to(dev)))
        correct += int((logits.argmax(1).cpu() == labels[start : start + batch_size].cpu()).sum())
    return correct / images.shape[0]


@dataclass
class TrainLog:
    """What :func:`fit` did. ``best_state`` is the state_dict of the epoch with the best clean
    test accuracy (None without a test set); ``complete`` is False when ``stop_after`` ended
    the call early (the resume state then holds the rest)."""

    epochs_done: int
    complete: bool
    seconds: float
    final_loss: float
    best_accuracy: float | None = None
    best_epoch: int | None = None
    history: list[dict[str, float]] = field(default_factory=list)
    best_state: dict[str, torch.Tensor] | None = None


def _cpu_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _save_resume_state(path: Path, state: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    paths.atomic_write_bytes(path, buffer.getvalue())


def _scheduler_state(sched: torch.optim.lr_scheduler.LRScheduler) -> dict[str, Any]:
    # MultiStepLR keeps its milestones in a Counter, which weights_only loading refuses;
    # store a plain dict and rebuild the Counter on load.
    state = dict(sched.state_dict())
    if "milestones" in state:
        state["milestones"] = dict(state["milestones"])
    return state


def _load_scheduler_state(sched: torch.optim.lr_scheduler.LRScheduler, state: dict[str, Any]) -> None:
    from collections import Counter

    state = dict(state)
    if "milestones" in state:
        state["milestones"] = Counter(state["milestones"])
    sched.load_state_dict(state)


def fit(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    recipe: TrainRecipe,
    *,
    seed: int = 0,
    test_images: torch.Tensor | None = None,
    test_labels: torch.Tensor | None = None,
    bf16: bool = False,
    compile: bool = False,
    resume_path: Path | None = None,
    fingerprint: str = "",
    stop_after: int | None = None,
    on_epoch_end: Callable[[dict[str, float]], None] | None = None,
    progress: bool = True,
    desc: str = "training",
) -> TrainLog:
    """Train ``model`` in place with SGD + cross-entropy on the device it lives on.

    * ``test_images``/``test_labels``: evaluated (fp32) after every epoch; the best epoch's
      weights are kept in ``TrainLog.best_state`` (protocol.md §4.2: best clean *test* accuracy).
    * ``bf16``: forward/backward under ``torch.autocast(device, bfloat16)``.
    * ``compile``: the training forward runs through ``torch.compile`` (static shapes, one
      graph per batch shape and resolution; about 25 % faster on a 2-core CPU, after a minute
      of compiling). Evaluation runs the plain module. The arithmetic differs from eager mode
      in the last bits, so a compiled run is not bit-identical to an eager one.
    * ``resume_path``: after every epoch, model, optimizer, scheduler, generator, epoch, best
      accuracy/weights and history are written there atomically; a later call with the same
      path and ``fingerprint`` continues after the last finished epoch and ends in the state an
      uninterrupted run would have reached. A state with another fingerprint is an error.
    * ``stop_after``: end this call after that many epochs in total (to interrupt on purpose).
    """
    dev = _model_device(model)
    g = torch.Generator().manual_seed(seed)
    forward = _compiled(model) if compile else model
    opt = torch.optim.SGD(
        model.parameters(), lr=recipe.lr, momentum=recipe.momentum,
        weight_decay=recipe.weight_decay, nesterov=recipe.nesterov,
    )
    n = images.shape[0]
    n_batches = math.ceil(n / recipe.batch_size)
    sched = make_scheduler(opt, recipe, n_batches)
    log = TrainLog(epochs_done=0, complete=False, seconds=0.0, final_loss=float("nan"))
    if resume_path is not None and resume_path.is_file():
        state = torch.load(resume_path, map_location="cpu", weights_only=True)
        if state["fingerprint"] != fingerprint:
            raise ValueError(
                f"the resume state {resume_path} belongs to another run (different recipe, seed, "
                "precision, architecture or data); delete it to start afresh, or pass resume=False"
            )
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        _load_scheduler_state(sched, state["scheduler"])
        g.set_state(state["generator"])
        log = TrainLog(
            epochs_done=state["epoch"], complete=state["epoch"] >= recipe.epochs,
            seconds=state["seconds"], final_loss=state["final_loss"], best_accuracy=state["best_accuracy"],
            best_epoch=state["best_epoch"], history=list(state["history"]), best_state=state["best_state"],
        )
    if test_images is not None:
        assert test_labels is not None, "test_images need test_labels"
    end = recipe.epochs if stop_after is None else min(recipe.epochs, stop_after)
    bar = tqdm(
        range(log.epochs_done, end), desc=desc, disable=not progress, leave=True,
        initial=log.epochs_done, total=recipe.epochs,
    )
    for epoch in bar:
        started = time.perf_counter()
        model.train()
        order = torch.randperm(n, generator=g)
        size = recipe.resolutions[epoch] if recipe.resolutions else None
        lr = opt.param_groups[0]["lr"]
        total_loss = 0.0
        batches = tqdm(range(0, n, recipe.batch_size), total=n_batches, desc=f"epoch {epoch + 1}",
                       disable=not progress, leave=False)
        for s in batches:
            idx = order[s : s + recipe.batch_size]
            x = _augment(to_float(images[idx.to(images.device)].to(dev)), recipe, g)
            if size is not None:
                x = _resize(x, size)
            y = labels[idx.to(labels.device)].to(dev)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(forward(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if recipe.per_batch_schedule:
                sched.step()
            log.final_loss = loss.item()
            total_loss += log.final_loss * idx.numel()
        if not recipe.per_batch_schedule:
            sched.step()
        record = {"epoch": epoch + 1, "lr": lr, "train_loss": total_loss / n}
        if size is not None:
            record["resolution"] = size
        if test_images is not None:
            acc = evaluate_accuracy(model, test_images, test_labels)
            record["test_accuracy"] = acc
            if log.best_accuracy is None or acc > log.best_accuracy:
                log.best_accuracy, log.best_epoch, log.best_state = acc, epoch + 1, _cpu_state(model)
        log.seconds += time.perf_counter() - started
        record["seconds"] = log.seconds
        log.history.append(record)
        log.epochs_done = epoch + 1
        log.complete = log.epochs_done >= recipe.epochs
        if resume_path is not None:
            _save_resume_state(resume_path, {
                "fingerprint": fingerprint, "epoch": log.epochs_done, "model": _cpu_state(model),
                "optimizer": opt.state_dict(), "scheduler": _scheduler_state(sched),
                "generator": g.get_state(), "seconds": log.seconds, "final_loss": log.final_loss,
                "best_accuracy": log.best_accuracy, "best_epoch": log.best_epoch,
                "best_state": log.best_state, "history": log.history,
            })
        postfix = {"loss": f"{record['train_loss']:.3f}"}
        if "test_accuracy" in record:
            postfix["acc"] = f"{record['test_accuracy']:.3f}"
        bar.set_postfix(postfix)
        if on_epoch_end is not None:
            on_epoch_end(record)
    return log


def train_classifier(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    recipe: TrainRecipe,
    seed: int = 0,
    progress: bool = True,
) -> dict:
    """Train in place with SGD (no evaluation, no resume); returns a log (epochs, seconds,
    final train loss). Used by the built-in digits model."""
    log = fit(model, images, labels, recipe, seed=seed, progress=progress, desc="training source model")
    return {"epochs": recipe.epochs, "seconds": log.seconds, "final_loss": log.final_loss}
