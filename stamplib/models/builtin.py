"""The source network of the built-in digits benchmark: shipped with the package (1.3 MB, in
``shipped/``), copied into the checkpoint cache on first use, and retrained only where the
shipped file does not fit the recipe (training takes about nine minutes on one CPU thread,
which is what the smoke profile's first run used to cost).

The checkpoint is written atomically with a JSON sidecar (recipe, clean accuracy, SHA-256);
a cached file whose hash does not match its sidecar is retrained, never trusted.

Every number of the benchmark depends on these weights, so training must give the same bits
on every x86-64 machine. Two things would change them: the thread count (a multi-threaded
backward sums in another order) and the CPU's vector width (PyTorch, oneDNN and MKL pick
AVX-512 kernels where the CPU has them, and those sum in another order than the AVX2 ones).
Training therefore runs in a child process on one thread with all three libraries held to
their AVX2 code paths (:data:`PINNED_ENV`): an AVX-512 machine then trains the same file as an
AVX2 machine (checked: SHA-256 ``3b5f70851ac712b5…`` on both).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

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
#: Read by the libraries when they load, hence a child process: ATen's kernel dispatch,
#: oneDNN's convolutions and MKL's conditional numerical reproducibility, all at AVX2.
PINNED_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2",
              "OMP_NUM_THREADS": str(TRAINING_THREADS)}
PINNED_CAPABILITY = "AVX2"
#: The shipped checkpoint and its sidecar (trained on an AMD EPYC with the pins above; an Intel
#: CPU trains another file, so shipping one file gives every machine the same weights).
SHIPPED = Path(__file__).resolve().parent / "shipped"
SHIPPED_SHA256 = "3b5f70851ac712b555f0cd5a03d75c046a4b0c0b4be93e365b30177cf2ead873"


def shipped_problem() -> str | None:
    """Why the shipped digits checkpoint cannot be installed (missing, or its SHA-256 is not
    :data:`SHIPPED_SHA256` or not its sidecar's), or None when it is intact: what ``doctor``
    reports (a damaged one is otherwise retrained without a word, for about nine minutes)."""
    ckpt, sidecar = SHIPPED / f"{DIGITS_CHECKPOINT}.pt", SHIPPED / f"{DIGITS_CHECKPOINT}.json"
    restore = "restore it with `git checkout -- stamplib/models/shipped` (or reinstall stamplib)"
    if not (ckpt.is_file() and sidecar.is_file()):
        return f"{ckpt if not ckpt.is_file() else sidecar} is missing: {restore}"
    found = hashlib.sha256(ckpt.read_bytes()).hexdigest()
    if found != SHIPPED_SHA256:
        return (f"{ckpt} has SHA-256 {found[:16]}…, the package records {SHIPPED_SHA256[:16]}…: the file was changed; "
                f"{restore}")
    try:
        recorded = json.loads(sidecar.read_text()).get("sha256")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        recorded = None
    if recorded != SHIPPED_SHA256:
        return f"{sidecar} does not record the checkpoint's SHA-256: the file was changed; {restore}"
    return None


def _recipe_json() -> dict:
    """The recipe as a sidecar holds it (JSON: tuples are lists)."""
    return json.loads(json.dumps(dataclasses.asdict(DIGITS_RECIPE)))


def _install_shipped() -> bool:
    """Copy the shipped checkpoint and sidecar into the checkpoint cache when they are intact and
    trained with today's recipe; False otherwise (then the model is trained)."""
    ckpt, sidecar = SHIPPED / f"{DIGITS_CHECKPOINT}.pt", SHIPPED / f"{DIGITS_CHECKPOINT}.json"
    if not (ckpt.is_file() and sidecar.is_file()):
        return False
    payload, meta = ckpt.read_bytes(), json.loads(sidecar.read_text())
    if hashlib.sha256(payload).hexdigest() != meta.get("sha256") or meta.get("recipe") != _recipe_json():
        return False
    target = paths.checkpoints_dir() / ckpt.name
    paths.atomic_write_bytes(target, payload)
    paths.atomic_write_bytes(target.with_suffix(".json"), sidecar.read_bytes())
    return True


def _cached(model: nn.Module) -> nn.Module | None:
    """The cached weights in ``model``, or None when absent, changed, or trained before
    training was pinned to one thread and to AVX2 kernels (such a file is retrained once)."""
    ckpt = paths.checkpoints_dir() / f"{DIGITS_CHECKPOINT}.pt"
    sidecar = ckpt.with_suffix(".json")
    if not (ckpt.is_file() and sidecar.is_file()):
        return None
    payload = ckpt.read_bytes()
    meta = json.loads(sidecar.read_text())
    log = meta.get("train_log", {})
    pinned = log.get("threads") == TRAINING_THREADS and log.get("cpu_capability") == PINNED_CAPABILITY
    if hashlib.sha256(payload).hexdigest() != meta.get("sha256") or not pinned:
        return None
    model.load_state_dict(torch.load(io.BytesIO(payload), weights_only=True), strict=True)
    return model.eval()


def digits_source_model(progress: bool = True) -> nn.Module:
    """The cached source model (eval mode, CPU): the shipped one on first use; trained (about
    nine minutes on one thread) in a pinned child process only where no shipped file fits (see
    the module's docstring), saying so first."""
    num_classes = load_digits_benchmark().num_classes
    model = _cached(resnet_cifar_tiny(num_classes))
    if model is None and _install_shipped():
        model = _cached(resnet_cifar_tiny(num_classes))
    if model is not None:
        return model
    print(
        f"training the digits source network once: {DIGITS_RECIPE.epochs} epochs on one CPU thread, about nine "
        f"minutes; cached in {paths.checkpoints_dir()}",
        file=sys.stderr,
        flush=True,
    )
    env = paths.child_environment(**PINNED_ENV, STAMPLIB_HOME=str(paths.home()))
    child = f"from stamplib.models.builtin import _train_pinned; _train_pinned(progress={progress!r})"
    done = subprocess.run([sys.executable, "-c", child], env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"training the digits source model failed (exit {done.returncode}); its output is above")
    model = _cached(resnet_cifar_tiny(num_classes))
    if model is None:
        raise RuntimeError(f"the digits source model was trained but {paths.checkpoints_dir()} does not hold it")
    return model


def _train_pinned(progress: bool) -> None:
    """Train and store the digits model; run in a process started with :data:`PINNED_ENV`."""
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != PINNED_CAPABILITY:
        raise RuntimeError(
            f"the digits model must be trained with {PINNED_CAPABILITY} kernels, this process uses "
            f"{capability}: start it with the environment {PINNED_ENV}"
        )
    ckpt = paths.checkpoints_dir() / f"{DIGITS_CHECKPOINT}.pt"
    sidecar = ckpt.with_suffix(".json")
    bench = load_digits_benchmark()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = resnet_cifar_tiny(bench.num_classes)
    # One intra-op thread: a multi-threaded backward sums in another order, so the weights (and
    # every number of the benchmark) would depend on the core count of whoever trained first.
    threads = torch.get_num_threads()
    torch.set_num_threads(TRAINING_THREADS)
    try:
        log = train_classifier(model, bench.train_images, bench.train_labels, DIGITS_RECIPE, seed=0, progress=progress)
    finally:
        torch.set_num_threads(threads)
    log["threads"] = TRAINING_THREADS
    log["cpu_capability"] = capability
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
