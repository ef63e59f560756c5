"""Supervised training of source networks on resident uint8 tensors."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm


@dataclass(frozen=True)
class TrainRecipe:
    epochs: int
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    nesterov: bool = False
    batch_size: int = 128
    crop_padding: int = 4
    hflip: bool = True
    schedule: str = "cosine"  # or "multistep" (milestones at 30/60/80 % of the epochs, γ 0.2)


def _augment(x: torch.Tensor, recipe: TrainRecipe, g: torch.Generator) -> torch.Tensor:
    n, _, h, w = x.shape
    p = recipe.crop_padding
    if p:
        padded = F.pad(x, (p, p, p, p))
        oy = torch.randint(0, 2 * p + 1, (n,), generator=g)
        ox = torch.randint(0, 2 * p + 1, (n,), generator=g)
        rows = (oy.view(-1, 1) + torch.arange(h)).view(n, h, 1)
        cols = (ox.view(-1, 1) + torch.arange(w)).view(n, 1, w)
        x = padded.permute(0, 2, 3, 1)[torch.arange(n).view(n, 1, 1), rows, cols].permute(0, 3, 1, 2)
    if recipe.hflip:
        flip = (torch.rand(n, generator=g) < 0.5).view(-1, 1, 1, 1)
        x = torch.where(flip, x.flip(-1), x)
    return x


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 N×H×W×3 → float N×3×H×W in [0,1]."""
    return images.permute(0, 3, 1, 2).float().div(255.0)


@torch.no_grad()
def evaluate_accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 512) -> float:
    model.eval()
    correct = 0
    for start in range(0, images.shape[0], batch_size):
        logits = model(to_float(images[start : start + batch_size]))
        correct += int((logits.argmax(1) == labels[start : start + batch_size]).sum())
    return correct / images.shape[0]


def train_classifier(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    recipe: TrainRecipe,
    seed: int = 0,
    progress: bool = True,
) -> dict:
    """Train in place with SGD; returns a log (epochs, seconds, final train loss)."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(
        model.parameters(), lr=recipe.lr, momentum=recipe.momentum,
        weight_decay=recipe.weight_decay, nesterov=recipe.nesterov,
    )
    if recipe.schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=recipe.epochs)
    else:
        milestones = [int(recipe.epochs * f) for f in (0.3, 0.6, 0.8)]
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=0.2)
    start = time.perf_counter()
    loss_value = float("nan")
    bar = tqdm(range(recipe.epochs), desc="training source model", disable=not progress, leave=False)
    for _ in bar:
        model.train()
        order = torch.randperm(images.shape[0], generator=g)
        for s in range(0, images.shape[0], recipe.batch_size):
            idx = order[s : s + recipe.batch_size]
            x = _augment(to_float(images[idx]), recipe, g)
            loss = F.cross_entropy(model(x), labels[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_value = loss.item()
        sched.step()
        bar.set_postfix(loss=f"{loss_value:.3f}")
    return {"epochs": recipe.epochs, "seconds": time.perf_counter() - start, "final_loss": loss_value}
