"""stamplib — a reference, notebook-first reproduction of STAMP (Yu et al., ECCV 2024)."""

__version__ = "0.1.0"

from stamplib.evaluation.runner import run  # noqa: E402
from stamplib.evaluation.spec import RunSpec  # noqa: E402

__all__ = ["RunSpec", "run", "__version__"]
