"""stamplib — a reference, notebook-first reproduction of STAMP (Yu et al., ECCV 2024).

``import stamplib`` imports no torch: ``python -m stamplib --help`` runs this file first and
must answer at once. :class:`RunSpec`, :class:`StreamSpec` and the subpackages load on first
use (PEP 562 module ``__getattr__``), so ``stamplib.RunSpec`` and ``stamplib.data`` work as
before."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from stamplib.paths import PACKAGE_DIR, RunContext
from stamplib.version import __version__

if TYPE_CHECKING:
    from stamplib.data.streams import StreamSpec
    from stamplib.evaluation.spec import RunSpec

__all__ = ["RunContext", "RunSpec", "StreamSpec", "explore", "run", "__version__"]

#: The names this module exports from modules that import torch, loaded on first use.
_LAZY = {"RunSpec": "stamplib.evaluation.spec", "StreamSpec": "stamplib.data.streams"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if (PACKAGE_DIR / name / "__init__.py").is_file() or (PACKAGE_DIR / f"{name}.py").is_file():
        return importlib.import_module(f"{__name__}.{name}")  # a subpackage, as an eager import made it
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def run(spec: RunSpec, context: RunContext | None = None, *, force: bool = False, progress: bool = False) -> Any:
    """The record of ``spec``: stored, or computed and stored (unless ``force``), where
    ``context`` says (:func:`stamplib.evaluation.runner.run`). This is an edge, as the command
    line is: without a context it is the default one, built by :meth:`RunContext.build` as
    ``python -m stamplib run`` builds it from no flags (``$STAMPLIB_DATA_ROOT``, results/, cpu)."""
    from stamplib.evaluation import runner
    from stamplib.evaluation.spec import RunSpec

    if not isinstance(spec, RunSpec):
        shown = f"the dict {spec!r}" if isinstance(spec, dict) else f"a {type(spec).__name__}"
        raise TypeError(f"stamplib.run takes a RunSpec, got {shown}; pass stamplib.RunSpec.make('tent', ...) "
                        "(a dict's fields as keywords: stamplib.RunSpec.make(**fields))")
    return runner.run(spec, context if context is not None else RunContext.build(), force=force, progress=progress)


def explore(*args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - the signature is explorer.explore's
    """Scrub one method's run over a stream batch by batch: :func:`stamplib.explorer.explore`
    (imported on first use, so ``import stamplib`` stays light); without ``context``, the
    default one, as :func:`run` builds it."""
    from stamplib.explorer import explore as _explore

    return _explore(*args, **kwargs)
