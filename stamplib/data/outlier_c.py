"""The corrupted outlier sets SVHN-C, LSUN-C, TinyImageNet-C, Textures-C, Places365-C (protocol.md §6).

How each is made (§6.2–6.6): the clean pool in protocol order (§1.1) — SVHN test split (.mat
order), LSUN_resize (sorted file names), Tiny-ImageNet val (sorted wnid/file, then the cached
permutation), DTD and Places365 (sorted class folders and files, ``Resize((224, 224))`` with
PIL bilinear first) — is corrupted with the Hendrycks generator of ``corruptions.py``, whose
parameter table follows the image size (32 → §7.2, 64 → §7.4, 224 → §7.3).

Differences from the authors, by necessity: their random draws came from a 64-worker
DataLoader and cannot be replayed; here image ``i`` is corrupted with seed
:data:`GENERATION_SEED` (their 2023) and ``index_offset = i``, so the bytes depend only on the
image and its index. The paper used Hendrycks' Tiny-ImageNet-C release (§6.6); generating it
is supported for completeness (64×64 table) but the loaders prefer the release. Generated
images are stored as uint8 arrays (the authors re-encoded LSUN/Places/Textures as JPEG, q75).

Storage: ``<data_root>/stamplib-c/<set>/<corruption>/<severity>.npy`` (uint8 N×S×S×3, the
first ``count`` images of the pool) and ``manifest.json`` with each file's SHA-256, the seed and
the hash of the clean pool. Files are written to a temporary name and renamed, so a killed
generation never leaves a file that is read. Because generation is per-image deterministic,
corrupting the first N clean images on the fly gives exactly rows 0..N−1 of the stored file —
the cache only saves time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from stamplib import flags, paths
from stamplib.data import loaders

#: Seed of generated outlier-C sets (the authors' generation scripts seed with 2023, §6.2).
GENERATION_SEED = 2023


@dataclass(frozen=True)
class OutlierCSet:
    """A clean pool and where its corrupted versions live.

    ``clean(data_root, limit)`` returns the pool in protocol order at corruption size;
    ``released(data_root, corruption, severity, limit)`` reads a published/authors' -C copy or
    returns None when there is none on disk."""

    name: str
    clean: Callable[[Path, int | None], loaders.ImageSet]
    released: Callable[[Path, str, int, int | None], torch.Tensor | None]
    size: int
    default_count: int | None  # None = the whole pool


def _if_dir(folder: Path, load: Callable[[Path], loaders.ImageSet]) -> torch.Tensor | None:
    return load(folder).images if folder.is_dir() else None


def _released_svhn(root: Path, c: str, s: int, limit: int | None) -> torch.Tensor | None:
    mat = root / "SVHN-C" / c / str(s) / "test_32x32.mat"
    if not mat.is_file():
        return None
    images = loaders.load_svhn(path=mat).images
    return images if limit is None else images[:limit]


def _released_tiny(root: Path, c: str, s: int, limit: int | None) -> torch.Tensor | None:
    if not (root / "Tiny-ImageNet-C" / c / str(s)).is_dir():
        return None
    return loaders.load_tiny_imagenet_c(c, s, root, limit=limit).images


SETS: dict[str, OutlierCSet] = {
    s.name: s
    for s in (
        OutlierCSet(
            "svhn", lambda root, limit: _limit(loaders.load_svhn("test", root), limit), _released_svhn, 32, None
        ),
        OutlierCSet(
            "lsun",
            lambda root, limit: loaders.load_lsun_resize(root, limit=limit),
            lambda root, c, s, limit: _if_dir(
                root / "LSUN_resize-C" / c / str(s), lambda f: loaders.load_image_folder(f, limit=limit, data_root=root)
            ),
            32,
            None,
        ),
        OutlierCSet(
            "tiny", lambda root, limit: loaders.load_tiny_imagenet_val(root, limit=limit), _released_tiny, 64, None
        ),
        OutlierCSet(
            "textures",
            lambda root, limit: loaders.load_textures(root, size=224, limit=limit),
            lambda root, c, s, limit: _if_dir(
                root / "Textures-C" / c / str(s) / "images",
                lambda f: loaders.load_image_folder(f, resize=224, limit=limit, data_root=root),
            ),
            224,
            None,
        ),
        OutlierCSet(
            "places365",
            lambda root, limit: loaders.load_places365(root, size=224, limit=limit),
            lambda root, c, s, limit: _if_dir(
                root / "PLACES365-C" / c / str(s),
                lambda f: loaders.load_image_folder(f, resize=224, limit=limit, data_root=root),
            ),
            224,
            12_500,  # the N of protocol.md §1.1; the full val pool would be 5.5 GB per file
        ),
    )
}


def _limit(images: loaders.ImageSet, limit: int | None) -> loaders.ImageSet:
    return images if limit is None else loaders.ImageSet(images.images[:limit], images.labels[:limit])


def generated_dir(name: str, data_root: str | os.PathLike) -> Path:
    return paths.given_data_root(data_root, f"outlier set {name!r}") / "stamplib-c" / name


def _sha256_array(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr).data).hexdigest()


def _sha256_file(path: Path) -> str:
    from stamplib.data.downloads import file_digest

    return file_digest(path, "sha256")


def read_manifest(out_dir: Path) -> dict:
    path = out_dir / "manifest.json"
    if not path.is_file():
        return {"files": {}}
    return json.loads(path.read_text())


def corrupt_pool(
    images: np.ndarray, corruption: str, severity: int, *, seed: int = GENERATION_SEED, chunk: int = 256,
    progress: bool = False,
) -> np.ndarray:
    """Corrupt a pool in chunks; image ``i`` uses ``index_offset = i`` (identical bytes for any
    chunk size and to corrupting any prefix in one call)."""
    from stamplib.data.corruptions import corrupt

    out = np.empty_like(images)
    for start in tqdm(range(0, len(images), chunk), desc=f"{corruption}/{severity}", disable=not progress, leave=False):
        out[start : start + chunk] = corrupt(
            images[start : start + chunk], corruption, severity, seed=seed, index_offset=start
        )
    return out


def generate_from_images(
    images: np.ndarray,
    out_dir: str | os.PathLike,
    corruptions: Iterable[str],
    severities: Iterable[int] = (5,),
    *,
    seed: int = GENERATION_SEED,
    source: str = "",
    chunk: int = 256,
    progress: bool = False,
) -> dict:
    """Write ``<out_dir>/<corruption>/<severity>.npy`` for a clean uint8 pool and record them in
    ``manifest.json``. Up-to-date files (same pool hash, seed and file hash) are skipped."""
    images = loaders.check_images(np.asarray(images), source or "clean pool")
    out_dir = Path(out_dir)
    pool_hash = _sha256_array(images)
    manifest = read_manifest(out_dir)
    if manifest.get("source_sha256") != pool_hash:
        manifest["files"] = {}  # a different clean pool: nothing recorded so far applies
    manifest.update({"seed": seed, "source": source, "source_sha256": pool_hash, "count": int(len(images))})
    for corruption in corruptions:
        for severity in severities:
            rel = f"{corruption}/{severity}.npy"
            target = out_dir / rel
            entry = manifest["files"].get(rel)
            if (
                entry is not None and target.is_file() and entry.get("source_sha256") == pool_hash
                and entry.get("seed") == seed and entry.get("sha256") == _sha256_file(target)
            ):
                continue
            data = corrupt_pool(images, corruption, severity, seed=seed, chunk=chunk, progress=progress)
            paths.atomic_save(target, lambda fh, data=data: np.save(fh, data, allow_pickle=False))
            manifest["files"][rel] = {
                "sha256": _sha256_file(target), "shape": list(data.shape), "seed": seed,
                "source_sha256": pool_hash,
            }
            # Rewritten after every file so an interrupted run keeps what it finished.
            paths.atomic_write_bytes(out_dir / "manifest.json", json.dumps(manifest, indent=1).encode())
    return manifest


def generate(
    name: str,
    corruptions: Iterable[str] | None = None,
    severities: Iterable[int] = (5,),
    *,
    count: int | None = None,
    data_root: str | os.PathLike,
    progress: bool = True,
) -> Path:
    """Generate outlier-C set ``name`` (svhn, lsun, tiny, textures, places365) from its clean
    pool under the data root; returns the output folder."""
    from stamplib.data.corruptions import CORRUPTIONS

    spec = SETS[name]
    root = paths.given_data_root(data_root, f"outlier set {name!r}")
    count = count if count is not None else spec.default_count
    clean = spec.clean(root, count).images.numpy()
    out_dir = generated_dir(name, root)
    generate_from_images(
        clean, out_dir, corruptions or CORRUPTIONS, severities, source=f"{name} (first {len(clean)})",
        progress=progress,
    )
    return out_dir


def load_generated(
    name: str, corruption: str, severity: int, data_root: str | os.PathLike, *,
    limit: int | None = None, verify: bool = True,
) -> torch.Tensor | None:
    """A generated outlier-C array (first ``limit`` rows) or None if it is absent or holds
    fewer rows than asked for. ``verify`` checks the SHA-256 recorded in the manifest."""
    out_dir = generated_dir(name, data_root)
    rel = f"{corruption}/{severity}.npy"
    path = out_dir / rel
    entry = read_manifest(out_dir)["files"].get(rel)
    if entry is None or not path.is_file():
        return None
    if limit is not None and entry["shape"][0] < limit:
        return None
    if verify and _sha256_file(path) != entry["sha256"]:
        raise loaders.DatasetFormatError(
            f"{path} does not match the SHA-256 in {out_dir / 'manifest.json'}; delete it and run "
            f"`python -m stamplib.data.outlier_c {name}` again"
        )
    arr = np.load(path, mmap_mode="r", allow_pickle=False)
    return torch.from_numpy(np.array(arr if limit is None else arr[:limit]))


def outlier_c_images(
    name: str, corruption: str, severity: int, data_root: str | os.PathLike, *, limit: int | None = None
) -> torch.Tensor | None:
    """The corrupted pool of ``name`` if one is on disk: a released/authors' copy first, then
    a generated one; None means "corrupt the clean pool on the fly with GENERATION_SEED"."""
    root = paths.given_data_root(data_root, f"outlier set {name!r}")
    released = SETS[name].released(root, corruption, severity, limit)
    if released is not None:
        return released
    return load_generated(name, corruption, severity, root, limit=limit)


def corrupted_pool(
    name: str, corruption: str, severity: int, data_root: str | os.PathLike, *, limit: int | None = None
) -> torch.Tensor:
    """The first ``limit`` images of outlier-C set ``name``: from disk where a copy exists,
    else the clean pool corrupted here exactly as :func:`generate` would (same seed, same
    per-image draws, so the bytes are those of the generated file)."""
    from stamplib.data.corruptions import corrupt

    root = paths.given_data_root(data_root, f"outlier set {name!r}")
    stored = outlier_c_images(name, corruption, severity, root, limit=limit)
    if stored is not None:
        return stored
    clean = SETS[name].clean(root, limit).images[:limit]
    return corrupt(clean, corruption, severity, seed=GENERATION_SEED)


def main(argv: list[str] | None = None) -> int:
    from stamplib.data.corruptions import CORRUPTIONS

    parser = argparse.ArgumentParser(prog="python -m stamplib.data.outlier_c", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="+", choices=sorted(SETS))
    parser.add_argument("--corruptions", default="all", help="comma-separated, or 'all'")
    parser.add_argument("--severities", default="5", help="comma-separated, e.g. 1,2,3,4,5")
    parser.add_argument("--count", type=int, default=None, help="first N images of the pool")
    flags.add(parser, data_root=True)
    args = parser.parse_args(argv)
    data_root = paths.RunContext.build(args.data_root).data_root
    corruptions = CORRUPTIONS if args.corruptions == "all" else tuple(args.corruptions.split(","))
    severities = tuple(int(s) for s in args.severities.split(","))
    for name in args.names:
        print(generate(name, corruptions, severities, count=args.count, data_root=data_root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
