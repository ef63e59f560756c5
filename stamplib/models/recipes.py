"""The CIFAR source-model recipes of protocol.md §4.2 as typed config, and ``train_source``.

| recipe | checkpoint | classes | optimiser | schedule | augmentation |
| --- | --- | --- | --- | --- | --- |
| ``cifar10`` | ResNet18_10 | 10 | SGD 0.1, m 0.9, wd 2e-4 | multistep [60,120,160] γ 0.2, 200 ep | crop 4 + flip |
| ``cifar10_8`` | ResNet18_8 | 0–7 | as cifar10 | as cifar10 | as cifar10 |
| ``cifar100`` | ResNet18_100 | 100 | SGD 0.1, m .9, wd 5e-4, Nest. | cosine, T_max 200, 200 ep | crop, flip, rot. 15° |
| ``cifar100_80`` | ResNet18_80 | 0–79 | as cifar100 | as cifar100 | as cifar100 |
| ``cifar10_fast`` | ResNet18_10_jpeg | 10 | SGD 0.2, m .9, wd 5e-4, Nest. | one-cycle, 10 ep | crop 4, flip, 16→32 px |
| ``cifar10_8_fast`` | ResNet18_8_jpeg | 0–7 | as cifar10_fast | as cifar10_fast | as cifar10_fast |
| ``cifar10_compact`` | ResNetTiny_10_jpeg | 10 | SGD 0.2, m .9, wd 5e-4, Nest. | one-cycle, 30 ep | crop 4, flip |
| ``cifar10_8_compact`` | ResNetTiny_8_jpeg | 0–7 | as cifar10_compact | as cifar10_compact | as cifar10_compact |

The ``*_fast`` recipes are ours, not the paper's: a CPU budget for the JPEG CIFAR-10 of
shared/data (``train-source --recipe fast``). The ``*_compact`` recipes (ours too) train the
source networks that ship with the built-in CIFAR-10 benchmark (``data/builtin``): the digits
model's compact ResNet (0.3 M parameters, so the quick profile costs what it did on digits) on
all 50,000 JPEG training images (``train-source --dataset cifar10_jpeg --recipe compact``). Plain cross-entropy as in
§4.2 (no label
smoothing, which would change the calibration that every entropy-based TTA method reads).

Batch size 128, cross-entropy, no input normalisation, scheduler stepped once per epoch, the
saved weights are those of the epoch with the best clean test accuracy. The split variants
train on the images whose label is below the class count (protocol.md §4.2 (c)).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from stamplib import data, paths, validation
from stamplib.models import checkpoints
from stamplib.models.networks import create
from stamplib.models.training import TrainRecipe, fit

CIFAR10_TRAIN = TrainRecipe(
    epochs=200, lr=0.1, momentum=0.9, weight_decay=2e-4, nesterov=False, batch_size=128,
    crop_padding=4, hflip=True, schedule="multistep", milestones=(60, 120, 160), gamma=0.2,
)
CIFAR100_TRAIN = TrainRecipe(
    epochs=200, lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True, batch_size=128,
    crop_padding=4, hflip=True, rotation_degrees=15.0, schedule="cosine",
)

# A CPU recipe (ours): one-cycle SGD over 10 epochs, the first ones at reduced resolution
# (a 16-px epoch costs about a fifth of a 32-px one), the last four at full size.
CIFAR10_FAST = TrainRecipe(
    epochs=10, lr=0.2, momentum=0.9, weight_decay=5e-4, nesterov=True, batch_size=128,
    crop_padding=4, hflip=True, schedule="onecycle", warmup_fraction=0.25,
    resolutions=(16, 16, 20, 24, 24, 28, 32, 32, 32, 32),
)

# The compact network of the built-in benchmark: an epoch costs about 30 s on 2 cores with bf16,
# so 30 full-size epochs fit a CPU budget of about 15 minutes per model.
CIFAR10_COMPACT = TrainRecipe(
    epochs=30, lr=0.2, momentum=0.9, weight_decay=5e-4, nesterov=True, batch_size=128,
    crop_padding=4, hflip=True, schedule="onecycle", warmup_fraction=0.2,
)


@dataclass(frozen=True)
class SourceRecipe:
    name: str
    checkpoint: str  # registry name written by a full run
    architecture: str
    num_classes: int  # labels >= num_classes are dropped (the class-split variants)
    train: TrainRecipe


RECIPES: dict[str, SourceRecipe] = {
    r.name: r
    for r in (
        SourceRecipe("cifar10", "ResNet18_10", "resnet18_cifar", 10, CIFAR10_TRAIN),
        SourceRecipe("cifar10_8", "ResNet18_8", "resnet18_cifar", 8, CIFAR10_TRAIN),
        SourceRecipe("cifar100", "ResNet18_100", "resnet18_cifar", 100, CIFAR100_TRAIN),
        SourceRecipe("cifar100_80", "ResNet18_80", "resnet18_cifar", 80, CIFAR100_TRAIN),
        SourceRecipe("cifar10_fast", "ResNet18_10_jpeg", "resnet18_cifar", 10, CIFAR10_FAST),
        SourceRecipe("cifar10_8_fast", "ResNet18_8_jpeg", "resnet18_cifar", 8, CIFAR10_FAST),
        SourceRecipe("cifar10_compact", "ResNetTiny_10_jpeg", "resnet_cifar_tiny", 10, CIFAR10_COMPACT),
        SourceRecipe("cifar10_8_compact", "ResNetTiny_8_jpeg", "resnet_cifar_tiny", 8, CIFAR10_COMPACT),
    )
}

#: ``train-source --recipe``: the recipe family → the recipe for a class count.
RECIPE_FAMILIES: dict[str, dict[int, str]] = {
    "paper": {10: "cifar10", 8: "cifar10_8", 100: "cifar100", 80: "cifar100_80"},
    "fast": {10: "cifar10_fast", 8: "cifar10_8_fast"},
    "compact": {10: "cifar10_compact", 8: "cifar10_8_compact"},
}


def recipe_for(family: str, num_classes: int) -> SourceRecipe:
    """The recipe of ``family`` (``paper``, ``fast`` or ``compact``) for a network with ``num_classes``."""
    if family not in RECIPE_FAMILIES:
        raise ValueError(f"unknown recipe {family!r}; choose one of {', '.join(RECIPE_FAMILIES)}")
    names = RECIPE_FAMILIES[family]
    if num_classes not in names:
        raise ValueError(
            f"recipe {family!r} has no variant for {num_classes} classes; it covers "
            f"{', '.join(map(str, sorted(names)))} classes"
        )
    return RECIPES[names[num_classes]]


@dataclass(frozen=True)
class ProfilePlan:
    """How much of a recipe a notebook profile trains (``None`` = everything)."""

    epochs: int | None  # None: the recipe's own length
    max_train: int | None
    max_test: int | None

    def checkpoint_name(self, checkpoint: str, profile: str) -> str:
        # Only a full run may occupy the registry name that source_model() resolves; shorter
        # runs get their own file so they never pass for the real source model.
        return checkpoint if profile == "full" else f"{checkpoint}.{profile}"


PROFILE_PLANS: dict[str, ProfilePlan] = {
    "smoke": ProfilePlan(epochs=1, max_train=256, max_test=256),
    "quick": ProfilePlan(epochs=3, max_train=10_000, max_test=2_000),
    "full": ProfilePlan(epochs=None, max_train=None, max_test=None),
}


def profile_plan(profile: str, epochs: int = 0) -> ProfilePlan:
    """The plan of ``profile``; ``epochs > 0`` overrides its epoch count."""
    validation.check_choice("profile", profile, PROFILE_PLANS)
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be 0 (the profile's default) or a positive integer, got {epochs!r}")
    plan = PROFILE_PLANS[profile]
    return dataclasses.replace(plan, epochs=epochs) if epochs > 0 else plan


def trainable_datasets() -> list[str]:
    """The data sets whose source model a recipe can train."""
    return [n for n, d in data.DATASETS.items() if d.checkpoint in checkpoints.REGISTRY
            and checkpoints.REGISTRY[d.checkpoint].recipe and not d.builtin]


def train_source_for(
    dataset: str,
    *,
    recipe: str | None = None,
    profile: str = "full",
    epochs: int = 0,
    seed: int = 0,
    device: str | torch.device = "cpu",
    bf16: bool = False,
    compile: bool = False,
    data_root: str | Path,
    progress: bool = True,
) -> TrainSourceResult:
    """Train (or resume, or reuse) the source network that ``dataset``'s registry entry names,
    on its source-training images, measuring clean accuracy on its test images.

    ``recipe``: ``paper``, ``fast`` or ``compact`` (:data:`RECIPE_FAMILIES`; default: the
    checkpoint's own). A recipe of another architecture writes its own checkpoint name.
    ``profile`` (:data:`PROFILE_PLANS`) caps the images and epochs; only ``full`` writes the
    registry name, shorter runs write ``<name>.<profile>``. ``epochs > 0`` shortens the run.
    The images are read from ``data_root``.
    """
    entry = data.dataset(dataset)
    registered = checkpoints.REGISTRY.get(entry.checkpoint)
    if registered is not None and registered.recipe is None:  # the digits model: no recipe of ours names it
        raise ValueError(
            f"{dataset}'s source network {entry.checkpoint} is not trained by train-source: it is built on first use "
            f"(stamplib.models.source_model({dataset!r}), or notebooks/01_source_models.ipynb); train-source trains "
            f"{', '.join(trainable_datasets())}")
    if entry.builtin and entry.checkpoint in checkpoints.REGISTRY:
        base = "cifar10_jpeg_8_2" if entry.known == 8 else "cifar10_jpeg"
        raise ValueError(
            f"{dataset}'s source network {entry.checkpoint} ships with the package and trains on the 50,000 JPEG "
            f"training photographs, not on the built-in 2,000: run `python -m stamplib train-source --dataset {base} "
            "--recipe compact --bf16 --data-root DIR`, then `python -m stamplib maintain build-benchmark --data-root "
            "DIR`"
        )
    registered = checkpoints.REGISTRY.get(entry.checkpoint)
    if registered is None or registered.recipe is None:
        raise ValueError(
            f"no trainable source model for {dataset!r}; choose one of {', '.join(trainable_datasets())}"
        )
    chosen = recipe_for(recipe, entry.known) if recipe else RECIPES[registered.recipe]
    plan = profile_plan(profile, epochs)
    root = paths.given_data_root(data_root, f"the source training of {dataset!r}")
    images, labels = entry.train(root)
    test_images, test_labels = entry.clean_test(root)
    train_idx, test_idx = spread_subset(labels, plan.max_train), spread_subset(test_labels, plan.max_test)
    # Another architecture cannot occupy the data set's registry name (the compact recipe on
    # cifar10_jpeg writes ResNetTiny_10_jpeg, not ResNet18_10_jpeg).
    target = entry.checkpoint if chosen.architecture == registered.architecture else chosen.checkpoint
    # Each seed is its own source network (a replicate), kept beside the others, never over them.
    target = checkpoints.network_name(target, seed)
    return train_source(
        chosen, images[train_idx], labels[train_idx], test_images[test_idx], test_labels[test_idx],
        name=plan.checkpoint_name(target, profile), epochs=plan.epochs, seed=seed, device=device,
        bf16=bf16, compile=compile, progress=progress,
    )


def spread_subset(labels: torch.Tensor, n: int | None) -> torch.Tensor:
    """Indices of ``n`` samples taken round-robin over the classes, in index order within a
    class (deterministic, class-balanced; all indices when ``n`` is None or too large)."""
    labels = torch.as_tensor(labels)
    if n is None or n >= labels.numel():
        return torch.arange(labels.numel())
    return torch.sort(data.interleave_classes(labels)[:n]).values


def _as_uint8_images(x: Any) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    assert t.dtype == torch.uint8 and t.ndim == 4 and t.shape[-1] == 3, "images: uint8 N×H×W×3"
    return t.contiguous()


def _fingerprint(recipe: SourceRecipe, train: TrainRecipe, seed: int, bf16: bool, tensors: list[torch.Tensor]) -> str:
    h = hashlib.sha256()
    config = {"recipe": dataclasses.asdict(recipe), "train": dataclasses.asdict(train), "seed": seed, "bf16": bf16}
    h.update(json.dumps(config, sort_keys=True).encode())
    for t in tensors:
        h.update(str(tuple(t.shape)).encode())
        h.update(memoryview(t.cpu().contiguous().numpy()).cast("B"))
    return h.hexdigest()


@dataclass
class TrainSourceResult:
    model: nn.Module  # best-epoch weights, eval mode, on the training device
    checkpoint: Path | None  # None until the run is complete
    sidecar: dict[str, Any]
    complete: bool

    def summary(self) -> str:
        """One line: what was trained, how well, how long, and where it went."""
        side = self.sidecar
        return (f"{side['name']} (recipe {side['recipe_name']}): {side['epochs']} epochs, best epoch "
                f"{side['best_epoch']}, clean test accuracy {100 * side['clean_test_accuracy']:.2f}%, "
                f"{side['seconds']:.0f} s -> {self.checkpoint}")


def train_source(
    recipe_name: str | SourceRecipe,
    images: torch.Tensor | np.ndarray,
    labels: torch.Tensor | np.ndarray,
    test_images: torch.Tensor | np.ndarray,
    test_labels: torch.Tensor | np.ndarray,
    *,
    name: str | None = None,
    epochs: int | None = None,
    architecture: str | None = None,
    seed: int = 0,
    device: str | torch.device = "cpu",
    bf16: bool = False,
    compile: bool = False,
    resume: bool = True,
    overwrite: bool = False,
    stop_after: int | None = None,
    progress: bool = True,
) -> TrainSourceResult:
    """Train a source network with a protocol.md §4.2 recipe and register its checkpoint.

    Writes ``<checkpoints_dir>/<name>.pt`` (best clean-test-accuracy epoch) and ``<name>.json``
    (recipe, epochs, clean test accuracy, per-epoch history, seconds, SHA-256); ``name``
    defaults to the recipe's registry name (ResNet18_10, …). During training a resume state
    ``<name>.resume.pt`` is saved after every epoch; calling again with the same arguments
    continues from it (``resume=False`` starts afresh). A finished checkpoint whose sidecar has
    the same fingerprint is returned without training unless ``overwrite``.

    ``epochs`` shortens the recipe (multistep milestones scale along), ``architecture``
    swaps the network (tests use ``resnet_cifar_tiny``), ``stop_after`` interrupts the run after
    that many epochs (the result is then ``complete=False``, checkpoint None).
    """
    recipe = RECIPES[recipe_name] if isinstance(recipe_name, str) else recipe_name
    if architecture is not None:
        recipe = dataclasses.replace(recipe, architecture=architecture)
    train = recipe.train.with_epochs(epochs) if epochs else recipe.train
    name = name or recipe.checkpoint
    dev = torch.device(device)

    images, test_images = _as_uint8_images(images), _as_uint8_images(test_images)
    labels, test_labels = torch.as_tensor(labels).long(), torch.as_tensor(test_labels).long()
    keep, keep_test = labels < recipe.num_classes, test_labels < recipe.num_classes
    images, labels = images[keep], labels[keep]
    test_images, test_labels = test_images[keep_test], test_labels[keep_test]
    assert labels.numel() and test_labels.numel(), "no training or test images of the known classes"
    assert int(labels.min()) >= 0, "labels must be class indices"

    fingerprint = _fingerprint(recipe, train, seed, bf16, [images, labels, test_images, test_labels])
    ckpt = paths.checkpoints_dir() / f"{name}.pt"
    resume_path = ckpt.with_name(f"{name}.resume.pt")
    previous = checkpoints.read_sidecar(ckpt) if ckpt.is_file() else None
    if previous is not None and previous.get("fingerprint") == fingerprint and not overwrite:
        model = create(recipe.architecture, recipe.num_classes, weights=ckpt).to(dev).eval()
        return TrainSourceResult(model, ckpt, previous, True)
    if not resume and resume_path.is_file():
        resume_path.unlink()

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # initial weights; the global RNG is restored afterwards
        model = create(recipe.architecture, recipe.num_classes)
    model = model.to(dev)
    log = fit(
        model, images.to(dev), labels.to(dev), train, seed=seed,
        test_images=test_images.to(dev), test_labels=test_labels.to(dev), bf16=bf16, compile=compile,
        resume_path=resume_path, fingerprint=fingerprint, stop_after=stop_after,
        progress=progress, desc=f"{name} ({recipe.name})",
    )
    assert log.best_state is not None
    meta: dict[str, Any] = {
        "name": name,
        "architecture": recipe.architecture,
        "num_classes": recipe.num_classes,
        "recipe_name": recipe.name,
        "recipe": dataclasses.asdict(train),
        "epochs": log.epochs_done,
        "best_epoch": log.best_epoch,
        "clean_test_accuracy": log.best_accuracy,
        "seconds": round(log.seconds, 2),
        "seed": seed,
        "bf16": bf16,
        "compile": compile,
        "device": str(dev),
        "threads": torch.get_num_threads(),
        "n_train": int(labels.numel()),
        "n_test": int(test_labels.numel()),
        "history": log.history,
        "torch": torch.__version__,
        "fingerprint": fingerprint,
    }
    model.load_state_dict(log.best_state)
    model.eval()
    if not log.complete:
        return TrainSourceResult(model, None, meta, False)
    meta["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    sidecar = checkpoints.save_checkpoint(ckpt, log.best_state, meta)
    resume_path.unlink(missing_ok=True)  # the checkpoint is final; the state is ~3× its size
    return TrainSourceResult(model, ckpt, sidecar, True)

