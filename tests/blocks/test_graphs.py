"""The CUDA-graph switch (issue 42 item 2) on a CPU: the compiled network is traced but nothing
is replayed, so its results must equal the eager ones; tests/cuda compares the replays."""

from __future__ import annotations

import copy

import pytest
import torch

from stamplib import methods
from stamplib.blocks import graphs
from tests.support import image_batch
from tests.support import tiny_net as resnet


def _outputs(method: methods.TTAMethod, replay: bool) -> list[torch.Tensor]:
    out = []
    for seed in range(2):
        if replay:
            graphs.step_begins()
        out.append(method.step(image_batch(8, seed=seed, size=16)).probs.detach())
    return out


@pytest.mark.parametrize("name", ["tent"])  # one trace of forward and backward; the rest: tests/cuda
def test_a_replayed_network_adapts_exactly_as_the_eager_one(name: str) -> None:
    eager = methods.create(name, resnet(), 4, seed=3)
    replayed = methods.create(name, graphs.replayed(resnet()), 4, seed=3)
    for got, want in zip(_outputs(replayed, True), _outputs(eager, False)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(replayed.model.parameters(), eager.model.parameters()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_a_deep_copy_of_a_replayed_network_is_its_own() -> None:
    """A method's teacher is a deep copy made at every reset: it must wrap the copy."""
    net = graphs.replayed(resnet())
    twin = copy.deepcopy(net)
    assert type(twin) is type(net) and twin._orig_mod is not net._orig_mod
    assert not ({id(p) for p in twin.parameters()} & {id(p) for p in net.parameters()})
