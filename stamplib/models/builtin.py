"""The source network of the built-in digits benchmark, trained on first use and cached.

The checkpoint is written atomically with a JSON sidecar (recipe, clean accuracy, SHA-256);
a cached file whose hash does not match its sidecar is retrained, never trusted. Training runs
on one intra-op thread, so the model (and every number of the benchmark) is the same whatever
the machine's core count.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json

import torch
from torch import nn

from stamplib import paths
from stamplib.data.benchmark import load_digits_benchmark
from stamplib.models.resnet_cifar import resnet_cifar_tiny
from stamplib.models.training import TrainRecipe, evaluate_accuracy, train_classifier

# The CIFAR recipe's augmentation (crop with 4-px padding + horizontal flip, protocol.md §4.2):
# the source model must be flip-invariant, since STAMP's test-time views flip half the time.
DIGITS_RECIPE = TrainRecipe(epochs=30, lr=0.05, weight_decay=5e-4, crop_padding=4, hflip=True)
DIGITS_CHECKPOINT = "digits_resnet_cifar_tiny"
TRAINING_THREADS = 1


def digits_source_model(progress: bool = True) -> nn.Module:
    """The cached source model (eval mode, CPU); trains it (~1–2 min on 2 cores) if missing."""
    ckpt = paths.checkpoints_dir() / f"{DIGITS_CHECKPOINT}.pt"
    sidecar = ckpt.with_suffix(".json")
    model = resnet_cifar_tiny(load_digits_benchmark().num_classes)
    if ckpt.is_file() and sidecar.is_file():
        payload = ckpt.read_bytes()
        meta = json.loads(sidecar.read_text())
        # A model trained before training was pinned to one thread is retrained once.
        pinned = meta.get("train_log", {}).get("threads") == TRAINING_THREADS
        if hashlib.sha256(payload).hexdigest() == meta.get("sha256") and pinned:
            model.load_state_dict(torch.load(io.BytesIO(payload), weights_only=True), strict=True)
            return model.eval()
    bench = load_digits_benchmark()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = resnet_cifar_tiny(bench.num_classes)
    # One intra-op thread: a multi-threaded backward sums in another order, so the weights (and
    # every number of the benchmark) would depend on the core count of whoever trained first.
    threads = torch.get_num_threads()
    torch.set_num_threads(TRAINING_THREADS)
    try:
        log = train_classifier(model, bench.train_images, bench.train_labels, DIGITS_RECIPE, seed=0,
                               progress=progress)
    finally:
        torch.set_num_threads(threads)
    log["threads"] = TRAINING_THREADS
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    payload = buffer.getvalue()
    meta = {
        "architecture": "resnet_cifar_tiny",
        "num_classes": bench.num_classes,
        "recipe": dataclasses.asdict(DIGITS_RECIPE),
        "train_log": log,
        "clean_test_accuracy": evaluate_accuracy(model, bench.test_images, bench.test_labels),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    paths.atomic_write_bytes(ckpt, payload)
    paths.atomic_write_bytes(sidecar, json.dumps(meta, indent=2).encode())
    return model.eval()
