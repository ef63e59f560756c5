"""stamplib — a reference, notebook-first reproduction of STAMP (Yu et al., ECCV 2024)."""

from stamplib.evaluation.runner import run
from stamplib.evaluation.spec import RunSpec
from stamplib.version import __version__

__all__ = ["RunSpec", "run", "__version__"]
