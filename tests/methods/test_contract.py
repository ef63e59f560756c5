"""The TTA method contract (stamplib.methods.contract), checked for every registered method —
the ten of the paper and any added later, with no edit here. The checks themselves live in
the library, where ``python -m stamplib check-method`` runs them on an outside method."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
import torch

from stamplib import methods, models
from stamplib.methods import base, contract

PROBE = contract.Probe(partial(models.create, "resnet_cifar_tiny"))


@pytest.fixture(params=methods.available())
def name(request: pytest.FixtureRequest) -> str:
    return request.param


def check(prop: Callable[[str, contract.Probe], None], name: str) -> None:
    try:
        prop(name, PROBE)
    except contract.NotApplicable as why:
        pytest.skip(str(why))


def test_step_returns_probabilities_and_a_score_per_sample(name: str) -> None:
    check(contract.check_step_outputs, name)


def test_the_score_is_higher_for_less_confident_predictions(name: str) -> None:
    """Sign convention: rank correlation between the OOD score and the entropy of the
    prediction is clearly positive (a method scoring features or energy is skipped)."""
    check(contract.check_score_sign, name)


def test_reset_restores_every_piece_of_state(name: str) -> None:
    check(contract.check_reset_is_exact, name)


def test_randomness_comes_from_the_methods_own_generators(name: str) -> None:
    check(contract.check_own_randomness, name)


def test_predict_answers_without_changing_any_state(name: str) -> None:
    check(contract.check_predict_changes_nothing, name)


@pytest.mark.parametrize("name", ["source", "bn_stats"])
def test_predict_is_step_for_methods_that_do_not_adapt(name: str) -> None:
    stepped, predicted = PROBE.create(name), PROBE.create(name)
    for x in PROBE.batches():
        a, b = stepped.step(x), predicted.predict(x)
        assert torch.equal(a.probs, b.probs) and torch.equal(a.ood_score, b.ood_score)


def test_a_predict_that_adapts_fails_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    class Eager(methods.method_class("tent")):  # adapts on the batches it should only predict
        name = "eager"

        def predict(self, x: torch.Tensor) -> methods.TTAOutput:
            return self.step(x)

    monkeypatch.setitem(base._REGISTRY, "eager", Eager)
    with pytest.raises(AssertionError, match=r"eager \(after predict\(\)\).* differs"):
        contract.check_predict_changes_nothing("eager", PROBE)


def test_the_callers_model_is_left_untouched(name: str) -> None:
    check(contract.check_model_untouched, name)


def test_unknown_hyperparameters_and_hyperparameter_sets_are_refused(name: str) -> None:
    check(contract.check_refuses_unknown_hyperparameters, name)


def test_every_setting_has_typed_frozen_hyperparameters(name: str) -> None:
    check(contract.check_typed_frozen_hyperparameters, name)


def test_the_registry_lists_every_method_of_the_paper() -> None:
    assert set(methods.PAPER_ORDER) <= set(methods.available())
    with pytest.raises(ValueError, match="unknown method 'stampp'; available: .*tent"):
        methods.create("stampp", PROBE.net(), PROBE.num_classes)


def test_check_method_runs_every_check() -> None:
    results = contract.check_method("bn_stats", PROBE.architecture)
    assert [r.check for r in results] == [c.__name__ for c in contract.CHECKS]
    assert {r.outcome for r in results} == {"passed"}


def test_check_method_reports_a_broken_method_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    class Leaky(methods.method_class("tent")):  # draws from the global RNG: not reproducible
        name = "leaky"

        def step(self, x: torch.Tensor) -> methods.TTAOutput:
            return super().step(x + 1e-3 * torch.rand_like(x))

    monkeypatch.setitem(base._REGISTRY, "leaky", Leaky)  # registered for this test only
    results = {r.check: r for r in contract.check_method(Leaky, PROBE.architecture)}
    assert results["check_own_randomness"].outcome == "failed"
    assert "global seed" in results["check_own_randomness"].detail
    assert results["check_typed_frozen_hyperparameters"].outcome == "passed"
