"""The TTA method base class (its contract is checked by :mod:`stamplib.methods.contract`), the
registry and hyperparameter resolution.

A method wraps a source model and is driven batch by batch: ``step(x)`` returns the
prediction and the OOD score for ``x`` and adapts the model as the method prescribes.
``reset()`` brings back the bit-identical initial state (weights, optimiser, memories,
schedulers and the method's own random generators), as the protocol does before every
corruption (protocol.md §1.2) — except where the authors' code keeps some state, which each such
method documents with the switch that clears it (SAR and SoTTA: the base optimiser's state
inside SAM; EATA: the moving probability vector).

Hyperparameters live in one frozen dataclass per method, with one instance per
*hyperparameter set* (the paper's five, baselines.md §0.1, which calls them settings). ``create``
takes the hyperparameter set by name and applies keyword overrides, refusing unknown names.
Methods never see a data set's name: the evaluation layer looks its hyperparameter set up in the
data set registry.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from stamplib.blocks.bn import freeze_all_but, norm_affine_parameters, use_batch_statistics
from stamplib.blocks.entropy import energy_score, logit_entropy
from stamplib.blocks.sam import SAM
from stamplib.validation import coerce

#: The hyperparameter sets of the paper (baselines.md §0.1, stamp.md §7). Which one a data set
#: uses is the data set's business (``stamplib.data``); a method only sees the hyperparameter set.
HYPERPARAMETER_SETS = ("cifar10_c", "cifar100_c", "imagenet_c", "cifar10_c_8_2", "cifar100_c_80_20")

#: The ten methods of the paper in the row order of its Tables 1–3: the first rows of the method
#: tables and the rows its numbers are compared with. Being registered adds no row: a method
#: that wants one after these says so itself (:attr:`TTAMethod.table_row`, :func:`table_order`).
PAPER_ORDER = ("source", "bn_stats", "tent", "eata", "sar", "cotta", "rotta", "sotta", "owttt", "stamp")


@dataclass(frozen=True)
class SourceData:
    """Clean source-domain training data for methods that need source statistics
    (EATA's Fisher information, OWTTT's prototypes). Methods never read files: the evaluation
    layer hands this in. ``name`` keys the statistics cache."""

    name: str
    images: torch.Tensor  # uint8 [N, H, W, 3]
    labels: torch.Tensor  # long [N]


@dataclass(frozen=True)
class Execution:
    """How a method computes, beside its config (what it computes): options that change the
    speed and at most the float rounding, never the algorithm. They are no hyperparameters, so
    no spec, key or tuning grid names them; a record is always computed with the defaults
    (``Execution()``), and a method that has no use for an option ignores it.

    ``batched_views``: STAMP's K views go through ``view_chunk`` views per forward (False: the
    plain loop, one forward per view). ``view_chunk``: views per forward for STAMP's views and
    CoTTA's augmented teacher views, each view normalised with its own BN statistics (0: chosen
    by device and image count, :func:`stamplib.blocks.bn.views_per_forward`). ``channels_last``:
    STAMP's inputs (and model) in channels-last. ``bf16_autocast``: STAMP's forwards under
    bfloat16 autocast, on CUDA only (for timings: bfloat16 rounds more than float32 does).
    Values given as text (a command line) are read as the field's type says."""

    batched_views: bool = True
    view_chunk: int = 0
    channels_last: bool = False
    bf16_autocast: bool = False

    def __post_init__(self) -> None:
        for name, hint in typing.get_type_hints(type(self)).items():
            object.__setattr__(self, name, coerce(f"execution option {name!r}", getattr(self, name), hint))
        if self.view_chunk < 0:
            raise ValueError(f"execution option 'view_chunk' counts views per forward (0 = chosen by device), "
                             f"got {self.view_chunk}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The options' names (to tell them from a method's hyperparameters)."""
        return tuple(f.name for f in dataclasses.fields(cls))


#: The execution every record is computed with: the defaults.
RECORD_EXECUTION = Execution()


#: Source statistics computed in this process, keyed by (source name, statistic name).
_SOURCE_STATISTICS: dict[tuple[str, str], Any] = {}


@dataclass(frozen=True)
class TTAOutput:
    """What a method emits for one batch.

    probs: [B, C] class probabilities (prediction = argmax).
    ood_score: [B] outlier score, *higher = more likely an outlier* (e.g. the entropy).
    """

    probs: torch.Tensor
    ood_score: torch.Tensor

    def __post_init__(self) -> None:
        assert self.probs.dim() == 2, f"probs must be [B, C], got {tuple(self.probs.shape)}"
        assert self.ood_score.shape == self.probs.shape[:1], "ood_score must be [B]"


def score_of_logits(logits: torch.Tensor, basis: str) -> torch.Tensor:
    """The OOD score of ``logits`` for a method whose :attr:`TTAMethod.score_basis` is
    ``basis``: the entropy for ``"prediction"``, the negative free energy for ``"energy"``.
    A score of ``"features"`` needs the features, which only the method has."""
    if basis == "prediction":
        return logit_entropy(logits)
    if basis == "energy":
        return energy_score(logits)
    raise NotImplementedError(f"a method that scores {basis!r} overrides predict() to compute its score")


def index_mask(indices: torch.Tensor, size: int) -> torch.Tensor:
    """Bool mask of length ``size``, True at ``indices`` (for :meth:`TTAMethod.report`)."""
    mask = torch.zeros(size, dtype=torch.bool, device=indices.device)
    mask[indices] = True
    return mask


@dataclass(frozen=True)
class BatchReport:
    """What a method says about one batch for its trace (every field optional; the runner
    adds what needs labels: :mod:`stamplib.evaluation.traces`)."""

    passed: torch.Tensor | None = None  # bool [B]: the samples its filter let through
    # The adaptation loss of this batch (None: no update); a 0-dim tensor stays on its device until
    # the tracer reads it after the batch's own synchronisation, so a step never waits for it.
    loss: torch.Tensor | float | None = None
    memory_tags: torch.Tensor | None = None  # long [M]: each memory item's tag (:meth:`TTAMethod.sample_tags`)
    memory_labels: torch.Tensor | None = None  # long [M]: the memory's pseudo-labels
    step_size: float | None = None  # the step size (learning rate) of this batch's update
    batch_tags: torch.Tensor | None = None  # long [B]: the tags this batch's samples were given
    adapted_tags: torch.Tensor | None = None  # long [A]: the tags of the samples this batch's update was computed on


class TTAMethod:
    """Base class. Subclasses set ``config_cls`` and ``configs`` and implement
    ``setup`` (configure the model, build the optimiser) and ``step``."""

    name: ClassVar[str] = ""
    config_cls: ClassVar[type]
    #: One frozen config per hyperparameter set (the paper's five, :data:`HYPERPARAMETER_SETS`).
    #: A hyperparameter set without one takes :attr:`fallback_config`; without that either, asking
    #: for it is an error naming the hyperparameter set and the method (:meth:`config_for`).
    configs: ClassVar[dict[str, Any]] = {}
    #: The config of every hyperparameter set missing from :attr:`configs` (None: those are refused).
    #: A method of one's own may give only this (``templates/my_method.py``).
    fallback_config: ClassVar[Any] = None

    @classmethod
    def config_for(cls, hyperparameter_set: str) -> Any:
        """The config of ``hyperparameter_set``: its own, else :attr:`fallback_config`, else a ValueError."""
        hyperparameter_set = check_hyperparameter_set(hyperparameter_set)
        config = cls.configs.get(hyperparameter_set, cls.fallback_config)
        if config is None:
            have = ", ".join(cls.configs) or "none"
            raise ValueError(f"method {cls.name or cls.__name__!r} has no hyperparameters for hyperparameter set "
                             f"{hyperparameter_set!r} (it has: {have}); add configs[{hyperparameter_set!r}] or a "
                             "fallback_config to the class")
        return config

    #: Set True by methods that need :class:`SourceData` (``create`` then insists on it).
    needs_source_data: ClassVar[bool] = False

    #: What ``ood_score`` measures: ``"prediction"`` — the uncertainty of the returned
    #: probabilities (an entropy or the like, so it grows with their entropy); ``"features"`` —
    #: a distance in feature space (OWTTT's distance to the source prototypes); ``"energy"`` —
    #: the free energy −logsumexp of the logits (UniEnt, OSTTA), which ranks by the logits'
    #: magnitude rather than by the probabilities' entropy.
    score_basis: ClassVar[str] = "prediction"

    #: True for methods that call :meth:`report` (their records carry a per-batch trace).
    reports_trace: ClassVar[bool] = False
    #: Whether the method can be told which samples of a batch are outliers, for the oracle
    #: diagnostic (:mod:`stamplib.evaluation.diagnostics`; never in a method's own run).
    accepts_oracle: ClassVar[bool] = False

    #: Its place among the default rows of the method tables (notebooks 02–05 plan every such
    #: row) after the paper's ten (:data:`PAPER_ORDER`): 11, 12, … in row order. None: no row,
    #: though the method runs by name everywhere (``methods=...``, ``run``, ``tune``). Read from
    #: the class itself, never inherited, so that a subclass opts in on its own.
    table_row: ClassVar[int | None] = None

    #: The smallest batch the method can adapt on. Most adapt on one sample (BN then normalises
    #: with that sample's own spatial statistics); a method whose authors' step needs several
    #: samples (a mixture fitted to the batch) sets more, and a RunSpec with a smaller
    #: ``batch_size`` is refused (:func:`check_batch_size`).
    min_batch_size: ClassVar[int] = 1
    #: Why, in a few words, for the error message (with the authors' file that shows it).
    min_batch_reason: ClassVar[str] = ""

    #: Hyperparameter overrides under which ``reset()`` restores *every* piece of state. A
    #: method whose authors keep something across corruptions (a quirk reproduced by default)
    #: names the switch that turns the quirk off, so that the method contract
    #: (:mod:`stamplib.methods.contract`) can check everything else bit for bit.
    exact_reset: ClassVar[dict[str, Any]] = {}

    @classmethod
    def source_images_needed(cls, config: Any) -> int | None:
        """How many source images, the first N by index, the method reads (None: all), so that
        the caller need not load 50,000 ImageNet images for EATA's 2,000."""
        return None

    def __init__(
        self,
        model: nn.Module,
        num_classes: int,
        config: Any,
        seed: int = 0,
        source_data: SourceData | None = None,
        execution: Execution = RECORD_EXECUTION,
    ) -> None:
        assert num_classes >= 2, "a classifier needs at least two classes"
        if self.needs_source_data and source_data is None:
            raise ValueError(f"method {self.name!r} needs source_data=SourceData(...) (clean training images)")
        self.source_data = source_data
        self.model = model
        self.num_classes = num_classes
        self.config = config
        self.execution = execution
        self.seed = seed
        self.device = next(model.parameters()).device
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.cpu_generator = torch.Generator().manual_seed(seed)
        self.optimizer: torch.optim.Optimizer | None = None
        self._clear_diagnostics()
        self.setup()
        self._initial = self._capture()
        self.reset_buffers()

    # -- to implement -------------------------------------------------------------------------
    def setup(self) -> None:
        """Configure ``self.model`` and build ``self.optimizer`` (None if nothing adapts)."""

    def reset_buffers(self) -> None:
        """Clear memories, counters and schedulers (called at init and by ``reset``)."""

    def step(self, x: torch.Tensor) -> TTAOutput:
        raise NotImplementedError

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> TTAOutput:
        """The prediction and OOD score of ``x`` by the model as it stands, without adapting and
        without changing any state (weights, buffers, memories, generators): what the method
        answers for a batch that arrives while it is still busy adapting on an earlier one (the
        realistic online protocol, :mod:`stamplib.evaluation.runner`). One forward of
        :attr:`model`, scored as :attr:`score_basis` says; a method that predicts with another
        network (a teacher) or scores otherwise overrides it."""
        logits = self.model(x)
        return TTAOutput(torch.softmax(logits, dim=1), score_of_logits(logits, self.score_basis))

    # -- shared ---------------------------------------------------------------------------------
    def adapt_bn_affine(self, exclude_last_stage: bool) -> list[nn.Parameter]:
        """For ``setup``: the configuration Tent introduced and most methods share. BatchNorm
        normalises with each batch's own statistics (train mode), and only the normalisation
        layers' affine parameters stay trainable; returned, in module order, for the optimiser.
        ``exclude_last_stage`` keeps the last residual stage frozen (SAR, STAMP)."""
        params = norm_affine_parameters(self.model, exclude_last_stage=exclude_last_stage)
        use_batch_statistics(self.model).train()
        freeze_all_but(self.model, params)
        return params

    def sample_tags(self, size: int) -> torch.Tensor:
        """Tags (long, CPU) for the ``size`` samples of the batch being stepped: their order of
        arrival among the samples tagged since the last reset. A memory keeps each item's tag
        beside it and the batch's :meth:`report` names the tags it gave, so that whoever traces
        the stream can tell which stream sample each memory item is (the tracer owns stream
        positions; the method never sees them). Tags never change what a method computes."""
        tags = torch.arange(self._tags_issued, self._tags_issued + size)
        self._tags_issued += size
        self._batch_tags = tags
        return tags

    def report(
        self,
        passed: torch.Tensor | None = None,
        loss: torch.Tensor | float | None = None,
        memory_tags: torch.Tensor | None = None,
        memory_labels: torch.Tensor | None = None,
        step_size: float | None = None,
        adapted_tags: torch.Tensor | None = None,
    ) -> None:
        """Keep this batch's diagnostics for :meth:`take_report` (call it at the end of ``step``).
        ``passed``: bool mask over the batch; ``memory_tags``: the tags of the memory's items, as
        :meth:`sample_tags` gave them; ``step_size``: the one this batch's update used (or would
        have, had it adapted); ``adapted_tags``: the tags of the samples the update was computed
        on. The batch's own tags, if it took some, go with it."""
        assert passed is None or passed.dtype == torch.bool, "passed is a bool mask over the batch"
        value = loss.detach() if isinstance(loss, torch.Tensor) else None if loss is None else float(loss)
        self._report = BatchReport(passed, value, memory_tags, memory_labels, step_size, self._batch_tags,
                                   adapted_tags)
        self._batch_tags = None

    def reveal_outliers(self, is_outlier: torch.Tensor) -> None:
        """The oracle diagnostic only: which samples of the next batch are outliers (bool ``[B]``),
        for that one step (:meth:`take_revealed`). A method's own run never calls it."""
        assert self.accepts_oracle, f"{type(self).__name__} does not accept an oracle"
        assert is_outlier.dtype == torch.bool and is_outlier.dim() == 1, "a bool mask over the batch"
        self._revealed = is_outlier

    def take_revealed(self) -> torch.Tensor | None:
        """The outlier mask :meth:`reveal_outliers` gave for this step, once (None outside the oracle)."""
        revealed, self._revealed = self._revealed, None
        return revealed

    def take_report(self) -> BatchReport | None:
        """The last step's report, once (None when the step reported nothing)."""
        report, self._report = self._report, None
        return report

    def _clear_diagnostics(self) -> None:
        self._revealed: torch.Tensor | None = None
        self._tags_issued = 0
        self._batch_tags: torch.Tensor | None = None
        self._report: BatchReport | None = None

    def source_statistic(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per process for this source data set and ``key``, then cached."""
        assert self.source_data is not None, "source statistics need source_data"
        cache_key = (self.source_data.name, key)
        if cache_key not in _SOURCE_STATISTICS:
            _SOURCE_STATISTICS[cache_key] = compute()
        return _SOURCE_STATISTICS[cache_key]

    def adapted_parameters(self) -> list[nn.Parameter]:
        """The tensors the optimiser updates (empty for methods that do not adapt)."""
        if self.optimizer is None:
            return []
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def optimizers(self) -> list[torch.optim.Optimizer]:
        """Every optimiser the method holds, and SAM's base optimiser after its wrapper: what a
        check of the update path (``foreach``) or a count of optimiser state has to look at."""
        held = [v for v in vars(self).values() if isinstance(v, torch.optim.Optimizer)]
        return held + [o.base_optimizer for o in held
                       if isinstance(getattr(o, "base_optimizer", None), torch.optim.Optimizer)]

    def _capture(self) -> dict[str, Any]:
        return {
            "model": copy.deepcopy(self.model.state_dict()),
            "optimizer": copy.deepcopy(self.optimizer.state_dict()) if self.optimizer else None,
            "generator": self.generator.get_state(),
            "cpu_generator": self.cpu_generator.get_state(),
        }

    def reset(self) -> None:
        """Restore the initial state: bit-identical, except where a method keeps some state across
        resets as its authors' code does (SAM's base optimiser, EATA's moving probabilities)."""
        self.model.load_state_dict(self._initial["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(copy.deepcopy(self._initial["optimizer"]))
        self.generator.set_state(self._initial["generator"])
        self.cpu_generator.set_state(self._initial["cpu_generator"])
        self.reset_buffers()
        self._clear_diagnostics()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"


class SAMBaseline(TTAMethod):
    """A baseline that adapts with the authors' SAM around a base optimiser with state (SAR: SGD
    with momentum, SoTTA: Adam) and traces every batch. Their SAM keeps the base optimiser's state
    across resets (baselines.md §0); the config's ``reset_base_optimizer_state``
    (:class:`~stamplib.blocks.sam.SAMStateSwitch`) clears it, which the contract's exact reset sets."""

    reports_trace = True
    exact_reset = {"reset_base_optimizer_state": True}

    def sam(self, params: list[nn.Parameter], base: Callable[..., torch.optim.Optimizer],
            **base_options: Any) -> SAM:
        """SAM over ``base`` (given ``base_options``) with the config's radius ``rho``, step size
        ``lr`` and state switch."""
        cfg = self.config
        return SAM(params, base, rho=cfg.rho, lr=cfg.lr, **base_options,
                   reset_base_optimizer_state=cfg.reset_base_optimizer_state)


_REGISTRY: dict[str, type[TTAMethod]] = {}


def register(name: str) -> Callable[[type[TTAMethod]], type[TTAMethod]]:
    """Class decorator adding a method to the registry under a lower-case name."""

    def wrap(cls: type[TTAMethod]) -> type[TTAMethod]:
        if name != name.lower() or name in _REGISTRY:
            raise ValueError(f"a method is registered under a new lower-case name, got {name!r}")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


#: Entry-point group through which an installed package adds methods by name:
#: ``[project.entry-points."stamplib.methods"] mymethod = "my_package.module:MyMethod"``.
ENTRY_POINT_GROUP = "stamplib.methods"
_entry_points_loaded = False


def _add_outside(name: str, cls: object, origin: str) -> type[TTAMethod]:
    """Register a method defined outside the package under ``name`` (after the checks
    ``register`` makes), or say what is wrong with it."""
    if not (isinstance(cls, type) and issubclass(cls, TTAMethod)):
        raise ValueError(f"{origin} is not a TTAMethod subclass (see templates/my_method.py)")
    if not cls.configs and cls.fallback_config is None:
        raise ValueError(f"{origin} has no hyperparameters: give it configs per hyperparameter set or a "
                         "fallback_config (see templates/my_method.py)")
    cls.name = name
    _REGISTRY[name] = cls
    return cls


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _REGISTRY:
            _add_outside(ep.name, ep.load(), f"entry point {ep.name} = {ep.value}")


def available() -> list[str]:
    """Registered method names: the package's, installed packages' (entry points) and those
    already used by an import path ``package.module:Class``."""
    _load_entry_points()
    return sorted(_REGISTRY)


def table_order() -> tuple[str, ...]:
    """The default rows of the method tables: :data:`PAPER_ORDER`, then each registered method
    whose class sets :attr:`TTAMethod.table_row`, in that order (``stamplib.methods.TABLE_ORDER``
    holds this for the package's methods). Two methods on one row, a row among the paper's ten,
    or a paper method with a row of its own is a ValueError naming them."""
    rows: dict[int, str] = {}
    for name, cls in _REGISTRY.items():
        row = cls.__dict__.get("table_row")
        if row is None:
            continue
        if name in PAPER_ORDER or isinstance(row, bool) or not isinstance(row, int) or row <= len(PAPER_ORDER):
            raise ValueError(f"method {name!r}: table_row places a method after the paper's {len(PAPER_ORDER)} "
                             f"methods (an integer above {len(PAPER_ORDER)}), and the paper's own have their "
                             f"rows already; got {row!r}")
        if row in rows:
            raise ValueError(f"methods {rows[row]!r} and {name!r} both ask for table_row {row}")
        rows[row] = name
    return PAPER_ORDER + tuple(rows[row] for row in sorted(rows))


def listing_lines(hyperparameter_set: str) -> list[str]:
    """Every method with its hyperparameters under ``hyperparameter_set``, one line each (``methods``)."""
    return [f"{name:11s} {resolve_config(name, hyperparameter_set)}" for name in available()]


def check_batch_size(name: str, batch_size: object) -> int:
    """``batch_size`` as an int, if method ``name`` can adapt on batches that small
    (:attr:`TTAMethod.min_batch_size`); else one ValueError naming the smallest it supports."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size is the number of samples per batch, an integer ≥ 1 (the paper uses 64), "
                         f"got {batch_size!r}")
    smallest = method_class(name).min_batch_size
    if batch_size < smallest:
        why = method_class(name).min_batch_reason
        raise ValueError(f"method {name!r} cannot adapt on a batch of {batch_size}: the smallest batch it supports "
                         f"is {smallest}{f' ({why})' if why else ''}; give batch_size ≥ {smallest}")
    return batch_size


def method_class(name: str) -> type[TTAMethod]:
    """The class of a registered method, or of ``package.module:Class`` (imported and then
    registered under that string, so records, plans and grids name it like any other)."""
    if name not in _REGISTRY:
        _load_entry_points()
    if name not in _REGISTRY and ":" in name:
        import importlib

        module, _, attribute = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise ValueError(
                f"cannot load method {name!r} ({exc}); an outside method is named "
                "package.module:Class and its package must be importable (on PYTHONPATH or installed)"
            ) from exc
        _add_outside(name, cls, name)
    if name not in _REGISTRY:
        raise ValueError(_unregistered(name) or (
            f"unknown method {name!r}; available: {', '.join(available())}, or an outside method as "
            "package.module:Class"
        ))
    return _REGISTRY[name]


def _unregistered(name: str) -> str | None:
    """What to do when ``name`` is a file of this package that defines a method but registers
    none (templates/my_method.py dropped in as it is, say): the package's own loop imported it."""
    module = sys.modules.get(f"{__package__}.{name}")
    if module is None or module.__name__ == __name__:
        return None
    registered = set(_REGISTRY.values())
    classes = [value.__name__ for value in vars(module).values()
               if isinstance(value, type) and issubclass(value, TTAMethod)
               and value.__module__ == module.__name__ and value not in registered]
    if not classes:
        return None
    return (f"stamplib/methods/{name}.py defines {', '.join(classes)} but registers no method: put "
            f"@register({name!r}) (stamplib.methods.base) above its class (docs/architecture.md, \"Adding a "
            "method\"), or keep the file outside the package and name it package.module:Class")


def check_hyperparameter_set(hyperparameter_set: str) -> str:
    """``hyperparameter_set`` if it is one of :data:`HYPERPARAMETER_SETS`, else a ValueError naming them."""
    if hyperparameter_set not in HYPERPARAMETER_SETS:
        raise ValueError(f"unknown hyperparameter set {hyperparameter_set!r}; choose one of "
                         f"{', '.join(HYPERPARAMETER_SETS)}")
    return hyperparameter_set


def field_types(name: str, hyperparameter_set: str) -> dict[str, Any]:
    """Hyperparameter name → type of method ``name``'s config (its typed dataclass); an
    annotation that cannot be resolved (an outside method's module may not import what it
    names) falls back to the type of the value the config of ``hyperparameter_set`` holds."""
    config = method_class(name).config_for(hyperparameter_set)
    try:
        hints = typing.get_type_hints(type(config))
    except Exception:
        hints = {}
    return {f.name: hints.get(f.name, type(getattr(config, f.name))) for f in dataclasses.fields(config)}


def typed_overrides(name: str, hyperparameter_set: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with each value as its field's type holds it (:func:`stamplib.validation.coerce`:
    text from the command line is read as the type says); an unknown name, or a value its type
    refuses, is one ValueError that names the hyperparameter."""
    types_ = field_types(name, hyperparameter_set)
    unknown = sorted(set(overrides) - set(types_))
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) {unknown} for method {name!r}; valid: {', '.join(sorted(types_))}"
        )
    return {field: coerce(f"hyperparameter {field!r} of {name!r}", value, types_[field])
            for field, value in overrides.items()}


def resolve_config(name: str, hyperparameter_set: str, **overrides: Any) -> Any:
    """The method's typed hyperparameters for ``hyperparameter_set`` with ``overrides`` applied: each value
    is checked against (and text converted to) its field's type, then the config's own checks
    run; either failure is one ValueError that names the hyperparameter."""
    return config_with(name, hyperparameter_set, typed_overrides(name, hyperparameter_set, overrides))


def config_with(name: str, hyperparameter_set: str, typed: dict[str, Any]) -> Any:
    """The config of ``hyperparameter_set`` with overrides already typed (:func:`typed_overrides`) applied,
    after the config's own checks: for whoever keeps the typed overrides too (a RunSpec), so
    that they are typed once."""
    base = method_class(name).config_for(hyperparameter_set)
    try:
        return dataclasses.replace(base, **typed)
    except AssertionError as err:
        given = ", ".join(f"{k}={v!r}" for k, v in typed.items())
        reason = str(err) or f"{type(base).__name__} refuses them"
        raise ValueError(f"hyperparameter(s) {given} out of range for {name!r}: {reason}") from None


def create(
    name: str,
    model: nn.Module,
    num_classes: int,
    hyperparameter_set: str | None = None,
    seed: int = 0,
    source_data: SourceData | None = None,
    *,
    config: Any = None,
    execution: Execution = RECORD_EXECUTION,
    **overrides: Any,
) -> TTAMethod:
    """Build method ``name`` around a private copy of ``model`` (the caller's model is untouched).

    The hyperparameters are ``config`` as given (resolved already, e.g. a RunSpec's ``config``),
    or else resolved here: ``hyperparameter_set``'s (one of :data:`HYPERPARAMETER_SETS`; cifar10_c if not named) with
    ``overrides`` replacing single hyperparameters; giving both is refused. ``execution``: how
    the method computes (:class:`Execution`: speed, not numbers). ``source_data`` is required by
    methods that compute source statistics (EATA, OWTTT).
    """
    cls = method_class(name)
    if config is None:
        config = resolve_config(name, hyperparameter_set or "cifar10_c", **overrides)
    elif hyperparameter_set is not None or overrides:
        raise ValueError(f"give method {name!r} a resolved config= or a hyperparameter_set= with overrides, not both")
    elif not isinstance(config, cls.config_cls):
        raise ValueError(f"method {name!r} takes a {cls.config_cls.__name__}, got a {type(config).__name__}")
    return cls(copy.deepcopy(model), num_classes, config, seed=seed, source_data=source_data, execution=execution)
