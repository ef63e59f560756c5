"""Where stamplib reads and writes. One convention everywhere:

* data root — datasets and generated data: the edge's ``--data-root`` or ``data_root``
  parameter, else ``$STAMPLIB_DATA_ROOT``, else ``<home>/data``;
* home — ``$STAMPLIB_HOME``, else ``<repo>/.cache`` in a source checkout, else
  ``~/.cache/stamplib``; checkpoints are written to ``<home>/checkpoints``;
* checkpoint search path — ``<home>/checkpoints``, then the folders of
  ``$STAMPLIB_CHECKPOINT_PATH`` (``os.pathsep``-separated; set it empty to search nowhere else),
  else ``shared/models`` beside the checkout, where the project keeps the reference run's models;
* results — ``$STAMPLIB_RESULTS``, else ``<repo>/results`` (``<home>/results`` outside a checkout);
* figures — ``$STAMPLIB_FIGURES``, else ``<repo>/figures``.

A :class:`RunContext` carries the data root, results store, figures folder, device and the
command that records name of a run from the edge where it is built (:meth:`RunContext.build`,
which resolves the defaults above and checks what it carries) down to the code that reads data
and writes results; nothing below the edges falls back to a default place. This module is the
only one that reads or writes stamplib's environment variables (:data:`ENVIRONMENT`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

PACKAGE_DIR = Path(__file__).resolve().parent
_CHECKOUT = PACKAGE_DIR.parent if (PACKAGE_DIR.parent / "pyproject.toml").is_file() else None


def repo_root() -> Path | None:
    """The source checkout holding this package, or None for a plain install."""
    return _CHECKOUT


#: Every environment variable stamplib reads, and what it sets. They are read here only
#: (:func:`environment`) and written here only (:func:`exported`, for child processes such as
#: notebook kernels and grid workers; :func:`set_process_default`): the rest of the package
#: gets what it needs passed down, in a :class:`RunContext` or as arguments.
ENVIRONMENT = {
    "STAMPLIB_HOME": "caches, checkpoints and downloaded data (default: .cache in a checkout)",
    "STAMPLIB_DATA_ROOT": "the data sets' folder (default: <home>/data)",
    "STAMPLIB_RESULTS": "the results store (default: results/ in a checkout)",
    "STAMPLIB_FIGURES": "where figures and tables are written (default: figures/ in a checkout)",
    "STAMPLIB_CHECKPOINT_PATH": "read-only folders searched for checkpoints (default: ../shared/models)",
    "STAMPLIB_STREAM_CACHE": "bytes of test streams kept for reuse (e.g. 512M, 8G, 0)",
    "STAMPLIB_DOWNLOAD": "1: download a missing data set instead of stopping",
    "STAMPLIB_HEADLESS": "1: figures are not shown (set by the notebook runner for its kernels)",
    "STAMPLIB_TF32": "1: allow TF32 matrix products on a GPU (read into the run context)",
    "STAMPLIB_COMMAND": "the command a record names as its origin (exported to notebook kernels by the command line)",
    "SUBMITIT_EXECUTOR": "set by submitit inside its jobs",
    "CUBLAS_WORKSPACE_CONFIG": "set for deterministic cuBLAS kernels (--deterministic)",
    "MPLBACKEND": "matplotlib's backend (a Jupyter kernel names its inline one here)",
    "OMP_NUM_THREADS": "torch's CPU threads; notebooks rendered in parallel give each kernel its share of the cores",
    "MKL_NUM_THREADS": "MKL's CPU threads, set beside OMP_NUM_THREADS",
}


def environment(name: str) -> str:
    """The value of one of :data:`ENVIRONMENT`'s variables ("" when unset): the one place
    stamplib reads its environment."""
    if name not in ENVIRONMENT:
        raise KeyError(f"{name} is not one of stamplib's environment variables (paths.ENVIRONMENT)")
    return os.environ.get(name, "")


@contextmanager
def exported(**variables: str | os.PathLike | None) -> Iterator[None]:
    """Set environment variables for the child processes started inside the block (notebook
    kernels inherit them), then restore the previous values; a None value leaves one as is."""
    given = {k: str(v) for k, v in variables.items() if v is not None}
    unknown = sorted(set(given) - set(ENVIRONMENT))
    if unknown:
        raise KeyError(f"{unknown} are not stamplib's environment variables (paths.ENVIRONMENT)")
    before = {k: os.environ.get(k) for k in given}
    os.environ.update(given)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def child_environment(**variables: str) -> dict[str, str]:
    """This process's environment with ``variables`` added, for a child process started with
    ``subprocess.run(..., env=...)`` (the pinned training of the digits model)."""
    return {**os.environ, **variables}


def set_process_default(name: str, value: str) -> None:
    """Give an environment variable a value for the rest of this process unless it has one
    (the cuBLAS workspace of deterministic runs)."""
    if name not in ENVIRONMENT:
        raise KeyError(f"{name} is not one of stamplib's environment variables (paths.ENVIRONMENT)")
    os.environ.setdefault(name, value)


def home() -> Path:
    if environment("STAMPLIB_HOME"):
        return Path(environment("STAMPLIB_HOME"))
    return _CHECKOUT / ".cache" if _CHECKOUT else Path.home() / ".cache" / "stamplib"


def _default_data_root() -> Path:
    """``$STAMPLIB_DATA_ROOT``, else ``<home>/data``: the data root of a context built without one."""
    if environment("STAMPLIB_DATA_ROOT"):
        return Path(environment("STAMPLIB_DATA_ROOT"))
    return home() / "data"


def given_data_root(data_root: str | os.PathLike | None, needed_by: str) -> Path:
    """The data root a caller passed down, as a path; none is one clear error (``needed_by``
    says what reads files there): below the edges nothing falls back to a default place."""
    if data_root is None or str(data_root) == "":
        raise NoDataRoot(f"{needed_by} is read from a data root, and none was given: pass --data-root DIR on the "
                         "command line, data_root= in a notebook's parameters, or a paths.RunContext")
    return Path(data_root)


class NoDataRoot(FileNotFoundError):
    """Files were asked for without a data root to find them in."""


def shared_data() -> Path:
    """``shared/data`` beside the checkout (``<repo>/../shared/data``): where the project's
    machines keep the JPEG CIFAR-10 tarball (relative to the current folder outside a checkout)."""
    return (_CHECKOUT.parent if _CHECKOUT else Path.cwd()) / "shared" / "data"


def shared_models() -> Path:
    """``shared/models`` beside the checkout: the project's machines keep the source models of
    the reference run there, next to ``shared/data``."""
    return (_CHECKOUT.parent if _CHECKOUT else Path.cwd()) / "shared" / "models"


CHECKPOINT_PATH_ENV = "STAMPLIB_CHECKPOINT_PATH"


def checkpoints_dir() -> Path:
    """Where checkpoints are written (training, the built-in model, ``checkpoints import``)."""
    return home() / "checkpoints"


def checkpoint_search_path() -> list[Path]:
    """The folders searched for a checkpoint by name, first match wins: the writable
    :func:`checkpoints_dir`, then ``$STAMPLIB_CHECKPOINT_PATH`` if set (read-only places such as
    a shared filesystem), else :func:`shared_models`."""
    extra = os.environ.get(CHECKPOINT_PATH_ENV) if CHECKPOINT_PATH_ENV in os.environ else None  # "" = none
    others = [Path(p) for p in extra.split(os.pathsep) if p] if extra is not None else [shared_models()]
    return [checkpoints_dir(), *others]


def results_dir() -> Path:
    if environment("STAMPLIB_RESULTS"):
        return Path(environment("STAMPLIB_RESULTS"))
    return _CHECKOUT / "results" if _CHECKOUT else home() / "results"


def figures_dir() -> Path:
    if environment("STAMPLIB_FIGURES"):
        return Path(environment("STAMPLIB_FIGURES"))
    return _CHECKOUT / "figures" if _CHECKOUT else Path.cwd() / "figures"


def parse_device(device: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` as spelled, whether or not this machine has it (a dry run
    plans a GPU machine's grid on a laptop); else one ValueError that says what to give. The one
    reading of a device string: the command lines' ``--device``, a notebook's ``device`` and
    :func:`check_device`."""
    name, colon, index = str(device).partition(":")
    if (name == "cpu" and not colon) or (name == "cuda" and (not colon or (index.isascii() and index.isdigit()))):
        return str(device)
    raise ValueError(f"device must be cpu, cuda or cuda:N, got {device!r}")


def check_device(device: str) -> str:
    """:func:`parse_device`, and ``cuda``/``cuda:N`` only where torch sees that GPU; else one
    ValueError that says what to give."""
    device = parse_device(device)
    if device == "cpu":
        return device
    index = device.partition(":")[2]
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not count:
        raise ValueError(f"device {device!r} but torch sees no GPU on this machine; use --device cpu")
    if index and int(index) >= count:
        raise ValueError(f"device {device!r} but torch sees {count} GPU(s), cuda:0 to cuda:{count - 1}")
    return device


@dataclass(frozen=True)
class RunContext:
    """Where a run reads its data and writes its results and figures, on which device, and the
    command its records name: built once at an edge (the command line, a notebook's parameters
    cell) by :meth:`build`, which checks it, and passed down whole (to grid and tune workers
    too) rather than read from the environment deep inside. ``command`` "" lets a record name
    the process's own command line."""

    data_root: Path
    results: Path
    figures: Path
    device: str = "cpu"
    command: str = ""
    allow_tf32: bool = False  # TF32 matrix products on a GPU: faster, and not float32 (precision.py)

    @classmethod
    def build(cls, data_root: str | os.PathLike | None = None, results: str | os.PathLike | None = None,
              figures: str | os.PathLike | None = None, device: str = "cpu", command: str = "",
              default_data_root: str | os.PathLike | None = None, check: bool = True) -> RunContext:
        """The given places, else the environment's (:data:`ENVIRONMENT`), else the defaults
        (``default_data_root`` instead of ``<home>/data`` where a command has its own, as the
        reference run's ``shared/data``). What it carries is checked here, once: a data root given
        here must be a folder, the device one torch has (``check`` False: taken as given, for a
        dry run that computes nothing, as planning a GPU machine's grid on a laptop).
        ``command`` "" keeps the one a parent
        process exported (``$STAMPLIB_COMMAND``), if any; ``$STAMPLIB_TF32`` (1, true, yes, on)
        allows TF32."""
        if data_root:
            root = Path(data_root)
            if check and not root.is_dir():
                raise ValueError(f"data root {root} is not a folder: give --data-root the folder that holds the "
                                 "data sets (python -m stamplib doctor lists what it finds there)")
        elif default_data_root and not environment("STAMPLIB_DATA_ROOT"):
            root = Path(default_data_root)
        else:
            root = _default_data_root()
        return cls(root, Path(results) if results else results_dir(), Path(figures) if figures else figures_dir(),
                   check_device(device or "cpu") if check else device or "cpu",
                   command or environment("STAMPLIB_COMMAND"),
                   environment("STAMPLIB_TF32").strip().lower() in ("1", "true", "yes", "on"))

    def environment(self) -> dict[str, str]:
        """The variables that rebuild this context in a child process (a notebook kernel)."""
        exported = {"STAMPLIB_DATA_ROOT": str(self.data_root), "STAMPLIB_RESULTS": str(self.results),
                    "STAMPLIB_FIGURES": str(self.figures)}
        return {**exported, "STAMPLIB_COMMAND": self.command} if self.command else exported

    def exported(self) -> AbstractContextManager[None]:
        """:func:`exported` of :meth:`environment`: child processes started in the block share it."""
        return exported(**self.environment())


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` to a temporary sibling, fsync, rename: a reader never sees half a file
    and a killed writer leaves only a ``.tmp-*`` file that no reader opens. The one atomic
    writer of the package (records, caches, generated data, figures' tables)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_save(path: Path, save: Callable[[BinaryIO], None]) -> None:
    """:func:`atomic_write` of what ``save`` writes to an open binary file."""
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            save(fh)

    atomic_write(path, write)


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """:func:`atomic_write` of ``payload``."""
    atomic_save(path, lambda fh: fh.write(payload))
