"""Open hyperparameter sets (issue 36 item 4): a method may give one fallback config; a
hyperparameter set it lacks is an error when the method is created, naming it and the method."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from stamplib import methods
from stamplib.methods.base import _REGISTRY, TTAMethod, TTAOutput, register
from tests.support import tiny_net


@dataclass(frozen=True)
class _Config:
    lr: float = 1e-3


class _OneHyperparameterSet(TTAMethod):
    config_cls = _Config
    configs = {"cifar10_c": _Config(lr=0.5)}

    def step(self, x: torch.Tensor) -> TTAOutput:
        logits = self.model(x)
        return TTAOutput(torch.softmax(logits, dim=1), -logits.max(dim=1).values)


class _Fallback(_OneHyperparameterSet):
    fallback_config = _Config()


@pytest.fixture
def registered():
    names = []

    def add(name: str, cls: type) -> str:
        register(name)(type(name, (cls,), {}))
        names.append(name)
        return name

    yield add
    for name in names:
        _REGISTRY.pop(name, None)


def test_a_method_without_every_hyperparameter_set_registers_and_fails_only_where_one_is_missing(registered) -> None:
    name = registered("one_set_toy", _OneHyperparameterSet)
    assert methods.create(name, tiny_net(), 4, hyperparameter_set="cifar10_c").config.lr == 0.5
    with pytest.raises(ValueError, match="method 'one_set_toy' has no hyperparameters for hyperparameter set "
                                         "'imagenet_c' \\(it has: cifar10_c\\); add configs\\['imagenet_c'\\] or a "
                                         "fallback_config"):
        methods.create(name, tiny_net(), 4, hyperparameter_set="imagenet_c")


def test_the_fallback_config_serves_every_hyperparameter_set_it_is_not_given(registered) -> None:
    name = registered("fallback_toy", _Fallback)
    assert methods.create(name, tiny_net(), 4, hyperparameter_set="cifar10_c").config.lr == 0.5  # its own
    for hyperparameter_set in ("cifar100_c", "imagenet_c", "cifar10_c_8_2", "cifar100_c_80_20"):
        assert methods.resolve_config(name, hyperparameter_set) == _Config()
    assert methods.resolve_config(name, "imagenet_c", lr="0.01").lr == 0.01  # overrides apply on top
    with pytest.raises(ValueError, match="unknown hyperparameter set 'digits'"):
        methods.resolve_config(name, "digits")


def test_registering_a_bad_name_is_a_clear_error_not_an_assertion() -> None:
    with pytest.raises(ValueError, match="new lower-case name"):
        register("Tent")(_Fallback)
    with pytest.raises(ValueError, match="new lower-case name"):
        register("tent")(_Fallback)


def test_the_table_rows_are_registered_and_keep_all_five_hyperparameter_sets_of_the_paper() -> None:
    # Registered ⊇ table rows: a method of one's own registers without a row (and may give only a
    # fallback_config); every row of the method tables has the paper's five hyperparameter sets.
    assert set(methods.TABLE_ORDER) <= set(methods.available())
    for name in methods.TABLE_ORDER:
        cls = methods.method_class(name)
        assert set(cls.configs) == set(methods.HYPERPARAMETER_SETS) and cls.fallback_config is None, name
