"""stamplib — a reference, notebook-first reproduction of STAMP (Yu et al., ECCV 2024)."""

from stamplib.data.streams import StreamSpec
from stamplib.evaluation.runner import run
from stamplib.evaluation.spec import RunSpec
from stamplib.paths import RunContext
from stamplib.version import __version__

__all__ = ["RunContext", "RunSpec", "StreamSpec", "explore", "run", "__version__"]


def explore(*args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - the signature is explorer.explore's
    """Scrub one method's run over a stream batch by batch: :func:`stamplib.explorer.explore`
    (imported on first use, so ``import stamplib`` stays light)."""
    from stamplib.explorer import explore as _explore

    return _explore(*args, **kwargs)
