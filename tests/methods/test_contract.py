"""The TTA method contract (stamplib.methods.base), checked for every registered method — the
ten of the paper and any added later, with no edit here:

* ``step`` returns probabilities [B, C] (rows sum to 1) and an OOD score [B], all finite;
* the score says *higher = more likely an outlier*: it grows with the prediction's entropy
  (a method whose ``score_basis`` is ``"features"`` checks its sign in its own tests);
* ``reset()`` restores every piece of state bit for bit (a method whose authors keep state
  across corruptions declares the switch that turns that off in ``exact_reset``), and the
  method then behaves exactly like a fresh one;
* randomness comes from the method's own generators, never from the global RNG;
* the caller's model is left untouched; unknown hyperparameters are refused; every setting
  has hyperparameters.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from stamplib import methods
from tests.support import assert_same, calibrated_net, method_state, source_images

NUM_CLASSES = 4
SIZE = 16


def _source_data() -> methods.SourceData:
    return methods.SourceData("contract-test", source_images(48, 0, SIZE), torch.arange(48) % NUM_CLASSES)


def _net() -> torch.nn.Module:
    """A tiny ResNet calibrated like a trained one, its head scaled up so that its predictions
    range from confident to uncertain (a random head alone predicts near-uniformly)."""
    net = calibrated_net(NUM_CLASSES)
    with torch.no_grad():
        net.fc.weight.mul_(10.0)
    return net


def make(name: str, net: torch.nn.Module | None = None, **overrides) -> methods.TTAMethod:
    cls = methods.method_class(name)
    return methods.create(
        name, net if net is not None else _net(), NUM_CLASSES, setting="cifar10_c", seed=3,
        source_data=_source_data() if cls.needs_source_data else None, **overrides,
    )


def batches(count: int = 3, n: int = 24, seed: int = 10) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(n, 3, SIZE, SIZE, generator=g) for _ in range(count)]


#: Outside methods to check instead of the registered ones (``python -m stamplib check-method``
#: sets it): comma-separated names or ``package.module:Class`` paths.
OUTSIDE = [n for n in os.environ.get("STAMPLIB_CONTRACT_METHODS", "").split(",") if n.strip()]


@pytest.fixture(params=OUTSIDE or methods.available())
def name(request: pytest.FixtureRequest) -> str:
    return request.param


def test_step_returns_probabilities_and_a_score_per_sample(name: str) -> None:
    method = make(name)
    for x in batches():
        out = method.step(x)
        assert out.probs.shape == (x.shape[0], NUM_CLASSES) and out.ood_score.shape == (x.shape[0],)
        assert torch.isfinite(out.probs).all() and torch.isfinite(out.ood_score).all()
        assert (out.probs >= 0).all() and torch.allclose(out.probs.sum(1), torch.ones(x.shape[0]), atol=1e-5)
    assert all(isinstance(p, torch.nn.Parameter) for p in method.adapted_parameters())


def test_the_score_is_higher_for_less_confident_predictions(name: str) -> None:
    """Sign convention: rank correlation between the OOD score and the entropy of the
    prediction is clearly positive (it is 1 where the score is that entropy)."""
    basis = methods.method_class(name).score_basis
    if basis != "prediction":
        pytest.skip(f"{name} scores {basis}, not its prediction's entropy: its own tests check the sign")
    method = make(name)
    out = method.step(batches(1, n=64)[0])
    entropy = -torch.special.xlogy(out.probs, out.probs).sum(1)

    def ranks(v: torch.Tensor) -> torch.Tensor:
        return torch.argsort(torch.argsort(v)).double()

    a, b = ranks(out.ood_score), ranks(entropy)
    a, b = a - a.mean(), b - b.mean()
    spearman = float((a * b).sum() / (a.norm() * b.norm()))
    assert spearman > 0.5, f"{name}: score and entropy rank-correlate at {spearman:.2f}"


def test_reset_restores_every_piece_of_state(name: str) -> None:
    exact = methods.method_class(name).exact_reset
    fresh, used = make(name, **exact), make(name, **exact)
    for x in batches():
        used.step(x)
    used.reset()
    assert_same(method_state(used), method_state(fresh))
    for x in batches(2, seed=20):
        a, b = used.step(x), fresh.step(x)
        assert torch.equal(a.probs, b.probs) and torch.equal(a.ood_score, b.ood_score)


def test_randomness_comes_from_the_methods_own_generators(name: str) -> None:
    def outputs(global_seed: int) -> list[torch.Tensor]:
        torch.manual_seed(global_seed)
        method = make(name)
        return [t for x in batches() for t in dataclasses.astuple(method.step(x))]

    for a, b in zip(outputs(0), outputs(12345)):
        assert torch.equal(a, b)


def test_the_callers_model_is_left_untouched(name: str) -> None:
    net = _net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    kinds = [type(m) for m in net.modules()]
    flags = [p.requires_grad for p in net.parameters()]
    method = make(name, net)
    for x in batches(2):
        method.step(x)
    assert_same(dict(net.state_dict()), before)
    assert [type(m) for m in net.modules()] == kinds and [p.requires_grad for p in net.parameters()] == flags
    assert not net.training


def test_unknown_hyperparameters_and_settings_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['no_such_knob'\]"):
        make(name, no_such_knob=1)
    with pytest.raises(ValueError, match="unknown hyperparameter setting 'digits'"):
        methods.resolve_config(name, "digits")


def test_every_setting_has_typed_frozen_hyperparameters(name: str) -> None:
    cls = methods.method_class(name)
    for setting in methods.SETTINGS:
        config = methods.resolve_config(name, setting)
        assert isinstance(config, cls.config_cls) and dataclasses.is_dataclass(config)
        with pytest.raises(dataclasses.FrozenInstanceError):
            config.x = 1
    for key, value in cls.exact_reset.items():
        assert dataclasses.replace(methods.resolve_config(name, "cifar10_c"), **{key: value})


def test_the_registry_lists_every_method_of_the_paper() -> None:
    assert set(methods.PAPER_ORDER) <= set(methods.available())
    with pytest.raises(ValueError, match="unknown method 'stampp'; available: .*tent"):
        methods.create("stampp", _net(), NUM_CLASSES)
