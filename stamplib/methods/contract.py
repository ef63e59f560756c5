"""The TTA method contract (:class:`~stamplib.methods.base.TTAMethod`) as plain checks, one
function per property, usable without pytest (``python -m stamplib check-method`` and
tests/methods/test_contract.py both call them):

* ``step`` returns probabilities [B, C] (rows sum to 1) and an OOD score [B], all finite;
* the score says *higher = more likely an outlier*: it grows with the prediction's entropy
  (a method whose ``score_basis`` is not ``"prediction"`` checks its sign in its own tests);
* ``reset()`` restores every piece of state bit for bit (a method whose authors keep state
  across corruptions declares the switch that turns that off in ``exact_reset``), and the
  method then behaves exactly like a fresh one;
* randomness comes from the method's own generators, never from the global RNG;
* ``predict`` (the answer to a batch that arrives while the method is busy, without adapting)
  returns the same kind of output and changes no state at all;
* the caller's model is left untouched; unknown hyperparameters are refused; every
  hyperparameter set has typed, frozen hyperparameters.

Each check raises ``AssertionError`` (or the method's own exception) when the property does
not hold and :class:`NotApplicable` when it does not concern the method. The checks run the
method on a :class:`Probe`: methods know no networks, so the caller names the architecture,
e.g. from Python::

    from functools import partial
    from stamplib import models
    from stamplib.methods import contract

    contract.check_method("my_tta.mod:MyMethod", partial(models.create, "resnet_cifar_tiny"))
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from stamplib.methods.base import (
    HYPERPARAMETER_SETS,
    SourceData,
    TTAMethod,
    TTAOutput,
    create,
    method_class,
    resolve_config,
)

#: Builds a randomly initialised classifier for a number of classes.
Architecture = Callable[[int], nn.Module]


def source_images(n: int = 48, seed: int = 0, size: int = 16) -> torch.Tensor:
    """Seeded uint8 images N×size×size×3: a tiny "source training set"."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, size, size, 3), dtype=torch.uint8, generator=g)


def calibrate(model: nn.Module, images: torch.Tensor) -> nn.Module:
    """Set the BatchNorm running statistics of ``model`` to those of ``images`` (uint8 NHWC), so
    that eval-mode and train-mode features live on the same scale as for a trained network
    (with a fresh net the source covariance is ~0 and OWTTT's Gaussians degenerate). Eval mode."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.momentum = None  # cumulative average over the calibration batch
    with torch.no_grad():
        model.train()(images.permute(0, 3, 1, 2).float().div(255).contiguous())
    for bn in bns:
        bn.momentum = 0.1
    return model.eval()


@dataclass(frozen=True)
class Probe:
    """The small world the checks run a method in: a classifier built by ``architecture``
    (seed 0), its BatchNorm calibrated on seeded source images, which are also the source data;
    seeded uniform batches; the ``cifar10_c`` hyperparameters and method seed 3."""

    architecture: Architecture
    num_classes: int = 4
    size: int = 16
    source_count: int = 48

    def net(self) -> nn.Module:
        """The calibrated classifier, its head scaled up so that its predictions range from
        confident to uncertain (a random head alone predicts near-uniformly)."""
        with torch.random.fork_rng():
            torch.manual_seed(0)
            net = self.architecture(self.num_classes)
        calibrate(net, source_images(self.source_count, 0, self.size))
        heads = [m for m in net.modules() if isinstance(m, nn.Linear)]
        assert heads, "the probe's architecture needs a linear head"
        with torch.no_grad():
            heads[-1].weight.mul_(10.0)
        return net

    def source_data(self) -> SourceData:
        labels = torch.arange(self.source_count) % self.num_classes
        return SourceData("contract-test", source_images(self.source_count, 0, self.size), labels)

    def create(self, name: str, net: nn.Module | None = None, **overrides: Any) -> TTAMethod:
        source = self.source_data() if method_class(name).needs_source_data else None
        return create(name, net if net is not None else self.net(), self.num_classes, hyperparameter_set="cifar10_c",
                      seed=3, source_data=source, **overrides)

    def batches(self, count: int = 3, n: int = 24, seed: int = 10) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        return [torch.rand(n, 3, self.size, self.size, generator=g) for _ in range(count)]


class NotApplicable(Exception):
    """Raised by a check whose property does not concern the method (the message says why)."""


# -- comparing states ----------------------------------------------------------------------------
def assert_same(a: Any, b: Any, path: str = "state") -> None:
    """Recursively assert two states (tensors, dicts, sequences, scalars) are bit-identical."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, f"{path} differs"
        assert torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                     and torch.equal(a.nan_to_num(), b.nan_to_num())), f"{path} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), f"{path} differs in {sorted(a.keys() ^ b.keys(), key=str)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple, deque)):
        assert len(a) == len(b), f"{path} differs in length"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path} differs"


#: Attributes that are not state: the frozen initial state ``reset`` restores from, the
#: read-only inputs (the config and the execution options), and the device.
_NOT_STATE = {"_initial", "source_data", "config", "execution", "device"}


def method_state(method: Any) -> dict[str, Any]:
    """Everything a TTA method holds, as plain tensors and values: every module's state_dict,
    every optimiser's state, every generator's state and every memory's contents, found by
    walking the method's attributes. Two methods with equal states behave identically."""
    seen: set[int] = set()
    # Every object whose id is in ``seen`` stays alive until the walk ends: the walk makes
    # temporary dicts (state_dict copies), and a freed one's id may be given to a later object,
    # which would then pass for already seen.
    alive: list[Any] = []

    def walk(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.detach().clone()
        if isinstance(value, (bool, int, float, str, type(None))):
            return value
        if isinstance(value, torch.Generator):
            return value.get_state()
        if id(value) in seen:
            return "<seen>"
        seen.add(id(value))
        alive.append(value)
        if isinstance(value, torch.nn.Module):
            return walk(dict(value.state_dict()))
        if isinstance(value, torch.optim.Optimizer):
            return walk(copy.deepcopy(value.state_dict()))
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple, deque)):
            return [walk(v) for v in value]
        if callable(value) and not hasattr(value, "__dict__"):
            return "<callable>"
        if hasattr(value, "__dict__"):
            return {k: walk(v) for k, v in vars(value).items() if not k.startswith("__")}
        if hasattr(value, "__slots__"):
            return {k: walk(getattr(value, k)) for k in value.__slots__ if hasattr(value, k)}
        return repr(value)

    return {k: walk(v) for k, v in vars(method).items() if k not in _NOT_STATE}


def _refused(call: Callable[[], Any], pattern: str) -> None:
    """Assert that ``call()`` raises a ValueError whose message matches ``pattern``."""
    try:
        call()
    except ValueError as exc:
        assert re.search(pattern, str(exc)), f"refused with {str(exc)!r}, expected a message matching {pattern!r}"
        return
    raise AssertionError(f"accepted; expected a ValueError matching {pattern!r}")


# -- the properties ------------------------------------------------------------------------------
def _assert_output(out: TTAOutput, n: int, num_classes: int, who: str) -> None:
    """``out`` holds probabilities [n, num_classes] and a score [n], all finite."""
    assert out.probs.shape == (n, num_classes) and out.ood_score.shape == (n,), (
        f"{who}: probs {tuple(out.probs.shape)} and score {tuple(out.ood_score.shape)} for a batch "
        f"of {n}, expected ({n}, {num_classes}) and ({n},)")
    assert torch.isfinite(out.probs).all() and torch.isfinite(out.ood_score).all(), f"{who}: non-finite output"
    assert (out.probs >= 0).all() and torch.allclose(out.probs.sum(1), torch.ones(n), atol=1e-5), (
        f"{who}: probs are not probabilities (negative, or rows not summing to 1)")


def check_step_outputs(name: str, probe: Probe) -> None:
    """step returns probabilities [B, C] and a score [B], all finite; adapted tensors are Parameters."""
    method = probe.create(name)
    for x in probe.batches():
        _assert_output(method.step(x), x.shape[0], probe.num_classes, name)
    assert all(isinstance(p, nn.Parameter) for p in method.adapted_parameters()), (
        f"{name}: adapted_parameters() must list nn.Parameter objects")


def check_score_sign(name: str, probe: Probe) -> None:
    """The OOD score is higher for less confident predictions (its entropy)."""
    basis = method_class(name).score_basis
    if basis != "prediction":
        raise NotApplicable(f"{name} scores {basis}, not its prediction's entropy: its own tests check the sign")
    out = probe.create(name).step(probe.batches(1, n=64)[0])
    entropy = -torch.special.xlogy(out.probs, out.probs).sum(1)

    def ranks(v: torch.Tensor) -> torch.Tensor:
        return torch.argsort(torch.argsort(v)).double()

    # Spearman's rank correlation: 1 where the score is that entropy.
    a, b = ranks(out.ood_score), ranks(entropy)
    a, b = a - a.mean(), b - b.mean()
    spearman = float((a * b).sum() / (a.norm() * b.norm()))
    assert spearman > 0.5, f"{name}: score and entropy rank-correlate at {spearman:.2f} (higher = outlier)"


def check_reset_is_exact(name: str, probe: Probe) -> None:
    """reset() restores every piece of state, and the method then behaves like a fresh one."""
    exact = method_class(name).exact_reset
    fresh, used = probe.create(name, **exact), probe.create(name, **exact)
    for x in probe.batches():
        used.step(x)
    used.reset()
    assert_same(method_state(used), method_state(fresh), f"{name} (after reset(), vs a fresh one)")
    for x in probe.batches(2, seed=20):
        a, b = used.step(x), fresh.step(x)
        assert torch.equal(a.probs, b.probs) and torch.equal(a.ood_score, b.ood_score), (
            f"{name}: after reset() it steps differently from a fresh one")


def check_own_randomness(name: str, probe: Probe) -> None:
    """Randomness comes from the method's own generators, never from the global RNG."""

    def outputs(global_seed: int) -> list[torch.Tensor]:
        with torch.random.fork_rng():  # leave the caller's global RNG as it was
            torch.manual_seed(global_seed)
            method = probe.create(name)
            return [t for x in probe.batches() for t in dataclasses.astuple(method.step(x))]

    for a, b in zip(outputs(0), outputs(12345)):
        assert torch.equal(a, b), f"{name}: outputs change with the global seed; draw from self.generator"


def check_predict_changes_nothing(name: str, probe: Probe) -> None:
    """predict returns probabilities and a score like step, and leaves every piece of state
    (weights, buffers, optimiser, memories, generators) as it was."""
    method = probe.create(name)
    for x in probe.batches(2):
        method.step(x)
    before = method_state(method)
    x = probe.batches(1, seed=30)[0]
    _assert_output(method.predict(x), x.shape[0], probe.num_classes, f"{name}.predict")
    assert_same(method_state(method), before, f"{name} (after predict())")


def check_model_untouched(name: str, probe: Probe) -> None:
    """The caller's model is left untouched: weights, modules, requires_grad, eval mode."""
    net = probe.net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    kinds = [type(m) for m in net.modules()]
    flags = [p.requires_grad for p in net.parameters()]
    method = probe.create(name, net)
    for x in probe.batches(2):
        method.step(x)
    assert_same(dict(net.state_dict()), before, f"the caller's model (after {name} stepped)")
    assert [type(m) for m in net.modules()] == kinds, f"{name} replaced modules of the caller's model"
    assert [p.requires_grad for p in net.parameters()] == flags, f"{name} changed requires_grad of the caller's model"
    assert not net.training, f"{name} put the caller's model in training mode"


def check_refuses_unknown_hyperparameters(name: str, probe: Probe) -> None:
    """Unknown hyperparameters and hyperparameter sets are refused by name."""
    _refused(lambda: probe.create(name, no_such_knob=1), r"unknown hyperparameter\(s\) \['no_such_knob'\]")
    _refused(lambda: resolve_config(name, "digits"), "unknown hyperparameter set 'digits'")


def check_typed_frozen_hyperparameters(name: str, probe: Probe) -> None:
    """Every hyperparameter set has hyperparameters, a frozen config_cls instance; exact_reset names fields."""
    cls = method_class(name)
    for hyperparameter_set in HYPERPARAMETER_SETS:
        config = resolve_config(name, hyperparameter_set)
        assert isinstance(config, cls.config_cls) and dataclasses.is_dataclass(config), (
            f"{name}: the {hyperparameter_set} hyperparameters are not a {cls.config_cls.__name__} dataclass")
        try:
            copy.copy(config).x = 1  # on a copy: a mutable config must not gain the attribute
        except dataclasses.FrozenInstanceError:
            pass
        else:
            raise AssertionError(f"{name}: {type(config).__name__} is not frozen (@dataclass(frozen=True))")
    fields = {f.name for f in dataclasses.fields(cls.config_cls)}
    unknown = sorted(set(cls.exact_reset) - fields)
    assert not unknown, f"{name}: exact_reset names {unknown}, which are not hyperparameters"


#: The properties, in the order they are checked.
CHECKS: tuple[Callable[[str, Probe], None], ...] = (
    check_step_outputs,
    check_score_sign,
    check_reset_is_exact,
    check_own_randomness,
    check_predict_changes_nothing,
    check_model_untouched,
    check_refuses_unknown_hyperparameters,
    check_typed_frozen_hyperparameters,
)


@dataclass(frozen=True)
class ContractCheck:
    check: str  # the check function's name
    outcome: str  # "passed", "failed" or "skipped"
    detail: str = ""  # why it failed or was skipped

    def __str__(self) -> str:
        return f"{self.outcome:7s} {self.check}" + (f": {self.detail}" if self.detail else "")


def registered_name(method: str | type[TTAMethod]) -> str:
    """The name a method is registered under; a class is registered by its import path
    ``module:Class`` if it is not already (a method that cannot be loaded fails here)."""
    if isinstance(method, str):
        return method_class(method).name
    if method.name and method_class(method.name) is method:
        return method.name
    return method_class(f"{method.__module__}:{method.__qualname__}").name


def counts_line(results: list[ContractCheck]) -> str:
    """``12 passed, 1 skipped``: how the checks of :func:`check_method` ended."""
    counts = {o: sum(r.outcome == o for r in results) for o in ("passed", "failed", "skipped")}
    return ", ".join(f"{n} {o}" for o, n in counts.items() if n)


def check_method(method: str | type[TTAMethod], architecture: Architecture) -> list[ContractCheck]:
    """Run every check of :data:`CHECKS` on ``method`` (a name, ``package.module:Class`` or a
    TTAMethod subclass) in a :class:`Probe` of ``architecture``; a failing check does not stop
    the others."""
    name, probe = registered_name(method), Probe(architecture)
    results = []
    for check in CHECKS:
        try:
            check(name, probe)
        except NotApplicable as why:
            results.append(ContractCheck(check.__name__, "skipped", str(why)))
        except Exception as exc:  # noqa: BLE001 - a method's own crash fails its check too
            results.append(ContractCheck(check.__name__, "failed", f"{type(exc).__name__}: {exc}"))
        else:
            results.append(ContractCheck(check.__name__, "passed"))
    return results
