"""stamplib — a reference, notebook-first reproduction of STAMP (Yu et al., ECCV 2024)."""

from typing import Any

from stamplib.data.streams import StreamSpec
from stamplib.evaluation import runner as _runner
from stamplib.evaluation.spec import RunSpec
from stamplib.paths import RunContext
from stamplib.version import __version__

__all__ = ["RunContext", "RunSpec", "StreamSpec", "explore", "run", "__version__"]


def run(spec: RunSpec, context: RunContext | None = None, *, force: bool = False, progress: bool = False) -> Any:
    """The record of ``spec``: stored, or computed and stored (unless ``force``), where
    ``context`` says (:func:`stamplib.evaluation.runner.run`). This is an edge, as the command
    line is: without a context it is the default one, built by :meth:`RunContext.build` as
    ``python -m stamplib run`` builds it from no flags (``$STAMPLIB_DATA_ROOT``, results/, cpu)."""
    if not isinstance(spec, RunSpec):
        shown = f"the dict {spec!r}" if isinstance(spec, dict) else f"a {type(spec).__name__}"
        raise TypeError(f"stamplib.run takes a RunSpec, got {shown}; pass stamplib.RunSpec.make('tent', ...) "
                        "(a dict's fields as keywords: stamplib.RunSpec.make(**fields))")
    return _runner.run(spec, context if context is not None else RunContext.build(), force=force, progress=progress)


def explore(*args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - the signature is explorer.explore's
    """Scrub one method's run over a stream batch by batch: :func:`stamplib.explorer.explore`
    (imported on first use, so ``import stamplib`` stays light); without ``context``, the
    default one, as :func:`run` builds it."""
    from stamplib.explorer import explore as _explore

    return _explore(*args, **kwargs)
