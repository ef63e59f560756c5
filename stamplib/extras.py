"""Optional dependencies: what the library needs beyond its core, and the one-line error when
it is missing.

``pip install stamplib`` installs the core (PyTorch, numpy, pandas, scikit-learn, matplotlib,
seaborn, tqdm): enough to run cells, tables, figures and the explorer's static summary. The
rest comes in extras (``pyproject.toml``): ``notebooks`` (papermill, JupyterLab, the kernel,
ipywidgets), ``site`` (Sphinx, MyST-NB, the theme), ``cluster`` (submitit) and ``browser``.
A face that needs one asks :func:`require` for its module when it starts, so a missing extra
stops it there with the ``pip install`` that adds it. Nothing here imports another stamplib
module (it sits at the bottom of the layers, docs/internals.md).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType


class MissingExtra(ModuleNotFoundError):
    """An optional dependency is not installed; the message names the ``pip install`` to run."""


def _missing(module: str, extra: str, purpose: str) -> MissingExtra:
    return MissingExtra(
        f"{purpose} needs {module}, which is not installed (the '{extra}' extra): pip install 'stamplib[{extra}]'",
        name=module,
    )


def _is_the_module(err: ModuleNotFoundError, module: str) -> bool:
    """Whether ``err`` says ``module`` itself (or its package) is missing. A dependency missing
    inside an installed package is that package's problem, not a missing extra."""
    return err.name is not None and err.name.split(".")[0] == module.split(".")[0]


def require(module: str, extra: str, purpose: str = "stamplib") -> ModuleType:
    """Import ``module`` (a module of the extra ``extra``) and return it, or raise
    :class:`MissingExtra` with one line naming what needed it and the ``pip install`` to run.
    ``purpose`` says what needs it, e.g. ``"the submitit executors"``."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if not _is_the_module(err, module):
            raise
        raise _missing(module, extra, purpose) from None


def require_installed(module: str, extra: str, purpose: str = "stamplib") -> None:
    """:func:`require` without importing: for a module that another process runs (Sphinx, the
    notebook kernel), and whose import here would only cost time or, for ipykernel, make this
    process look like a kernel (report/figures.py chooses its backend by that)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError as err:  # a parent package is missing, or an import hook refused it
        if not _is_the_module(err, module):
            raise
        found = False
    if not found:
        raise _missing(module, extra, purpose)
