"""RunSpec: one cell of a table, frozen and hashable; its hash names its results record."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from stamplib import data, methods, validation
from stamplib.evaluation import diagnostics
from stamplib.evaluation.profiles import get_profile

#: Fields added after the first records were written, with the default that leaves them out.
_LATER_FIELDS: dict[str, Any] = {"hyperparameter_set": "", "network": 0, "diagnostic": ""}
#: Renamed fields → the name the key hashes, so that keys written before the rename stay valid.
_KEY_NAMES: dict[str, str] = {"hyperparameter_set": "setting", "outlier_set": "outliers"}


def current_names(d: dict[str, Any]) -> dict[str, Any]:
    """A spec's dict (a record's ``spec``) with each renamed field under its name today: a record
    written before a rename names the field as it was then (:data:`_KEY_NAMES`)."""
    d = dict(d)
    for name, old in _KEY_NAMES.items():
        if old in d:
            if name in d:
                raise ValueError(f"a spec names {name!r} twice, as {name!r} and as its old name {old!r}")
            d[name] = d.pop(old)
    return d


def check_network(network: object, dataset: str) -> int:
    """A source network's training seed for ``dataset``: 0 for any data set, k >= 1 only where the
    data set's source network is trained by a recipe of ours (another seed of it can exist)."""
    if not validation.is_int(network) or int(network) < 0:
        raise ValueError(f"network must be a non-negative integer (the source network's training seed), got "
                         f"{network!r}")
    if int(network) == 0:
        return 0
    from stamplib.models import checkpoints

    checkpoint = data.dataset(dataset).checkpoint
    entry = checkpoints.REGISTRY.get(checkpoint)
    if entry is None or entry.recipe is None:
        trainable = sorted(n for n, d in data.DATASETS.items() if not d.builtin
                           and (e := checkpoints.REGISTRY.get(d.checkpoint)) is not None and e.recipe is not None)
        raise ValueError(f"dataset {dataset!r} has one source network (network=0): its checkpoint is not trained by a "
                         f"recipe of ours; network {network} of a data set that is ({', '.join(trainable)}) is trained "
                         "by `python -m stamplib train-source --dataset NAME --seed "
                         f"{network} --data-root DIR`")
    from stamplib.data import builtin_cifar10

    if data.dataset(dataset).builtin and checkpoint in builtin_cifar10.BASE_CHECKPOINTS \
            and int(network) not in builtin_cifar10.NETWORKS:
        # package data: only the networks that ship exist (another is trained on the JPEG photographs and
        # shipped by maintain build-benchmark, docs/builtin_benchmark.md)
        shipped = builtin_cifar10.NETWORKS
        train = checkpoints.train_command(checkpoints.network_name(checkpoint, int(network)))
        raise ValueError(f"dataset {dataset!r} ships source networks {shipped[0]}–{shipped[-1]}; network={network} is "
                         f"none of them: train it with `{train}`, then ship it with `python -m stamplib maintain "
                         "build-benchmark --data-root DIR`")
    return int(network)


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines a result.

    ``overrides`` are hyperparameter overrides as sorted (name, value) pairs, each typed as its
    config field says (:func:`stamplib.methods.typed_overrides`), so the spec stays hashable and
    ``"true"`` and ``True`` name one record; build it from a dict with
    ``RunSpec.make(..., overrides={...})``. :attr:`config` is the method's config they give,
    resolved once, here, for everyone who builds or reads the method of this spec.

    ``stream`` is how the test stream is made and fed (:class:`stamplib.data.StreamSpec`: the
    schedule, label order, outlier placement, batch size and the realistic protocol; the
    paper's stream by default). Its key holds the stream's fields that are not at their
    defaults beside the others (:meth:`to_dict`), so every key written before an option existed
    stays what it was.
    """

    method: str
    dataset: str = "digits"
    outlier_set: str = "noise"  # the outlier set's name, or "none" for closed-set TTA
    corruptions: tuple[str, ...] = ("gaussian_noise",)
    severity: int = 5
    outlier_ratio: float = 0.2  # outliers / (ID + outliers)
    seed: int = 0
    profile: str = "quick"
    hyperparameter_set: str = ""  # the methods' hyperparameters to use instead of the dataset's own (e.g. "imagenet_c")
    overrides: tuple[tuple[str, Any], ...] = field(default_factory=tuple)
    stream: data.StreamSpec = data.PAPER_STREAM
    #: The source network: the training seed of the data set's checkpoint (0 = the registered one,
    #: k = ``<checkpoint>_seed<k>``), a source of variation that a replicate draws anew beside the
    #: stream ``seed``. Left out of the key at 0, so every key written before it existed stays valid.
    network: int = 0
    #: A counterfactual arm of the method (:mod:`stamplib.evaluation.diagnostics`): a diagnostic,
    #: never a method. Left out of the key at "".
    diagnostic: str = ""

    def __post_init__(self) -> None:
        # Names first, before any file or model is touched; every check reads no file.
        methods.method_class(self.method)
        if isinstance(self.corruptions, str):  # "fog" would otherwise become ('f', 'o', 'g')
            object.__setattr__(self, "corruptions", (self.corruptions,))
        if not self.corruptions:
            raise ValueError("corruptions is empty: name at least one (or 'none' for clean data)")
        object.__setattr__(self, "corruptions", tuple(self.corruptions))
        # The stream's values (its StreamSpec, data set, outlier set, corruptions, severity, ratio, seed) are
        # checked by the data layer's spec of one corruption's stream, the one place that checks them; the cell
        # keeps them as that spec normalised them (an int severity, ratio 0 without outliers).
        first, *_ = [self.corruption_stream(c) for c in self.corruptions]
        for name in ("severity", "outlier_ratio", "seed"):
            object.__setattr__(self, name, getattr(first, name))
        twice = sorted({c for c in self.corruptions if self.corruptions.count(c) > 1})
        if twice:  # a record keeps one row per corruption: a second run of one would be computed and lost
            raise ValueError(f"corruption(s) {', '.join(map(repr, twice))} named twice: a cell runs each corruption "
                             "once; name each once")
        object.__setattr__(self, "network", check_network(self.network, self.dataset))
        get_profile(self.profile)
        methods.check_batch_size(self.method, self.stream.batch_size)
        if self.stream.schedule == "mixed" and len(self.corruptions) < 2:
            raise ValueError("the mixed schedule mixes the cell's corruptions in one stream: name two or more")
        hyperparameter_set = self.resolved_hyperparameter_set()
        typed = methods.typed_overrides(self.method, hyperparameter_set, dict(self.overrides))
        object.__setattr__(self, "overrides", tuple(sorted(typed.items())))
        config = methods.config_with(self.method, hyperparameter_set, typed)
        counterfactual = diagnostics.diagnostic(self.diagnostic, self.method)
        # Not a field: it follows from the fields, so neither the key nor equality reads it.
        object.__setattr__(self, "_config", counterfactual.apply(config) if counterfactual else config)

    @property
    def config(self) -> Any:
        """The method's hyperparameters: its hyperparameter set's config with the overrides applied
        (checked by the config itself), resolved once, when the spec was made."""
        return self._config

    @property
    def resets_per_corruption(self) -> bool:
        """True for the paper's protocol: the method is reset before each corruption (protocol.md
        §1.2); the continual, mixed-domain and gradual schedules reset once, before the first."""
        return self.stream.resets_per_corruption

    def corruption_stream(self, corruption: str | None = None, max_id: int | None = None,
                          severity: int | None = None) -> data.CorruptionStreamSpec:
        """The spec of the test stream of ``corruption`` (default: the cell's first) at ``severity``
        (default: the cell's) with at most ``max_id`` known-class samples (None: all)."""
        return data.CorruptionStreamSpec(
            self.dataset, self.outlier_set, self.corruptions[0] if corruption is None else corruption,
            self.severity if severity is None else severity, self.outlier_ratio, self.seed, max_id, self.stream)

    def resolved_hyperparameter_set(self) -> str:
        """``hyperparameter_set`` if given, else the data set's own (from the data set registry)."""
        hyperparameter_set = self.hyperparameter_set or data.hyperparameter_set_of(self.dataset)
        if not hyperparameter_set:
            raise ValueError(
                f"dataset {self.dataset!r} has no hyperparameter set of its own; give hyperparameter_set= one "
                f"of {', '.join(methods.HYPERPARAMETER_SETS)}"
            )
        return hyperparameter_set

    @classmethod
    def make(cls, method: str, overrides: dict[str, Any] | None = None, **kwargs: Any) -> RunSpec:
        return cls(method=method, overrides=tuple((overrides or {}).items()), **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The spec by its fields' names (a record's ``spec``): fields added after records existed
        (the stream's among them) are left out at their defaults, so old keys stay valid."""
        d = asdict(self)
        for name, default in _LATER_FIELDS.items():
            if d[name] == default:
                del d[name]
        del d["stream"]
        d.update(self.stream.key_fields())
        d["corruptions"] = list(self.corruptions)
        d["overrides"] = {k: v for k, v in self.overrides}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSpec:
        """The spec of :meth:`to_dict`'s dict (a record's ``spec``), a field under its name or
        under the name it had when the record was written (:data:`_KEY_NAMES`)."""
        d = current_names(d)
        stream_names = data.StreamSpec.key_names()
        d["stream"] = data.StreamSpec.from_key_fields(**{k: d.pop(k) for k in list(d) if k in stream_names})
        d["corruptions"] = tuple(d["corruptions"])
        d["overrides"] = tuple(d.get("overrides", {}).items())
        return cls(**d)

    def key(self) -> str:
        """Stable 16-hex-digit hash of the spec (names the results record): :meth:`to_dict` with
        each renamed field under the name it had (:data:`_KEY_NAMES`)."""
        hashed = {_KEY_NAMES.get(name, name): value for name, value in self.to_dict().items()}
        canonical = json.dumps(hashed, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def with_(self, **changes: Any) -> RunSpec:
        """This spec with ``changes`` (field names; ``stream=`` a whole StreamSpec), checked again."""
        return dataclasses.replace(self, **changes)

    def with_stream(self, **changes: Any) -> RunSpec:
        """This spec with its stream's ``changes`` (:class:`stamplib.data.StreamSpec` field names)."""
        return self.with_(stream=self.stream.with_(**changes))
