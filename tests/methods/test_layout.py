"""On a CPU a record's network runs channels-last (assembly.network_layout), a speed choice only:
every method, with every branch it takes on a few batches, gives the same predictions and scores
in either layout up to float rounding. In float64, so that rounding stays at 1e-13 and a real
difference shows (in float32 OWTTT's steps amplify the layouts' different rounding to 1e-3). A
method that reshapes activations with ``view`` or assumes contiguous memory fails here, not in
a table."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from stamplib import methods, models
from stamplib.evaluation.assembly import layout_name, network_layout
from stamplib.methods import contract

PROBE = contract.Probe(partial(models.create, "resnet_cifar_tiny"))


def outputs_in(layout: torch.memory_format, name: str) -> list[methods.TTAOutput]:
    method = PROBE.create(name, PROBE.net().to(dtype=torch.float64, memory_format=layout))
    return [method.step(x.double()) for x in PROBE.batches(count=4)]


@pytest.mark.parametrize("name", methods.available())
def test_every_method_gives_the_same_outputs_channels_last(name: str) -> None:
    plain, channels_last = outputs_in(torch.contiguous_format, name), outputs_in(torch.channels_last, name)
    for step, (a, b) in enumerate(zip(plain, channels_last)):
        where = f"{name} step {step}"
        torch.testing.assert_close(b.probs, a.probs, atol=1e-9, rtol=1e-9, msg=lambda m, w=where: f"{w}: {m}")
        torch.testing.assert_close(b.ood_score, a.ood_score, atol=1e-9, rtol=1e-9,
                                   msg=lambda m, w=where: f"{w}: {m}")


def test_records_run_channels_last_on_a_cpu_and_keep_the_default_on_a_gpu() -> None:
    assert network_layout("cpu") == torch.channels_last and layout_name(network_layout("cpu")) == "channels_last"
    assert network_layout("cuda:0") == torch.contiguous_format
    assert layout_name(network_layout("cuda")) == "contiguous"
