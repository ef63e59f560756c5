"""Checkpoint registry: source-network weights by name (protocol.md §4).

A registered name resolves to ``<folder>/<name>.pt`` in the first folder of the checkpoint search
path that holds it (``stamplib.paths.checkpoint_search_path``: the writable checkpoints folder,
then ``shared/models`` beside the checkout or ``$STAMPLIB_CHECKPOINT_PATH``), with a JSON
sidecar ``<name>.json`` that records at least its SHA-256. Our trainer writes both; a file the
user drops in by hand (the authors' release) has no sidecar, so its hash is recorded on first
use, with a warning, and checked on every later load. A file whose hash disagrees with its
sidecar is refused, never silently used.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import pickle
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from stamplib import paths

AUTHORS_RELEASE = (
    "the authors' released checkpoints (Google Drive link in the README of "
    "github.com/yuyongcan/STAMP)"
)


@dataclass(frozen=True)
class CheckpointEntry:
    name: str
    architecture: str  # a key of stamplib.models.ARCHITECTURES
    num_classes: int
    recipe: str | None  # stamplib.models.recipes name that trains it, if any
    description: str


REGISTRY: dict[str, CheckpointEntry] = {
    e.name: e
    for e in (
        CheckpointEntry("ResNet18_10", "resnet18_cifar", 10, "cifar10", "CIFAR-10 source model (protocol.md §4.2)"),
        CheckpointEntry("ResNet18_100", "resnet18_cifar", 100, "cifar100", "CIFAR-100 source model (protocol.md §4.2)"),
        CheckpointEntry("ResNet18_8", "resnet18_cifar", 8, "cifar10_8", "CIFAR-10 classes 0–7 (8:2 split setting)"),
        CheckpointEntry("ResNet18_80", "resnet18_cifar", 80, "cifar100_80", "CIFAR-100 classes 0–79 (80:20 split "
                                                                            "setting)"),
        CheckpointEntry(
            "ResNet18_10_jpeg", "resnet18_cifar", 10, "cifar10_fast",
            "fast CPU recipe on the JPEG re-encoded CIFAR-10 of shared/data "
            "(python -m stamplib train-source --dataset cifar10_jpeg --recipe fast)",
        ),
        CheckpointEntry(
            "ResNet18_8_jpeg", "resnet18_cifar", 8, "cifar10_8_fast",
            "fast CPU recipe, classes 0–7 of the JPEG re-encoded CIFAR-10 of shared/data "
            "(python -m stamplib train-source --dataset cifar10_jpeg_8_2 --recipe fast)",
        ),
        CheckpointEntry(
            "ResNetTiny_10_jpeg", "resnet_cifar_tiny", 10, "cifar10_compact",
            "compact source model of the built-in CIFAR-10 benchmark, shipped as package data "
            "(python -m stamplib train-source --dataset cifar10_jpeg --recipe compact)",
        ),
        CheckpointEntry(
            "ResNetTiny_8_jpeg", "resnet_cifar_tiny", 8, "cifar10_8_compact",
            "compact source model of the built-in benchmark's class split, classes 0–7, shipped as "
            "package data (python -m stamplib train-source --dataset cifar10_jpeg_8_2 --recipe compact)",
        ),
        CheckpointEntry(
            "digits_resnet_cifar_tiny", "resnet_cifar_tiny", 8, None,
            "built-in digits benchmark source model (stamplib.models.builtin)",
        ),
    )
}


#: A source network trained with seed ``k`` (k ≥ 1) is ``<name>_seed<k>``; seed 0 keeps the plain
#: name, so every record and file written before replicates existed names the same network.
NETWORK_SUFFIX = "_seed"


def network_name(name: str, network: int) -> str:
    """The checkpoint name of source network ``network`` (its training seed) of registered
    checkpoint ``name``: ``name`` itself for network 0, else ``<name>_seed<network>``."""
    if isinstance(network, bool) or not isinstance(network, int) or network < 0:
        raise ValueError(f"network: a source network's training seed, an integer >= 0; got {network!r}")
    return name if network == 0 else f"{name}{NETWORK_SUFFIX}{network}"


def base_name(name: str) -> str:
    """The registered name behind a network's checkpoint name (``ResNet18_10_jpeg_seed2`` →
    ``ResNet18_10_jpeg``); a name with no such suffix is returned as it is."""
    stem, suffix, digits = name.rpartition(NETWORK_SUFFIX)
    return stem if suffix and digits.isdigit() and int(digits) > 0 and stem in REGISTRY else name


class MissingCheckpointError(FileNotFoundError):
    """No file for a registered checkpoint (the message says how to get one)."""


class ChecksumMismatchError(ValueError):
    """A checkpoint's SHA-256 differs from the one its sidecar records."""


class CheckpointMismatchError(ValueError):
    """A state_dict does not fit the network it is loaded into (keys or shapes)."""


def checkpoint_path(name: str) -> Path:
    """The file of checkpoint ``name``: the first one on the search path, else where it would be
    written (``<checkpoints_dir>/<name>.pt``). The built-in benchmark's networks are package
    data and come from the package, whatever the search path holds (:func:`load` checks them
    against the package's ``SHA256SUMS``)."""
    from stamplib.data import builtin_cifar10

    if name in builtin_cifar10.CHECKPOINTS:
        return builtin_cifar10.FOLDER / f"{name}.pt"
    for folder in paths.checkpoint_search_path():
        candidate = folder / f"{name}.pt"
        if candidate.is_file():
            return candidate
    return paths.checkpoints_dir() / f"{name}.pt"


def sidecar_path(checkpoint: Path) -> Path:
    return checkpoint.with_suffix(".json")


def sha256_bytes(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def read_sidecar(checkpoint: Path) -> dict[str, Any] | None:
    side = sidecar_path(checkpoint)
    return json.loads(side.read_text()) if side.is_file() else None


def network_of(name: str) -> int:
    """The training seed a checkpoint name carries (``ResNet18_10_jpeg_seed2`` → 2; 0 without one)."""
    base = base_name(name)
    return int(name[len(base) + len(NETWORK_SUFFIX):]) if base != name else 0


def train_command(name: str) -> str | None:
    """The command line that trains checkpoint ``name`` (its network's seed included), or None
    where no recipe of ours does (the digits model is built on first use; the authors' networks)."""
    from stamplib import data

    base, network = base_name(name), network_of(name)
    entry = REGISTRY.get(base)
    if entry is None or entry.recipe is None:
        return None
    seed = f" --seed {network}" if network else ""
    if entry.recipe.endswith("_compact"):  # the built-in benchmark's networks train on the JPEG photographs
        dataset = "cifar10_jpeg_8_2" if entry.num_classes == 8 else "cifar10_jpeg"
        return f"python -m stamplib train-source --dataset {dataset} --recipe compact{seed} --data-root DIR"
    found = [n for n, d in data.DATASETS.items() if d.checkpoint == base and not d.builtin]
    return f"python -m stamplib train-source --dataset {found[0]}{seed} --data-root DIR" if found else None


def how_to_get(name: str) -> str:
    """The ways to obtain checkpoint ``name``, for error messages."""
    path = checkpoint_path(name)
    entry = REGISTRY.get(base_name(name))
    if entry is not None and entry.recipe is None:
        return (
            f"it is built automatically on first use: call stamplib.models.source_model('digits') "
            f"(or run notebooks/01_source_models.ipynb); it is written to {path}"
        )
    command = train_command(name)
    if network_of(name) or (command is not None and "jpeg" in name):
        # a network of our own recipes (another seed, or the JPEG CIFAR-10's): no one else publishes it
        return (f"It is trained by this project's recipe: `{command}` writes {path} and its sidecar; or copy a "
                "trained one in with `python -m stamplib checkpoints import FOLDER`.")
    recipe = entry.recipe if entry is not None else "<recipe>"
    return (
        "Three ways to get one: "
        f"(1) train it with stamplib.models.train_source({recipe!r}, images, labels, test_images, "
        f"test_labels) or notebooks/01_source_models.ipynb (profile 'full'), which writes {path} "
        "and its sidecar; "
        f"(2) download {AUTHORS_RELEASE} and put the file at exactly {path} (its SHA-256 is "
        "recorded on first use); "
        "(3) for ImageNet there is no registry file: stamplib.models.create('resnet50', 1000, "
        "weights='IMAGENET1K_V1') uses torchvision's ResNet50_Weights.IMAGENET1K_V1."
    )


def save_checkpoint(path: Path, state_dict: Mapping[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    """Write ``state_dict`` and a sidecar (``meta`` + its SHA-256), each atomically; the
    checkpoint goes first, so a crash in between leaves a file that fails verification
    instead of a sidecar that vouches for a missing file. Returns the sidecar."""
    buffer = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in state_dict.items()}, buffer)
    payload = buffer.getvalue()
    text = json.dumps({**meta, "sha256": sha256_bytes(payload)}, indent=2)
    paths.atomic_write_bytes(path, payload)
    paths.atomic_write_bytes(sidecar_path(path), text.encode())
    return json.loads(text)  # exactly what a reader of the sidecar gets (tuples become lists)


def _unwrap(obj: Any, source: str) -> dict[str, torch.Tensor]:
    """A plain state_dict from what ``torch.load`` gave: accepts {'state_dict'|'model'|'net':
    sd} wrappers and DataParallel's ``module.`` prefix, both common in released files."""
    if isinstance(obj, Mapping) and not any(isinstance(v, torch.Tensor) for v in obj.values()):
        for key in ("state_dict", "model", "net"):
            if isinstance(obj.get(key), Mapping):
                obj = obj[key]
                break
    if not isinstance(obj, Mapping) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise CheckpointMismatchError(f"{source} does not hold a state_dict (a mapping of names to tensors)")
    state = dict(obj)
    if state and all(k.startswith("module.") for k in state):
        state = {k[len("module.") :]: v for k, v in state.items()}
    return state


def _torch_load(payload: bytes, source: str) -> dict[str, torch.Tensor]:
    try:
        obj = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception as err:  # pickled modules or corrupt files; say which file and why
        # First sentence only: torch appends paragraphs of advice that do not apply here.
        detail = str(err).strip().splitlines()[0].split(". ")[0] if str(err).strip() else ""
        if isinstance(err, pickle.UnpicklingError) and "weights only" in str(err).lower():
            # A whole pickled nn.Module (or other objects): loading it would run arbitrary code.
            raise CheckpointMismatchError(
                f"{source} holds pickled Python objects, not just tensors ({detail}). Save the "
                "weights alone with torch.save(model.state_dict(), path)."
            ) from err
        raise CheckpointMismatchError(
            f"cannot read {source}: the file is truncated or damaged ({type(err).__name__}: {detail}). "
            "Delete it and download, copy or train it again; a file you wrote yourself must come "
            "from torch.save(model.state_dict(), path)."
        ) from err
    return _unwrap(obj, source)


def load_file(path: Path) -> dict[str, torch.Tensor]:
    """A state_dict from any file; verified against a sidecar when one lies beside it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint file {path} does not exist")
    payload = path.read_bytes()
    meta = read_sidecar(path)
    if meta is not None and "sha256" in meta:
        _verify(path, payload, meta)
    return _torch_load(payload, str(path))


def _verify(path: Path, payload: bytes, meta: dict[str, Any]) -> None:
    found = sha256_bytes(payload)
    if found != meta["sha256"]:
        raise ChecksumMismatchError(
            f"checkpoint {path} has SHA-256 {found} but its sidecar {sidecar_path(path)} records "
            f"{meta['sha256']}: the file changed after it was written or recorded. If you replaced "
            "it on purpose, delete the sidecar (the new hash is recorded on next use); otherwise "
            "retrain or download it again."
        )


def load(name: str) -> dict[str, torch.Tensor]:
    """The verified state_dict of registered checkpoint ``name``."""
    from stamplib.data import builtin_cifar10

    if base_name(name) not in REGISTRY:
        raise KeyError(f"unknown checkpoint {name!r}; registered: {', '.join(REGISTRY)} (network k >= 1 of "
                       f"each: <name>{NETWORK_SUFFIX}<k>)")
    if name in builtin_cifar10.CHECKPOINTS:
        builtin_cifar10.checkpoint_file(name)  # package data: the file and its sidecar as shipped
    path = checkpoint_path(name)
    if not path.is_file():
        searched = ", ".join(str(p) for p in paths.checkpoint_search_path())
        raise MissingCheckpointError(
            f"checkpoint {name!r} not found at {path} (searched {searched}; a folder can be added with "
            f"${paths.CHECKPOINT_PATH_ENV} or copied in with `python -m stamplib checkpoints import DIR`). "
            f"{how_to_get(name)}"
        )
    payload = path.read_bytes()
    meta = read_sidecar(path)
    if meta is None or "sha256" not in meta:
        digest = sha256_bytes(payload)
        record = {
            "name": name,
            "origin": "user-supplied file (no sidecar); hash recorded on first use",
            "recorded": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **(meta or {}),
            "sha256": digest,
        }
        state = _torch_load(payload, str(path))  # only record a file that actually loads
        paths.atomic_write_bytes(sidecar_path(path), json.dumps(record, indent=2).encode())
        warnings.warn(
            f"checkpoint {path} has no sidecar; recorded its SHA-256 {digest} in "
            f"{sidecar_path(path)}; later loads are checked against it",
            stacklevel=2,
        )
        return state
    _verify(path, payload, meta)
    return _torch_load(payload, str(path))


def _fmt_keys(keys: list[str], limit: int = 6) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f", … ({len(keys)} in all)" if len(keys) > limit else "")


def load_strict(model: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """``model.load_state_dict(state, strict=True)`` with one readable error naming the expected
    vs found keys/shapes and what to do. ``num_batches_tracked`` may be absent (PyTorch fills
    it in for old checkpoints such as torchvision's IMAGENET1K_V1)."""
    expected = model.state_dict()
    missing = [k for k in expected if k not in state and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in expected]
    shapes = [
        (k, tuple(expected[k].shape), tuple(state[k].shape))
        for k in expected
        if k in state and tuple(expected[k].shape) != tuple(state[k].shape)
    ]
    problems = []
    hints = []
    if shapes:
        problems.append(
            "shape mismatch: " + "; ".join(f"{k} expected {list(e)} found {list(f)}" for k, e, f in shapes[:6])
            + (f"; … ({len(shapes)} in all)" if len(shapes) > 6 else "")
        )
        head = [s for s in shapes if len(s[1]) == 2 and s[1][1:] == s[2][1:]]
        if head and len(shapes) <= 2:
            k, e, f = head[0]
            hints.append(
                f"the checkpoint has {f[0]} classes but the model was built with num_classes={e[0]}: "
                f"create the model with num_classes={f[0]}, or load the checkpoint trained for {e[0]} classes"
            )
    if missing:
        problems.append(f"{len(missing)} key(s) missing from the checkpoint: {_fmt_keys(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected key(s) in the checkpoint: {_fmt_keys(unexpected)}")
    if missing or unexpected:
        hints.append(
            "the checkpoint is for another architecture: the CIFAR ResNet-18 uses the authors' names "
            "(conv1, conv2_x … conv5_x with residual_function/shortcut, fc), torchvision's ResNet-50 "
            "uses conv1, layer1 … layer4, fc"
        )
    if problems:
        raise CheckpointMismatchError(
            f"{source} does not fit {type(model).__name__}: " + " | ".join(problems)
            + ". What to do: " + "; ".join(hints) + "."
        )
    model.load_state_dict(dict(state), strict=True)


def status(verify: bool = False) -> list[dict[str, Any]]:
    """One row per registered checkpoint: where it was found on the search path (or where it
    would be written), whether it is there, its sidecar's SHA-256 and recorded clean test
    accuracy (None for files without a trainer's sidecar). Reads sidecars only, unless
    ``verify``: then ``verified`` says whether the file's SHA-256 equals its sidecar's."""
    rows = []
    for name, entry in REGISTRY.items():
        path = checkpoint_path(name)
        side = read_sidecar(path) if path.is_file() else None
        row = {
            "checkpoint": name, "architecture": entry.architecture, "classes": entry.num_classes,
            "recipe": entry.recipe, "present": path.is_file(),
            "clean_test_accuracy": (side or {}).get("clean_test_accuracy"), "path": str(path),
            "sha256": (side or {}).get("sha256"),
        }
        if verify:
            row["verified"] = (path.is_file() and side is not None and "sha256" in side
                               and sha256_bytes(path.read_bytes()) == side["sha256"] and _package_intact(name))
        rows.append(row)
    return rows


def _package_intact(name: str) -> bool:
    """Whether checkpoint ``name``, if it is package data (the built-in benchmark's networks), is
    the file the package's ``SHA256SUMS`` records: its sidecar could have been changed with it."""
    from stamplib.data import builtin_cifar10

    if name not in builtin_cifar10.CHECKPOINTS:
        return True
    try:
        builtin_cifar10.verify(names=(f"{name}.pt", f"{name}.json"))
    except builtin_cifar10.PackageDataError:
        return False
    return True


def status_lines(verify: bool = False) -> list[str]:
    """:func:`status` as ``doctor`` (``verify``: the SHA-256 checked against each sidecar) and
    ``checkpoints list`` print it, one line per registered checkpoint."""
    if not verify:
        return [f"{row['checkpoint']:26s} {row['classes']:4d} classes  {row['path'] if row['present'] else 'missing'}"
                for row in status()]
    lines = []
    for row in status(verify=True):
        if not row["present"]:
            state = "missing   (the built-in one trains on first use)" if row["recipe"] is None else "missing  "
        elif row["verified"]:
            accuracy = row["clean_test_accuracy"]
            state = "found    " + (f" clean acc {100 * accuracy:.2f}%" if accuracy is not None else "")
        elif row["sha256"] is None and _package_intact(row["checkpoint"]):
            state = "found     no sidecar yet: its SHA-256 is recorded on first use"
        else:
            state = "REFUSED   its SHA-256 differs from its sidecar's or the package's"
        lines.append(f"  {row['checkpoint']:26s} {state}  {row['path'] if row['present'] else ''}")
    return lines


def import_dir(folder: str | Path) -> list[Path]:
    """Copy every registered checkpoint found in ``folder`` (``<name>.pt`` with its sidecar)
    into the writable checkpoints folder, each only after its SHA-256 equals its sidecar's;
    returns the copied files. A file without a sidecar or with a wrong hash is refused."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder; name the folder that holds <name>.pt and <name>.json")
    found = [folder / f"{name}.pt" for name in REGISTRY if (folder / f"{name}.pt").is_file()]
    if not found:
        raise MissingCheckpointError(f"{folder} holds none of the registered checkpoints ({', '.join(REGISTRY)})")
    copied = []
    for source in found:
        meta = read_sidecar(source)
        if meta is None or "sha256" not in meta:
            raise ChecksumMismatchError(
                f"{source} has no sidecar {sidecar_path(source)} with its SHA-256, so it cannot be checked; "
                "copy the file by hand into the checkpoints folder (its hash is recorded on first use)"
            )
        payload = source.read_bytes()
        _verify(source, payload, meta)
        target = paths.checkpoints_dir() / source.name
        paths.atomic_write_bytes(target, payload)  # the weights first: a sidecar never vouches for a missing file
        paths.atomic_write_bytes(sidecar_path(target), json.dumps(meta, indent=2).encode())
        copied.append(target)
    return copied
