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
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
_CHECKOUT = PACKAGE_DIR.parent if (PACKAGE_DIR.parent / "pyproject.toml").is_file() else None


def repo_root() -> Path | None:
    """The source checkout holding this package, or None for a plain install."""
    return _CHECKOUT


def home() -> Path:
    if "STAMPLIB_HOME" in os.environ:
        return Path(os.environ["STAMPLIB_HOME"])
    return _CHECKOUT / ".cache" if _CHECKOUT else Path.home() / ".cache" / "stamplib"


def data_root(data_root: str | os.PathLike | None = None) -> Path:
    if data_root:
        return Path(data_root)
    if os.environ.get("STAMPLIB_DATA_ROOT"):
        return Path(os.environ["STAMPLIB_DATA_ROOT"])
    return home() / "data"


def shared_data() -> Path:
    """``shared/data`` beside the checkout (``<repo>/../shared/data``): where the project's
    machines keep the JPEG CIFAR-10 tarball (relative to the current folder outside a checkout)."""
    return (_CHECKOUT.parent if _CHECKOUT else Path.cwd()) / "shared" / "data"


def set_data_root(data_root: str | os.PathLike | None) -> None:
    """Make ``data_root`` the default for everything later in this process (and its
    subprocesses), as a notebook's ``data_root`` parameter does; empty/None leaves it as is."""
    if data_root:
        os.environ["STAMPLIB_DATA_ROOT"] = str(data_root)


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
    extra = os.environ.get(CHECKPOINT_PATH_ENV)
    others = [Path(p) for p in extra.split(os.pathsep) if p] if extra is not None else [shared_models()]
    return [checkpoints_dir(), *others]


def results_dir() -> Path:
    if os.environ.get("STAMPLIB_RESULTS"):
        return Path(os.environ["STAMPLIB_RESULTS"])
    return _CHECKOUT / "results" if _CHECKOUT else home() / "results"


def figures_dir() -> Path:
    if os.environ.get("STAMPLIB_FIGURES"):
        return Path(os.environ["STAMPLIB_FIGURES"])
    return _CHECKOUT / "figures" if _CHECKOUT else Path.cwd() / "figures"


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write to a temporary sibling, fsync, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    with open(tmp, "wb") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
