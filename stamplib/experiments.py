"""The notebooks' plans under their first name: ``stamplib.experiments.plan`` / ``compute``
(the README and older notebooks call them) are :mod:`stamplib.evaluation.plans`."""

from stamplib.evaluation.plans import (
    EXPERIMENTS,
    Cell,
    Plan,
    check_common,
    compute,
    plan,
    resolve_notebooks,
)

__all__ = ["EXPERIMENTS", "Cell", "Plan", "check_common", "compute", "plan", "resolve_notebooks"]
