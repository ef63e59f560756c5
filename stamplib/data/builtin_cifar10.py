"""The built-in CIFAR-10 benchmark: real photographs and compact source networks as package data.

The quick profile runs on it offline, with nothing to download: the first 200 test and the first
200 training photographs of every class of the JPEG CIFAR-10 (shared/data; file-name order
within a class), kept as their original JPEG bytes, and compact ResNets trained on all
50,000 JPEG training images (``ResNetTiny_10_jpeg`` for the 10 classes, ``ResNetTiny_8_jpeg``
for classes 0–7, the class-split setting), each as five source networks trained with seeds 0–4
(:data:`NETWORKS`; seed k >= 1 is ``<name>_seed<k>``). Every file's SHA-256 is in ``SHA256SUMS``; a file
that does not match is refused with the way to restore it. ``README.md`` in the folder gives
the provenance and the terms.

It is *not* the paper's benchmark: 2,000 test photographs (10 × 200), not 10,000, and networks
of 0.3 M parameters (clean accuracy in their sidecars), not the ~94 % ResNet-18. Its numbers
show how the methods rank on real images at teaching scale; the reference run
(``results/reference``) is the larger evidence.

``python -m stamplib maintain build-benchmark --data-root DIR`` rebuilds the folder from the JPEG
CIFAR-10 and the trained checkpoints (``train-source --recipe compact --seed k``).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

FOLDER = Path(__file__).resolve().parent / "builtin_cifar10"
IMAGES_FILE = "cifar10_subset.npz"
#: The compact source networks' registered names; network k >= 1 of each (trained with seed k)
#: ships as ``<name>_seed<k>`` (:func:`stamplib.models.checkpoints.network_name`).
BASE_CHECKPOINTS = ("ResNetTiny_10_jpeg", "ResNetTiny_8_jpeg")
#: The networks that ship: 0–4 of each, so that a claim is decided over five source networks.
NETWORKS = (0, 1, 2, 3, 4)
CHECKPOINTS = tuple(name if k == 0 else f"{name}_seed{k}" for k in NETWORKS for name in BASE_CHECKPOINTS)
SUMS_FILE = "SHA256SUMS"
PER_CLASS = 200  # test and training photographs of each class
#: The budget for everything in the folder (DEVELOPERS.md: at most 20 MB of package data).
MAX_BYTES = 20_000_000


class PackageDataError(ValueError):
    """A file of the built-in benchmark is missing or differs from its recorded SHA-256 (a
    ValueError, so the command line reports it in one line with the fix)."""


def recorded_sums(folder: Path | None = None) -> dict[str, str]:
    """File name → SHA-256, as ``SHA256SUMS`` (``sha256sum`` format) records them."""
    folder = folder or FOLDER
    sums = folder / SUMS_FILE
    if not sums.is_file():
        raise PackageDataError(f"{sums} is missing: reinstall stamplib (or `git checkout -- {folder}`)")
    entries = (line.split() for line in sums.read_text().splitlines() if line.strip())
    return {name.lstrip("*"): digest for digest, name in entries}


def verify(folder: Path | None = None, names: tuple[str, ...] | None = None) -> None:
    """Check the SHA-256 of ``names`` (default: every recorded file) in ``folder`` (default: the
    package's) against its ``SHA256SUMS``."""
    from stamplib.data.downloads import file_digest

    folder = folder or FOLDER
    sums = recorded_sums(folder)
    for name in names or tuple(sums):
        if name not in sums:
            raise PackageDataError(f"{folder / SUMS_FILE} records no SHA-256 for {name}")
        path = folder / name
        if not path.is_file():
            raise PackageDataError(f"{path} is missing: reinstall stamplib (or `git checkout -- {path}`)")
        if (found := file_digest(path, "sha256")) != sums[name]:
            raise PackageDataError(
                f"{path} has SHA-256 {found[:16]}…, {SUMS_FILE} records {sums[name][:16]}…: the file was "
                f"changed; restore it with `git checkout -- {path}` (or reinstall stamplib)"
            )


def problems(folder: Path | None = None) -> dict[str, str | None]:
    """Every file ``SHA256SUMS`` records (in ``folder``, default the package's) → why it cannot be
    used (missing, or its SHA-256 differs: :func:`verify`'s message), or None when it is intact.
    What ``doctor`` reports; reads every file once."""
    folder = folder or FOLDER
    try:
        names = tuple(recorded_sums(folder))
    except PackageDataError as err:
        return {SUMS_FILE: str(err)}
    found: dict[str, str | None] = {}
    for name in names:
        try:
            verify(folder, (name,))
            found[name] = None
        except PackageDataError as err:
            found[name] = str(err)
    return found


def checkpoint_file(name: str, folder: Path | None = None) -> Path:
    """A shipped source network, SHA-256-verified (``.pt`` and its ``.json`` sidecar)."""
    folder = folder or FOLDER
    if name not in CHECKPOINTS:
        raise ValueError(f"{name!r} is no built-in checkpoint; they are {', '.join(CHECKPOINTS)}")
    if f"{name}.pt" not in recorded_sums(folder):
        raise PackageDataError(
            f"{name} is not shipped in {folder} yet: train it with `python -m stamplib train-source --dataset "
            f"{'cifar10_jpeg_8_2' if '_8_' in name else 'cifar10_jpeg'} --recipe compact --seed "
            f"{name.rpartition('_seed')[2]} --data-root DIR` (and its pair), then `python -m stamplib maintain "
            f"build-benchmark "
            "--data-root DIR`")
    verify(folder, (f"{name}.pt", f"{name}.json"))
    return folder / f"{name}.pt"


@dataclass(frozen=True)
class BuiltinCifar10:
    """The decoded photographs, each split in class-interleaved order (first of every class,
    then the second of every class, …: the first N cover every class)."""

    test_images: torch.Tensor  # uint8 [2000, 32, 32, 3]
    test_labels: torch.Tensor  # int64, 0–9
    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_files: tuple[str, ...]  # "<class>/<file>.jpg" in the JPEG CIFAR-10's test split
    train_files: tuple[str, ...]


def _decode_all(blob: np.ndarray, offsets: np.ndarray) -> torch.Tensor:
    from stamplib.data.loaders import _decode

    payload = blob.tobytes()
    images = [_decode(io.BytesIO(payload[a:b]), None, None) for a, b in zip(offsets[:-1], offsets[1:])]
    return torch.from_numpy(np.stack(images))


@lru_cache(maxsize=2)
def load(folder: Path | None = None) -> BuiltinCifar10:
    """The built-in photographs (verified, decoded once per process: about 0.5 s)."""
    folder = folder or FOLDER
    verify(folder, (IMAGES_FILE,))
    with np.load(folder / IMAGES_FILE, allow_pickle=False) as z:
        parts = {split: (_decode_all(z[f"{split}_jpeg"], z[f"{split}_offsets"]),
                         torch.from_numpy(z[f"{split}_labels"].astype(np.int64)),
                         tuple(np.char.decode(z[f"{split}_files"], "ascii").tolist()))
                 for split in ("test", "train")}
    return BuiltinCifar10(*parts["test"][:2], *parts["train"][:2], parts["test"][2], parts["train"][2])


# ------------------------------------------------------------------------------ building


def _pick(folder: Path, per_class: int) -> tuple[list[Path], list[int]]:
    """The first ``per_class`` files of every class folder (sorted names), class-interleaved."""
    from stamplib.data.registry import interleave_classes

    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    if len(classes) != 10:
        raise FileNotFoundError(f"{folder} should hold the 10 CIFAR-10 class folders, found {classes}")
    files, labels = [], []
    for label, name in enumerate(classes):
        chosen = sorted((folder / name).glob("*.jpg"))[:per_class]
        if len(chosen) < per_class:
            raise FileNotFoundError(f"{folder / name} holds {len(chosen)} JPEG files, fewer than {per_class}")
        files += chosen
        labels += [label] * per_class
    order = interleave_classes(torch.tensor(labels)).tolist()
    return [files[i] for i in order], [labels[i] for i in order]


def _pack(folder: Path, per_class: int) -> dict[str, np.ndarray]:
    files, labels = _pick(folder, per_class)
    payloads = [f.read_bytes() for f in files]
    offsets = np.cumsum([0, *map(len, payloads)]).astype(np.int64)
    return {
        "jpeg": np.frombuffer(b"".join(payloads), dtype=np.uint8),
        "offsets": offsets,
        "labels": np.asarray(labels, dtype=np.uint8),
        "files": np.asarray([f"{f.parent.name}/{f.name}".encode() for f in files]),  # ASCII: 4× smaller
    }


def _pair(name: str) -> tuple[str, str]:
    """The two settings' networks of the same seed as ``name`` (a network ships with its pair)."""
    suffix = name.removeprefix("ResNetTiny_10_jpeg").removeprefix("ResNetTiny_8_jpeg")
    return tuple(f"{base}{suffix}" for base in BASE_CHECKPOINTS)  # type: ignore[return-value]


def _same_arrays(path: Path, arrays: dict[str, np.ndarray]) -> bool:
    """Whether the ``.npz`` at ``path`` holds exactly ``arrays`` (names, dtypes and values)."""
    if not path.is_file():
        return False
    with np.load(path, allow_pickle=False) as z:
        return set(z.files) == set(arrays) and all(
            z[k].dtype == v.dtype and np.array_equal(z[k], v) for k, v in arrays.items())


def build(photographs: Path, checkpoint_dir: Path, out: Path | None = None, per_class: int = PER_CLASS) -> list[Path]:
    """Write the benchmark's folder (default: the package's): the photographs from the JPEG
    CIFAR-10 ImageFolder ``photographs`` (holding ``train/`` and ``test/``), the compact
    checkpoints (:data:`CHECKPOINTS`) with their sidecars from ``checkpoint_dir`` (where
    ``train-source`` wrote them), and ``SHA256SUMS``. An images file that already holds the same
    arrays is kept as it is, so that its SHA-256 (which records name) does not change with the
    zip's time stamps. Refuses a folder over :data:`MAX_BYTES`. Returns the files written."""
    from stamplib import paths
    from stamplib.data.downloads import file_digest

    out = out or FOLDER
    arrays = {f"{split}_{key}": value
              for split in ("test", "train")
              for key, value in _pack(photographs / split, per_class).items()}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # JPEG bytes do not compress further
    # Network 0 of both settings is the benchmark; networks 1–4 ship as their pairs are trained.
    found = [n for n in CHECKPOINTS if n in BASE_CHECKPOINTS or all(
        (checkpoint_dir / f"{m}{s}").is_file() for m in _pair(n) for s in (".pt", ".json"))]
    files = [checkpoint_dir / f"{n}{s}" for n in found for s in (".pt", ".json")]
    if missing := [f for f in files if not f.is_file()]:
        raise FileNotFoundError(
            f"missing {', '.join(map(str, missing))}: train them first with `python -m stamplib train-source "
            "--dataset cifar10_jpeg --recipe compact --seed K --data-root DIR` for K in 0–4 (and --dataset "
            "cifar10_jpeg_8_2)"
        )
    total = len(buffer.getvalue()) + sum(f.stat().st_size for f in files)
    if total > MAX_BYTES:
        raise ValueError(f"the benchmark would take {total:,} bytes, over the {MAX_BYTES:,} allowed: fewer images")
    out.mkdir(parents=True, exist_ok=True)
    if not _same_arrays(out / IMAGES_FILE, arrays):
        paths.atomic_write_bytes(out / IMAGES_FILE, buffer.getvalue())
    written = [out / IMAGES_FILE]
    for source in files:
        if source.resolve() != (out / source.name).resolve():
            paths.atomic_write_bytes(out / source.name, source.read_bytes())
        written.append(out / source.name)
    paths.atomic_write_bytes(out / SUMS_FILE,
                             "".join(f"{file_digest(p, 'sha256')}  {p.name}\n" for p in written).encode())
    load.cache_clear()
    return [*written, out / SUMS_FILE]
