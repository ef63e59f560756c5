"""Where stamplib reads and writes. One convention everywhere:

* data root — datasets and generated data: argument ``data_root``, else ``$STAMPLIB_DATA_ROOT``,
  else ``<home>/data``;
* home — ``$STAMPLIB_HOME``, else ``<repo>/.cache`` in a source checkout, else
  ``~/.cache/stamplib``; checkpoints are written to ``<home>/checkpoints``;
* checkpoint search path — ``<home>/checkpoints``, then the folders of
  ``$STAMPLIB_CHECKPOINT_PATH`` (``os.pathsep``-separated; set it empty to search nowhere else),
  else ``shared/models`` beside the checkout, where the project keeps the reference run's models;
* results — ``$STAMPLIB_RESULTS``, else ``<repo>/results`` (``<home>/results`` outside a checkout);
* figures — ``$STAMPLIB_FIGURES``, else ``<repo>/figures``.

A :class:`RunContext` carries the data root, results store, figures folder and device of a
run from the edge where it is built down to the code that reads data and writes results. This
module is the only one that reads or writes stamplib's environment variables
(:data:`ENVIRONMENT`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

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
    "STAMPLIB_TF32": "1: allow TF32 matrix products on a GPU",
    "STAMPLIB_COMMAND": "the command a record names as its origin (set by the command line)",
    "STAMPLIB_GRID_FAULT": "tests only: make a grid cell fail or its worker die",
    "SUBMITIT_EXECUTOR": "set by submitit inside its jobs",
    "CUBLAS_WORKSPACE_CONFIG": "set for deterministic cuBLAS kernels (--deterministic)",
    "MPLBACKEND": "matplotlib's backend (a Jupyter kernel names its inline one here)",
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
    (the command line's origin of records, the cuBLAS workspace of deterministic runs)."""
    if name not in ENVIRONMENT:
        raise KeyError(f"{name} is not one of stamplib's environment variables (paths.ENVIRONMENT)")
    os.environ.setdefault(name, value)


def home() -> Path:
    if environment("STAMPLIB_HOME"):
        return Path(environment("STAMPLIB_HOME"))
    return _CHECKOUT / ".cache" if _CHECKOUT else Path.home() / ".cache" / "stamplib"


def data_root(data_root: str | os.PathLike | None = None) -> Path:
    if data_root:
        return Path(data_root)
    if environment("STAMPLIB_DATA_ROOT"):
        return Path(environment("STAMPLIB_DATA_ROOT"))
    return home() / "data"


_resolve_data_root = data_root  # RunContext.build's argument of the same name hides the function


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


@dataclass(frozen=True)
class RunContext:
    """Where a run reads its data and writes its results and figures, and on which device:
    built once at an edge (the command line, a notebook's parameters cell, a grid worker) by
    :meth:`build` and passed down, rather than read from the environment deep inside."""

    data_root: Path
    results: Path
    figures: Path
    device: str = "cpu"

    @classmethod
    def build(cls, data_root: str | os.PathLike | None = None, results: str | os.PathLike | None = None,
              figures: str | os.PathLike | None = None, device: str = "cpu") -> RunContext:
        """The given places, else the environment's (:data:`ENVIRONMENT`), else the defaults."""
        return cls(_resolve_data_root(data_root), Path(results) if results else results_dir(),
                   Path(figures) if figures else figures_dir(), device or "cpu")

    def environment(self) -> dict[str, str]:
        """The variables that rebuild this context in a child process (a notebook kernel)."""
        return {"STAMPLIB_DATA_ROOT": str(self.data_root), "STAMPLIB_RESULTS": str(self.results),
                "STAMPLIB_FIGURES": str(self.figures)}

    def exported(self) -> AbstractContextManager[None]:
        """:func:`exported` of :meth:`environment`: child processes started in the block share it."""
        return exported(**self.environment())


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write to a temporary sibling, fsync, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    with open(tmp, "wb") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
