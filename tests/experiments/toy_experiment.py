"""A toy experiment added the way docs/architecture.md says ("An experiment"): one module, its
planning function and its registration. tests/experiments/test_toy_experiment.py imports it in
this checkout, and installs it as a wheel whose entry point (group ``stamplib.experiments``)
names this module."""

from __future__ import annotations

from stamplib.experiments import plans, registry
from stamplib.experiments.parameters import NotebookParameters, names


def plan_learning_rates(experiment: registry.Experiment, params: NotebookParameters,
                        learning_rates: str = "0.001,0.01") -> registry.Plan:
    """Tent at each learning rate, one row per rate."""
    variants = [(f"lr={lr}", {"lr": float(lr)}, None) for lr in names(learning_rates, "learning_rates")]
    return plans.plan_rows(experiment, params, ("tent",), variants)


TOY = registry.register(registry.Experiment("99_toy_learning_rates", plan_learning_rates, plans.NOISE_SETUPS,
                                            variant_methods=("tent",)))
