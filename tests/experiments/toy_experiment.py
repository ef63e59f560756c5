"""A toy experiment added the way docs/architecture.md says ("A notebook"): one module, its
planning function and its registration. tests/experiments/test_toy_experiment.py imports it in
this checkout and from a wheel installed outside it."""

from __future__ import annotations

from stamplib.experiments import plans
from stamplib.experiments.parameters import NotebookParameters, names


def plan_learning_rates(experiment: plans.Experiment, params: NotebookParameters,
                        learning_rates: str = "0.001,0.01") -> plans.Plan:
    """Tent at each learning rate, one row per rate."""
    variants = [(f"lr={lr}", {"lr": float(lr)}, None) for lr in names(learning_rates, "learning_rates")]
    return plans.plan_rows(experiment, params, ("tent",), variants)


TOY = plans.register(plans.Experiment("99_toy_learning_rates", plan_learning_rates, plans.NOISE_SETUPS,
                                      variant_methods=("tent",)))
