"""Where a record's numbers came from: the checkpoint and data archive (by SHA-256), the code
(git commit), the command that computed it and whether TF32 was allowed on a GPU
(:mod:`stamplib.evaluation.precision`). The runner stores this as ``record["provenance"]``
so that a committed record can be traced and recomputed (``python -m stamplib reference
--recompute``); it is not part of a record's identity, and comparisons ignore it."""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from stamplib import data, paths
from stamplib.data import builtin_cifar10, downloads
from stamplib.evaluation.precision import tf32_state
from stamplib.models import checkpoints


@functools.lru_cache(maxsize=32)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    return downloads.file_digest(path, "sha256")


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, computed once per process for an unchanged file."""
    stat = path.stat()
    return _file_sha256(str(path), stat.st_size, stat.st_mtime_ns)


def checkpoint_provenance(dataset: str, network: int = 0) -> dict[str, Any]:
    """The source model ``network`` of ``dataset``: checkpoint name, the SHA-256 its sidecar
    vouches for (verified on load) and the clean accuracy the trainer measured (None when unknown)."""
    name = data.dataset(dataset).checkpoint
    name = checkpoints.network_name(name, network) if network else name
    path = Path(name) if name.endswith(".pt") else checkpoints.checkpoint_path(name)
    side = checkpoints.read_sidecar(path) if path.is_file() else None
    return {
        "name": name,
        "sha256": (side or {}).get("sha256"),
        "clean_test_accuracy": (side or {}).get("clean_test_accuracy"),
    }


def data_provenance(dataset: str, data_root: str | os.PathLike | None) -> dict[str, Any]:
    """The data behind ``dataset``: the built-in benchmark, or its archive's SHA-256 beside the
    one the registry expects: computed from the file when it lies in the data root, else the one
    its verified extraction recorded in the unpacked folder (``sha256_from`` says so), else None."""
    entry = data.dataset(dataset)
    if entry.builtin and entry.checkpoint in builtin_cifar10.CHECKPOINTS:
        images = builtin_cifar10.FOLDER / builtin_cifar10.IMAGES_FILE
        return {"name": entry.name, "builtin": True, "file": images.name,
                "sha256": builtin_cifar10.recorded_sums().get(images.name)}
    if entry.builtin:
        return {"name": entry.name, "builtin": True}
    if not entry.archive:
        return {"name": entry.name, "root": str(data_root)}
    resource = downloads.RESOURCES[entry.archive]
    root = paths.given_data_root(data_root, f"dataset {dataset!r}")
    archive = root / resource.filename
    if archive.is_file():
        return {"name": entry.name, "archive": resource.filename, "sha256": file_sha256(archive),
                "expected_sha256": resource.sha256}
    # Only the unpacked folder is there: the SHA-256 its verified extraction recorded, said as such.
    unpacked = downloads.unpacked_sha256(resource, root)
    made = {"name": entry.name, "archive": resource.filename, "sha256": unpacked, "expected_sha256": resource.sha256}
    return made if unpacked is None else {**made, "sha256_from": downloads.UNPACK_MARKER}


@functools.lru_cache(maxsize=1)
def git_state() -> dict[str, Any]:
    """Commit of the source checkout and whether its tracked files, other than the result stores
    under ``results/``, differ from it (None outside git). A computation that writes into a
    committed store (its manifest, its kept corruptions) changes only what it computes, not the code
    that computes it."""
    root = paths.repo_root()
    if root is None:
        return {"commit": None, "dirty": None}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True, timeout=30).stdout.strip()
        code = ["--", ".", ":(exclude)results"]
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", *code], cwd=root,
                               capture_output=True, text=True, check=True, timeout=30).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


def own_command() -> str:
    """This process's command line, for a record whose run context names none."""
    return shlex.join([Path(sys.executable).name, *sys.argv])


#: The vector extensions that change which kernels PyTorch runs on a CPU (and so, for some
#: methods, the last bits of a record): named in a record so that a reader can tell two CPU
#: kinds' records apart.
VECTOR_EXTENSIONS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                     "amx_tile", "amx_bf16", "sve", "neon", "asimd")


@functools.lru_cache(maxsize=1)
def cpu_state() -> dict[str, Any]:
    """The CPU a record was computed on: its model name and the vector extensions it has (of
    :data:`VECTOR_EXTENSIONS`), read from /proc/cpuinfo where there is one."""
    import platform

    model, flags = platform.processor() or platform.machine(), set()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name in ("model name", "cpu model") and value.strip():
            model = value.strip()
        elif name in ("flags", "features") and not flags:
            flags = set(value.split())
    return {"model": model, "extensions": [e for e in VECTOR_EXTENSIONS if e in flags]}


def provenance(dataset: str, data_root: str | os.PathLike | None, command: str, layout: str,
               network: int = 0) -> dict[str, Any]:
    """A record's provenance: ``command`` is the one the run context carries (the command a
    person typed, handed to grid workers and notebook kernels); "" names this process's own.
    ``layout``: the memory layout the network ran in (``assembly.network_layout``; records
    from before it was recorded ran in the contiguous one)."""
    return {
        "checkpoint": checkpoint_provenance(dataset, network),
        "data": data_provenance(dataset, data_root),
        "git": git_state(),
        "command": command or own_command(),
        "tf32": tf32_state(),
        "layout": layout,
        "cpu": cpu_state(),
    }


def doctor_lines(context: paths.RunContext) -> list[str]:
    """What ``doctor`` prints: versions, the device, where data, checkpoints and results are,
    the methods, and every data set and checkpoint with where it was found (checkpoints'
    SHA-256 checked against their sidecars)."""
    import platform

    import torch

    from stamplib import methods
    from stamplib.version import __version__

    gpu = f" ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else ""
    lines = [f"stamplib {__version__}  python {platform.python_version()}  torch {torch.__version__}",
             f"device: cuda available={torch.cuda.is_available()}{gpu}, CPU threads={torch.get_num_threads()}",
             f"data root:   {context.data_root}",
             f"checkpoints: written to {paths.checkpoints_dir()}; searched in "
             + ", ".join(str(p) for p in paths.checkpoint_search_path()),
             f"results:     {context.results}",
             f"methods:     {', '.join(methods.available())}",
             "datasets and outlier sets:"]
    lines += [f"  {name:22s} {_state(found, where):9s} {where.removeprefix(data.DAMAGED + ': ')}"
              for name, found, where in data.dataset_status(context.data_root)]
    return [*lines, "checkpoints (SHA-256 checked against each sidecar):", *checkpoints.status_lines(verify=True),
            *package_data_lines()]


def _state(found: bool, where: str) -> str:
    return "found" if found else "DAMAGED" if where.startswith(data.DAMAGED) else "missing"


def package_data_lines() -> list[str]:
    """``doctor``'s check of the files that ship with the package against their recorded SHA-256:
    the built-in benchmark's photographs and networks (its ``SHA256SUMS``) and the digits model.
    A changed file is named DAMAGED with the way to restore it, never found."""
    from stamplib.models import builtin

    rows = [(name, problem, builtin_cifar10.FOLDER / name) for name, problem in builtin_cifar10.problems().items()]
    rows.append((f"{builtin.DIGITS_CHECKPOINT}.pt", builtin.shipped_problem(),
                 builtin.SHIPPED / f"{builtin.DIGITS_CHECKPOINT}.pt"))
    return ["package data (SHA-256 checked against the recorded ones):",
            *(f"  {name:26s} {'ok       ' if problem is None else 'DAMAGED  '} {problem or path}"
              for name, problem, path in rows)]
