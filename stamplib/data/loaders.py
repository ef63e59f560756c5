"""Dataset loaders: every dataset of protocol.md §1 as uint8 N×H×W×3 tensors plus labels.

Every loader reads the data root it is given (the edge's, :class:`stamplib.paths.RunContext`;
none is an error, never a default place), in the on-disk layouts of the official releases:

=====================  ====================================================================
CIFAR-10 / 100         ``cifar-10-batches-py/`` / ``cifar-100-python/`` (torchvision's pickles)
CIFAR-10-C / 100-C     ``CIFAR-10-C/<corruption>.npy`` + ``labels.npy`` (Hendrycks: 5 severity
                       blocks of 10,000 rows, severity 1 first)
ImageNet-C             ``ImageNet-C/<corruption>/<severity>/<wnid>/*.JPEG``
SVHN                   ``svhn/test_32x32.mat`` (torchvision)
LSUN (resize)          ``LSUN_resize/`` (ODIN release; image folder)
Tiny-ImageNet-C        ``Tiny-ImageNet-C/<corruption>/<severity>/<wnid>/*.JPEG`` (Hendrycks)
Tiny-ImageNet (clean)  ``tiny-imagenet-200/val/`` (only to generate Tiny-ImageNet-C ourselves)
Textures (DTD)         ``dtd/images/<class>/*.jpg``
Places365              ``places365/`` (an ImageFolder; torchvision's ``val_256`` works)
=====================  ====================================================================

Two generic offline sources: an ``.npz`` with ``images`` (uint8 N×H×W×3) and ``labels``, and
an ImageFolder directory (sorted class folders, sorted files — torchvision's order), decoded
once with Pillow and cached as ``.npz`` (atomically written, keyed by the file list, sizes and
modification times). ImageNet-C, too large for memory, is cached as a memory-mapped ``.npy``
instead (:func:`load_mapped_folder`).

Order matters (protocol.md §1.1: outlier sets are cut to their *first* N images), so every
loader returns images in the documented order and never shuffles.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import warnings
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from stamplib import paths, validation
from stamplib.data import downloads

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

#: Seed of the Tiny-ImageNet-C order (protocol.md §1.1: a random permutation made once and
#: cached; the authors drew it with ``torch.randperm`` under their RNG_SEED 2020).
TINY_PERMUTATION_SEED = 2020


class DatasetNotFound(FileNotFoundError):
    """Dataset files are missing; the message says where they go and how to get them."""


class DatasetFormatError(ValueError):
    """Dataset files exist but have the wrong format, shape, dtype or are truncated."""


@dataclass(frozen=True)
class ImageSet:
    images: torch.Tensor  # uint8 [N, H, W, 3]
    labels: torch.Tensor  # int64 [N]
    classes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert self.images.dtype == torch.uint8 and self.images.dim() == 4 and self.images.shape[3] == 3
        assert self.labels.shape == (self.images.shape[0],)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def select(self, mask: torch.Tensor) -> ImageSet:
        return ImageSet(self.images[mask], self.labels[mask], self.classes)


def _root(data_root: str | os.PathLike | None, needed_by: str) -> Path:
    return paths.given_data_root(data_root, needed_by)


def _to_set(images: np.ndarray, labels: np.ndarray, classes: Sequence[str] = ()) -> ImageSet:
    return ImageSet(
        torch.from_numpy(np.ascontiguousarray(images)),
        torch.from_numpy(np.asarray(labels, dtype=np.int64).copy()),
        tuple(classes),
    )


# --------------------------------------------------------------------------- validation


def check_images(arr: np.ndarray, where: str | os.PathLike) -> np.ndarray:
    """Validate a uint8 N×H×W×3 array; errors say what is wrong and how to fix it."""
    if not isinstance(arr, np.ndarray):
        raise DatasetFormatError(f"{where}: expected a numpy array of images, got {type(arr).__name__}")
    if arr.ndim == 4 and arr.shape[1] == 3 and arr.shape[3] != 3:
        raise DatasetFormatError(
            f"{where}: images have shape {arr.shape}, which looks like N×3×H×W; store them "
            "channels-last (N×H×W×3), e.g. arr.transpose(0, 2, 3, 1)"
        )
    if arr.ndim == 3 or (arr.ndim == 4 and arr.shape[3] == 1):
        raise DatasetFormatError(
            f"{where}: images have shape {arr.shape}, which looks grey-scale; methods need RGB "
            "N×H×W×3: repeat the channel, e.g. np.repeat(arr.reshape(*arr.shape[:3], 1), 3, axis=3)"
        )
    if arr.ndim == 4 and arr.shape[1] == 1 and arr.shape[3] != 3:
        raise DatasetFormatError(
            f"{where}: images have shape {arr.shape}, which looks like grey-scale N×1×H×W; store RGB "
            "channels-last: np.repeat(arr.transpose(0, 2, 3, 1), 3, axis=3)"
        )
    if arr.ndim != 4 or arr.shape[3] != 3:
        raise DatasetFormatError(f"{where}: images must be N×H×W×3 RGB, got shape {arr.shape}")
    if arr.dtype != np.uint8:
        hint = "cast to uint8"
        is_float = np.issubdtype(arr.dtype, np.floating)
        if arr.size and (arr.min() < 0 or arr.max() > 255):
            hint = f"values span [{arr.min()}, {arr.max()}], outside 0..255: rescale, then cast to uint8"
        elif is_float and arr.size and float(np.nanmax(arr)) <= 1.0:
            hint = "values look like floats in [0, 1]: store (x * 255).round().astype(np.uint8)"
        elif is_float:
            hint = "values look like floats in 0..255: store x.round().astype(np.uint8)"
        raise DatasetFormatError(f"{where}: images must be uint8 (0..255), got {arr.dtype}; {hint}")
    return arr


def check_labels(
    labels: np.ndarray, n: int, where: str | os.PathLike, num_classes: int | None = None
) -> np.ndarray:
    """Validate ``n`` integer class labels (in ``0 .. num_classes−1`` when given)."""
    labels = np.asarray(labels)
    if labels.ndim == 2 and 1 in labels.shape:
        labels = labels.reshape(-1)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise DatasetFormatError(f"{where}: expected {n} labels (one per image), got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise DatasetFormatError(f"{where}: labels must be integers, got {labels.dtype}")
    if n and labels.min() < 0:
        raise DatasetFormatError(f"{where}: labels must be ≥ 0 (outlier labels are set by the stream)")
    if n and num_classes is not None and labels.max() >= num_classes:
        raise DatasetFormatError(
            f"{where}: label {labels.max()} is out of range for {num_classes} classes (0..{num_classes - 1}); "
            "the labels belong to another dataset or the file is damaged: extract or download it again"
        )
    return labels.astype(np.int64)


def _missing(what: Path, resource: str | None, data_root: Path, extra: str = "") -> DatasetNotFound:
    hint = downloads.missing_hint(resource, data_root) if resource else f"{what} is missing"
    return DatasetNotFound(f"{hint} (data root: --data-root or $STAMPLIB_DATA_ROOT){'. ' + extra if extra else ''}")


def _ensure(resource: str, target: Path, root: Path, download: bool, extra: str = "") -> None:
    """Make ``target`` exist: fetch ``resource`` if allowed (an archive already placed in the
    data root is unpacked without network access), else raise with the fix."""
    if target.exists():
        return
    archive = root / downloads.RESOURCES[resource].filename
    if download or archive.exists():
        downloads.fetch(resource, root, download_missing=download)
    if not target.exists():
        raise _missing(target, resource, root, extra)


# --------------------------------------------------------------------------- generic sources


def _looks_like(head: bytes) -> str:
    """What a file that is no zip archive looks like, from its first bytes."""
    if not head:
        return "it is empty"
    if head.startswith(b"\x93NUMPY"):
        return "it is a single .npy array"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 3:  # not merely a character cut at the end of the bytes read
            return "it is binary, not a zip archive"
    return "it looks like text" if b"\x00" not in head else "it is binary, not a zip archive"


def check_npz(path: str | os.PathLike) -> Path:
    """``path`` if it is an .npz archive (a zip file); else one DatasetNotFound or
    DatasetFormatError saying what it is and what to write. Checked before ``np.load``, which
    would read text as a pickle and refuse it with a message about ``allow_pickle``."""
    path = Path(path)
    if not path.is_file():
        raise DatasetNotFound(
            f"{path} does not exist; write one with np.savez(path, images=uint8 N×H×W×3, labels=int N)"
        )
    with open(path, "rb") as fh:
        head = fh.read(512)
    if not head.startswith(b"PK\x03\x04"):
        raise DatasetFormatError(
            f"{path} is not an .npz archive ({_looks_like(head)}); expected one holding 'images' (uint8 "
            "N×H×W×3) and 'labels' (int N), as np.savez(path, images=..., labels=...) writes")
    return path


def load_npz(path: str | os.PathLike, *, require_labels: bool = True) -> ImageSet:
    """An ``.npz`` holding ``images`` (uint8 N×H×W×3) and ``labels`` (int, N)."""
    path = check_npz(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            if "images" not in z.files:
                raise DatasetFormatError(f"{path}: no 'images' array (found {z.files})")
            images = check_images(z["images"], path)
            if "labels" in z.files:
                labels = check_labels(z["labels"], images.shape[0], path)
            elif require_labels:
                raise DatasetFormatError(f"{path}: no 'labels' array (found {z.files}); ID sets need labels")
            else:
                labels = np.zeros(images.shape[0], dtype=np.int64)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise DatasetFormatError(f"{path} is truncated or not an .npz ({exc}); write it again") from exc
    except ValueError as exc:
        if isinstance(exc, DatasetFormatError):
            raise
        raise DatasetFormatError(f"{path} is damaged ({exc}); write it again") from exc
    return _to_set(images, labels)


def list_image_folder(root: str | os.PathLike) -> tuple[list[Path], list[int], list[str]]:
    """Files of an ImageFolder in torchvision's order: sorted class folders, each walked in
    sorted order with sorted file names. A folder holding images directly is one class ''."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetNotFound(f"image folder {root} does not exist")
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    files: list[Path] = []
    labels: list[int] = []
    if classes:
        for index, cls in enumerate(classes):
            for dirpath, dirnames, filenames in sorted(os.walk(root / cls, followlinks=True)):
                dirnames.sort()
                for fname in sorted(filenames):
                    if fname.lower().endswith(IMAGE_EXTENSIONS):
                        files.append(Path(dirpath) / fname)
                        labels.append(index)
    else:
        files = [root / f for f in sorted(os.listdir(root)) if f.lower().endswith(IMAGE_EXTENSIONS)]
        labels = [0] * len(files)
        classes = [""]
    if not files:
        raise DatasetNotFound(f"image folder {root} holds no images ({', '.join(IMAGE_EXTENSIONS)})")
    present = set(labels)
    empty = [c for i, c in enumerate(classes) if i not in present]
    if empty:
        # An empty class folder marks a partial copy (and a class no sample can have): refuse
        # it, as torchvision's ImageFolder does, rather than evaluate on a silently smaller set.
        shown = ", ".join(empty[:6]) + (f", … ({len(empty)} in all)" if len(empty) > 6 else "")
        raise DatasetFormatError(
            f"image folder {root}: class folder(s) {shown} hold no images ({', '.join(IMAGE_EXTENSIONS)}); "
            "the copy is incomplete: copy or extract those images again, or delete the empty folders "
            "if those classes are meant to be absent (class indices are the sorted folder names)"
        )
    return files, labels, classes


def _decode(path: Path, resize: int | None, center_crop: int | None) -> np.ndarray:
    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            if center_crop is not None and im.size != (center_crop, center_crop):
                w, h = im.size
                left, top = (w - center_crop) // 2, (h - center_crop) // 2
                if left < 0 or top < 0:
                    raise DatasetFormatError(f"{path} is {w}×{h}, smaller than the {center_crop} crop")
                im = im.crop((left, top, left + center_crop, top + center_crop))
            if resize is not None and im.size != (resize, resize):
                # torchvision's Resize((s, s)) on a PIL image = PIL bilinear (protocol.md §1.3).
                im = im.resize((resize, resize), Image.BILINEAR)
            return np.asarray(im, dtype=np.uint8)
    except (OSError, SyntaxError) as exc:
        raise DatasetFormatError(f"{path} cannot be decoded ({exc}); the file is truncated or not an image") from exc


def _in_memory(shape: tuple[int, ...]) -> np.ndarray:
    return np.empty(shape, np.uint8)


def decode_images(
    files: Sequence[Path], *, resize: int | None = None, center_crop: int | None = None, workers: int | None = None,
    allocate: Callable[[tuple[int, ...]], np.ndarray] = _in_memory,
) -> np.ndarray:
    """Decode image files into one uint8 N×H×W×3 array (Pillow; threads, as decoding releases
    the GIL), made by ``allocate(shape)`` (a memory-mapped file, say). All images must end up
    the same size — pass ``resize`` otherwise."""
    if not files:
        return np.zeros((0, resize or 0, resize or 0, 3), np.uint8)
    first = _decode(files[0], resize, center_crop)
    # Preallocated: ImageNet-C is 7.5 GB per corruption, a list + np.stack would double that.
    out = allocate((len(files), *first.shape))
    out[0] = first

    def put(i: int) -> None:
        arr = _decode(files[i], resize, center_crop)
        if arr.shape != first.shape:
            raise DatasetFormatError(
                f"{files[i]} is {arr.shape[1]}×{arr.shape[0]}, {files[0]} is {first.shape[1]}×{first.shape[0]}: "
                "images have different sizes; pass a resize size"
            )
        out[i] = arr

    with ThreadPoolExecutor(workers or min(4, os.cpu_count() or 1)) as pool:
        list(pool.map(put, range(1, len(files))))
    return out


def _fingerprint(files: Sequence[Path], root: Path, extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(root)}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _cache_path(root: Path, tag: str, suffix: str, data_root: str | os.PathLike | None) -> Path | None:
    """Next to the folder if that is writable, else under ``<data_root>/cache``; None where
    neither can be (a read-only folder and no data root given)."""
    sibling = root.with_name(f"{root.name}.stamplib{tag}{suffix}")
    if os.access(root.parent, os.W_OK):
        return sibling
    if not data_root:
        return None
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return Path(data_root) / "cache" / f"{root.name}-{key}{tag}{suffix}"


def atomic_save_npz(path: Path, **arrays: np.ndarray) -> None:
    paths.atomic_save(path, lambda fh: np.savez(fh, **arrays))


def atomic_save_npy(path: Path, array: np.ndarray) -> None:
    paths.atomic_save(path, lambda fh: np.save(fh, array, allow_pickle=False))


def load_image_folder(
    root: str | os.PathLike,
    *,
    resize: int | None = None,
    center_crop: int | None = None,
    limit: int | None = None,
    order: Sequence[int] | None = None,
    cache: bool = True,
    data_root: str | os.PathLike | None = None,
) -> ImageSet:
    """An ImageFolder as uint8 images in torchvision's order (optionally re-ordered by
    ``order``, then cut to the first ``limit``). With ``cache`` the full decoded folder is
    stored as ``<folder>.stamplib<tag>.npz`` (under ``<data_root>/cache`` where the folder's
    parent is read-only; not at all without a data root) and reused while the files are
    unchanged."""
    root = Path(root)
    files, labels, classes = list_image_folder(root)
    idx = np.asarray(order if order is not None else range(len(files)), dtype=np.int64)
    if order is not None and sorted(idx.tolist()) != list(range(len(files))):
        raise DatasetFormatError(f"{root}: the order has {len(idx)} entries for {len(files)} images")
    tag = "".join(f"-{k}{v}" for k, v in (("r", resize), ("c", center_crop)) if v is not None)
    cache_file = _cache_path(root, tag, ".npz", data_root) if cache else None
    fingerprint = _fingerprint(files, root, tag) if cache else ""
    if cache_file is not None and cache_file.is_file():
        try:
            with np.load(cache_file, allow_pickle=False) as z:
                if str(z["fingerprint"]) == fingerprint:
                    sel = idx if limit is None else idx[:limit]
                    return _to_set(z["images"][sel], z["labels"][sel], classes)
        except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError):
            pass  # a stale or damaged cache is rebuilt below
    if limit is not None and limit < len(files):
        sel = idx[:limit]
        images = decode_images([files[i] for i in sel], resize=resize, center_crop=center_crop)
        return _to_set(images, np.asarray(labels)[sel], classes)
    images = decode_images(files, resize=resize, center_crop=center_crop)
    label_arr = np.asarray(labels, dtype=np.int64)
    if cache_file is not None:
        try:
            atomic_save_npz(cache_file, images=images, labels=label_arr, fingerprint=np.array(fingerprint))
        except OSError as exc:
            warnings.warn(f"could not cache {root} as {cache_file}: {exc}", stacklevel=2)
    sel = idx if limit is None else idx[:limit]
    return _to_set(images[sel], label_arr[sel], classes)


def _open_mapped(path: Path, n: int) -> np.ndarray | None:
    """The decoded images cached at ``path``, memory-mapped, or None (absent or damaged).
    Copy-on-write ("c"): torch can wrap the array, and nothing ever writes back to the file."""
    if not path.is_file():
        return None
    try:
        images = np.load(path, mmap_mode="c", allow_pickle=False)
    except (ValueError, OSError, EOFError):
        return None
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[0] != n or images.shape[3] != 3:
        return None
    return images


def _decode_to_file(path: Path, files: Sequence[Path], resize: int | None, center_crop: int | None) -> None:
    """Decode straight into a memory-mapped ``.npy`` written atomically: the decoded set never
    sits in memory as a whole (ImageNet-C: 7.5 GB a corruption)."""

    def write(tmp: Path) -> None:
        def allocate(shape: tuple[int, ...]) -> np.ndarray:
            return np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=shape)

        decode_images(files, resize=resize, center_crop=center_crop, allocate=allocate).flush()

    paths.atomic_write(path, write)


def load_mapped_folder(
    root: str | os.PathLike, *, resize: int | None = None, center_crop: int | None = None, limit: int | None = None,
    data_root: str | os.PathLike | None = None,
) -> ImageSet:
    """An ImageFolder as :func:`load_image_folder` reads it (no re-ordering), its images
    memory-mapped from a decoded copy on disk: ``<folder>.stamplib<tag>-<fingerprint>.npy``
    (uint8 N×H×W×3), written once and atomically, named by the file list, sizes and
    modification times, so a later run decodes nothing and a changed folder is decoded again.
    Pages are read as the images are used and belong to the page cache, which the system
    reclaims. Where the folder's parent is read-only the copy goes under ``<data_root>/cache``;
    where nothing can be written, the folder is decoded into memory (with a warning)."""
    root = Path(root)
    files, labels, classes = list_image_folder(root)
    tag = "".join(f"-{k}{v}" for k, v in (("r", resize), ("c", center_crop)) if v is not None)
    fingerprint = _fingerprint(files, root, tag)[:16]
    path = _cache_path(root, f"{tag}-{fingerprint}", ".npy", data_root)
    images = _open_mapped(path, len(files)) if path is not None else None
    if images is None:
        try:
            if path is None:
                raise OSError(f"{root.parent} is read-only and no data root was given for a copy")
            _decode_to_file(path, files, resize, center_crop)
        except OSError as exc:
            warnings.warn(f"could not cache {root} as {path} ({exc}); decoding it into memory", stacklevel=2)
            images = decode_images(files, resize=resize, center_crop=center_crop)
        else:
            for stale in path.parent.glob(path.name.replace(fingerprint, "*")):  # the folder's older copies
                if stale != path:
                    stale.unlink(missing_ok=True)
            images = _open_mapped(path, len(files))
            if images is None:
                raise DatasetFormatError(f"{path} was just written but cannot be read back; delete it and run again")
    n = len(files) if limit is None else min(limit, len(files))
    return ImageSet(torch.from_numpy(images[:n]), torch.tensor(labels[:n], dtype=torch.int64), tuple(classes))


# --------------------------------------------------------------------------- CIFAR


_CIFAR = {
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], b"labels"),
    "cifar100": ("cifar-100-python", ["train"], ["test"], b"fine_labels"),
}


@lru_cache(maxsize=8)
def _read_cifar_batch(path: str, mtime: int, label_key: bytes) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as fh:
            # The official format is a pickle (as torchvision reads it); only load trusted files.
            batch = pickle.load(fh, encoding="bytes")
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise DatasetFormatError(f"{path} is truncated or not a CIFAR batch ({exc}); delete it and download "
                                 f"again") from exc
    try:
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        labels = np.asarray(batch[label_key])
    except (KeyError, TypeError) as exc:
        raise DatasetFormatError(f"{path}: not a CIFAR python batch (missing {exc})") from exc
    if data.ndim != 2 or data.shape[1] != 3072 or data.shape[0] != labels.shape[0]:
        raise DatasetFormatError(f"{path}: data has shape {data.shape}, expected N×3072 with N labels")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


def load_cifar(name: str, split: str, data_root: str | os.PathLike, *, download: bool = False) -> ImageSet:
    """CIFAR-10 / CIFAR-100 (``name`` = cifar10 | cifar100) in torchvision's on-disk format;
    CIFAR-100 labels are the fine labels."""
    if name not in _CIFAR or split not in ("train", "test"):
        raise ValueError(f"unknown CIFAR set {name!r}/{split!r}")
    root = _root(data_root, name)
    folder_name, train_files, test_files, label_key = _CIFAR[name]
    folder = root / folder_name
    files = [folder / f for f in (train_files if split == "train" else test_files)]
    if not all(f.is_file() for f in files):
        if download:
            downloads.fetch(name, root)
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise _missing(folder, name, root, f"missing in it: {', '.join(missing)}")
    parts = [_read_cifar_batch(str(f), f.stat().st_mtime_ns, label_key) for f in files]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    return _to_set(images, check_labels(labels, images.shape[0], folder, 10 if name == "cifar10" else 100))


_CIFAR_C = {"cifar10": ("CIFAR-10-C", "cifar10_c"), "cifar100": ("CIFAR-100-C", "cifar100_c")}


def _open_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise DatasetFormatError(
            f"{path} is truncated or not a .npy array ({exc}); delete it and extract/download it again"
        ) from exc


@lru_cache(maxsize=6)
def _cifar_c_block(
    npy: str, labels_npy: str, severity: int, stamp: tuple[int, int], num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    arr = _open_npy(Path(npy))
    if arr.ndim != 4 or arr.shape[1:] != (32, 32, 3) or arr.dtype != np.uint8:
        if arr.dtype != np.uint8 or arr.ndim != 4 or arr.shape[3] != 3:
            check_images(arr, npy)  # names the layout or dtype problem and its fix
        raise DatasetFormatError(f"{npy}: expected uint8 N×32×32×3 (CIFAR-C), got {arr.dtype} {arr.shape}")
    rows = arr.shape[0]
    if rows % 5:
        raise DatasetFormatError(f"{npy}: {rows} rows are not 5 severity blocks (Hendrycks: 50,000 = 5 × 10,000)")
    labels = np.asarray(_open_npy(Path(labels_npy)))
    labels = check_labels(labels, rows, labels_npy, num_classes)
    block = rows // 5
    sl = slice((severity - 1) * block, severity * block)
    return np.array(arr[sl]), labels[sl]


def load_cifar_c(
    name: str,
    corruption: str,
    severity: int,
    data_root: str | os.PathLike,
    *,
    download: bool = False,
) -> ImageSet:
    """CIFAR-10-C / CIFAR-100-C (``name`` = cifar10 | cifar100), Hendrycks' ``.npy`` layout:
    rows ``(severity−1)·n … severity·n−1`` with ``n`` = rows/5 (10,000 in the release)."""
    if name not in _CIFAR_C:
        raise ValueError(f"unknown CIFAR-C set {name!r}")
    validation.check_severity(severity)
    root = _root(data_root, f"{name}-C")
    folder_name, resource = _CIFAR_C[name]
    folder = root / folder_name
    _ensure(resource, folder, root, download)
    npy, labels_npy = folder / f"{corruption}.npy", folder / "labels.npy"
    for f in (npy, labels_npy):
        if not f.is_file():
            raise DatasetNotFound(
                f"{f} is missing although {folder} exists: the extraction was incomplete; delete "
                f"{folder} and unpack {downloads.RESOURCES[resource].filename} again"
            )
    stamp = (npy.stat().st_mtime_ns, labels_npy.stat().st_mtime_ns)
    images, labels = _cifar_c_block(str(npy), str(labels_npy), int(severity), stamp, 10 if name == "cifar10" else 100)
    return _to_set(images, labels)


# --------------------------------------------------------------------------- ImageNet-C


def load_imagenet_c(
    corruption: str,
    severity: int,
    data_root: str | os.PathLike,
    *,
    limit: int | None = None,
    expect_classes: int | None = 1000,
    download: bool = False,
    cache: bool = True,
) -> ImageSet:
    """ImageNet-C ``<corruption>/<severity>/<wnid>/*.JPEG``; class index = sorted wnid order
    (= torchvision's ImageNet index). ``CenterCrop(224)`` is applied (a no-op on the release).
    With ``cache`` the decoded corruption is memory-mapped from disk (:func:`load_mapped_folder`:
    7.5 GB a corruption, decoded on first use only); without, decoded into memory every time."""
    root = _root(data_root, "ImageNet-C")
    folder = root / "ImageNet-C" / corruption / str(severity)
    group = downloads.IMAGENET_C_GROUP.get(corruption)
    if not folder.is_dir():
        if group is not None:
            _ensure(f"imagenet_c_{group}", root / "ImageNet-C" / corruption, root, download)
        if not folder.is_dir():
            raise DatasetNotFound(f"{folder} is missing (expected ImageNet-C/<corruption>/<severity>/<wnid>/*.JPEG)")
    _, _, classes = list_image_folder(folder)
    if expect_classes is not None and len(classes) != expect_classes:
        raise DatasetFormatError(
            f"{folder} has {len(classes)} class folders, expected {expect_classes}: a partial copy "
            "would shift every class index; unpack the archive again"
        )
    if cache:
        return load_mapped_folder(folder, center_crop=224, limit=limit, data_root=root)
    return load_image_folder(folder, center_crop=224, limit=limit, cache=False)


# --------------------------------------------------------------------------- outlier pools


def load_svhn(
    split: str = "test",
    data_root: str | os.PathLike | None = None,
    *,
    path: str | os.PathLike | None = None,
    download: bool = False,
) -> ImageSet:
    """SVHN ``<split>_32x32.mat`` (torchvision's file): X is 32×32×3×N, y in 1..10 (10 = digit 0),
    from ``path`` or else the data root."""
    import scipy.io

    root = _root(data_root, "SVHN") if path is None else None
    mat = Path(path) if path is not None else root / "svhn" / f"{split}_32x32.mat"
    if path is None and split == "test":
        _ensure("svhn", mat, root, download)
    if not mat.is_file():
        raise DatasetNotFound(
            f"{mat} is missing; torchvision.datasets.SVHN(root, split={split!r}, download=True) fetches it"
        )
    try:
        content = scipy.io.loadmat(mat)
    except (ValueError, OSError, TypeError, scipy.io.matlab.MatReadError) as exc:
        raise DatasetFormatError(
            f"{mat} is truncated or not a MATLAB file ({exc}); delete it and download again"
        ) from exc
    if "X" not in content or "y" not in content:
        raise DatasetFormatError(
            f"{mat}: expected variables X and y, found {sorted(k for k in content if not k.startswith('__'))}"
        )
    x = content["X"]
    if x.ndim != 4 or x.shape[:3] != (32, 32, 3):
        raise DatasetFormatError(f"{mat}: X has shape {x.shape}, expected 32×32×3×N")
    images = check_images(np.ascontiguousarray(x.transpose(3, 0, 1, 2)), mat)
    labels = check_labels(content["y"], images.shape[0], mat) % 10
    return _to_set(images, labels)


def load_lsun_resize(data_root: str | os.PathLike, *, limit: int | None = None, download: bool = False) -> ImageSet:
    """LSUN (resize), ODIN's 10,000 32×32 images, sorted file names (protocol.md §1.1)."""
    root = _root(data_root, "LSUN (resize)")
    folder = root / "LSUN_resize"
    _ensure("lsun_resize", folder, root, download)
    return load_image_folder(folder, limit=limit, data_root=root)


def load_textures(
    data_root: str | os.PathLike, *, size: int | None = 224, limit: int | None = None, download: bool = False
) -> ImageSet:
    """DTD ``dtd/images/<47 classes>/`` in sorted class/file order, ``Resize((size, size))``
    (protocol.md §6.5; the first 5,000 = 41 classes plus 80 images of "swirly")."""
    root = _root(data_root, "Textures (DTD)")
    folder = root / "dtd" / "images"
    _ensure("textures", folder, root, download)
    return load_image_folder(folder, resize=size, limit=limit, data_root=root)


def load_places365(
    data_root: str | os.PathLike, *, size: int | None = 224, limit: int | None = None, download: bool = False
) -> ImageSet:
    """Places365 as an ImageFolder at ``places365/`` (sorted class folders, sorted files),
    ``Resize((size, size))`` (protocol.md §6.4; which subset the paper used is unknown)."""
    root = _root(data_root, "Places365")
    folder = root / "places365"
    if not folder.is_dir():
        _ensure("places365", folder / "val_256", root, download)
    return load_image_folder(folder, resize=size, limit=limit, data_root=root)


def tiny_permutation(n: int, folder: Path) -> np.ndarray:
    """The cached Tiny-ImageNet-C order (protocol.md §1.1): ``torch.randperm(n)`` with seed
    2020, stored once as ``<folder>/permutation-<n>.npy`` so that every run uses the same one."""
    path = folder / f"permutation-{n}.npy"
    if path.is_file():
        try:
            perm = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            # Unreadable (a truncated write by an old version): it is seeded, so recreate it.
            warnings.warn(
                f"{path} is unreadable ({exc}); recreating it from seed {TINY_PERMUTATION_SEED}", stacklevel=2
            )
        else:
            if perm.shape == (n,) and np.array_equal(np.sort(perm), np.arange(n)):
                return perm
            raise DatasetFormatError(f"{path} is not a permutation of {n}; delete it to recreate it")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(TINY_PERMUTATION_SEED)).numpy()
    try:
        atomic_save_npy(path, perm)
    except OSError as exc:  # read-only data: the permutation is seeded, so nothing is lost
        warnings.warn(f"could not store {path}: {exc}", stacklevel=2)
    return perm


def load_tiny_imagenet_c(
    corruption: str,
    severity: int,
    data_root: str | os.PathLike,
    *,
    limit: int | None = None,
    download: bool = False,
) -> ImageSet:
    """Hendrycks' Tiny-ImageNet-C ``<corruption>/<severity>/<wnid>/*.JPEG`` (200 × 50, 64×64)
    in the cached permuted order; images stay 64×64 (the stream resizes them)."""
    root = _root(data_root, "Tiny-ImageNet-C")
    base = root / "Tiny-ImageNet-C"
    _ensure("tiny_imagenet_c", base, root, download)
    folder = base / corruption / str(severity)
    if not folder.is_dir():
        raise DatasetNotFound(f"{folder} is missing (expected Tiny-ImageNet-C/<corruption>/<severity>/<wnid>/*.JPEG)")
    files, _, _ = list_image_folder(folder)
    return load_image_folder(folder, order=tiny_permutation(len(files), base), limit=limit, data_root=root)


def load_tiny_imagenet_val(data_root: str | os.PathLike, *, limit: int | None = None) -> ImageSet:
    """Clean Tiny-ImageNet validation images (``tiny-imagenet-200/val/images`` +
    ``val_annotations.txt``) in the order of the -C release (sorted wnid, sorted file name),
    permuted like Tiny-ImageNet-C — the source for generating Tiny-ImageNet-C ourselves."""
    root = _root(data_root, "Tiny-ImageNet")
    base = root / "tiny-imagenet-200"
    ann = base / "val" / "val_annotations.txt"
    if not ann.is_file():
        raise DatasetNotFound(f"{ann} is missing; unpack tiny-imagenet-200.zip (cs231n.stanford.edu) into {root}")
    entries = []
    for line in ann.read_text().splitlines():
        if line.strip():
            fname, wnid = line.split("\t")[:2]
            entries.append((wnid, fname))
    entries.sort()
    wnids = sorted({w for w, _ in entries})
    files = [base / "val" / "images" / f for _, f in entries]
    labels = np.array([wnids.index(w) for w, _ in entries], dtype=np.int64)
    perm = tiny_permutation(len(files), base)
    sel = perm if limit is None else perm[:limit]
    images = decode_images([files[i] for i in sel])
    return _to_set(images, labels[sel], wnids)


def resize_images(images: torch.Tensor, size: int) -> torch.Tensor:
    """Resize uint8 N×H×W×3 images to size×size with PIL bilinear (torchvision's
    ``Resize((size, size))`` on PIL images; protocol.md §1.3, e.g. Tiny-ImageNet-C 64 → 32)."""
    if images.shape[1] == size and images.shape[2] == size:
        return images
    arr = images.cpu().numpy()
    out = np.stack([np.asarray(Image.fromarray(a).resize((size, size), Image.BILINEAR)) for a in arr])
    return torch.from_numpy(out)
