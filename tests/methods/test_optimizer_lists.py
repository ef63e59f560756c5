"""Every optimiser of the table's methods takes its multi-tensor (``foreach``) path, a GPU's
default: one operator per parameter list, so ``benchmarks/launch_count.py`` on a CPU counts what
a GPU launches (issue 51). On a CPU the path gives the per-tensor loop's numbers bit for bit;
the issue's note names the run that compared every method's outputs and states over five steps."""

from __future__ import annotations

from functools import partial

import pytest

from stamplib import methods, models
from stamplib.methods import contract

PROBE = contract.Probe(partial(models.create, "resnet_cifar_tiny"))


@pytest.mark.parametrize("name", methods.TABLE_ORDER)
def test_optimisers_run_one_operator_per_parameter_list(name: str) -> None:
    method = PROBE.create(name)
    found = method.optimizers()
    assert found or not any(p.requires_grad for p in method.model.parameters()), f"{name}: no optimiser found"
    for optimizer in found:
        if type(optimizer).__name__ == "SAM":
            continue  # its two steps are its own; the base optimiser below does the update
        assert all(group.get("foreach") for group in optimizer.param_groups), (
            f"{name}: {type(optimizer).__name__} takes the per-tensor loop; pass foreach=True")
