"""RunSpec: one cell of a table, frozen and hashable; its hash names its results record."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from stamplib import data, methods, validation
from stamplib.evaluation.profiles import get_profile

#: Fields added after the first records were written, with the default that leaves them out.
_LATER_FIELDS: dict[str, Any] = {"setting": "", "continual": False, "dirichlet": 0.0, "outlier_burst": 0,
                                  "realistic": False, "relative_speed": 0, "batch_size": 64, "label_shift": "",
                                  "mixed_domains": False, "gradual": False}


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines a result.

    ``overrides`` are hyperparameter overrides as sorted (name, value) pairs, so the spec stays
    hashable; build it from a dict with ``RunSpec.make(..., overrides={...})``.

    Harder streams (beyond the paper; each off by default, and a default field is left out of
    :meth:`to_dict`, so every spec written before they existed keeps its key):

    * ``continual`` — one stream through all ``corruptions`` in their order, with no reset
      between them (the metrics are still per corruption);
    * ``dirichlet`` — concentration δ of a non-i.i.d. label order (0: i.i.d.);
    * ``outlier_burst`` — outliers arrive in runs of this length (0: spread uniformly);
    * ``batch_size`` — samples per batch (the paper's 64; down to 1, or the method's
      ``min_batch_size``);
    * ``label_shift`` — ``"imbalance:ρ"`` long-tailed known classes (largest over smallest = ρ),
      ``"sorted"`` class-by-class order, or both joined by ``+`` (:class:`stamplib.data.LabelShift`);
    * ``mixed_domains`` — every corruption's stream in one shuffled stream, adapted without a
      reset (metrics per corruption, and over the whole stream);
    * ``gradual`` — CoTTA's gradual setting: per corruption, in order, severity 1 up to
      ``severity`` and back to 1, each level a whole stream, without a reset.

    The realistic online protocol (Alfarra et al., ICML 2024; off by default, same rule for the
    keys): with ``realistic`` the stream arrives at a constant speed, so a method whose step
    costs C(g) plain forwards adapts only on every C(g)-th batch and answers the others with
    :meth:`~stamplib.methods.TTAMethod.predict`. ``relative_speed`` fixes C(g) by hand (records
    then do not depend on the machine); 0 measures it in the run
    (:func:`stamplib.evaluation.runner.measure_relative_speed`).
    """

    method: str
    dataset: str = "digits"
    outliers: str = "noise"  # outlier set name, or "none" for closed-set TTA
    corruptions: tuple[str, ...] = ("gaussian_noise",)
    severity: int = 5
    outlier_ratio: float = 0.2  # outliers / (ID + outliers)
    seed: int = 0
    profile: str = "quick"
    setting: str = ""  # hyperparameter setting to use instead of the dataset's own (e.g. "imagenet_c")
    overrides: tuple[tuple[str, Any], ...] = field(default_factory=tuple)
    continual: bool = False
    dirichlet: float = 0.0
    outlier_burst: int = 0
    realistic: bool = False
    relative_speed: int = 0  # C(g) of the realistic protocol; 0 = measured in the run
    batch_size: int = 64
    label_shift: str = ""  # "imbalance:ρ", "sorted" or "imbalance:ρ+sorted"; "" = off
    mixed_domains: bool = False
    gradual: bool = False

    def __post_init__(self) -> None:
        # Names first, before any file or model is touched; every check reads no file.
        methods.method_class(self.method)
        if isinstance(self.corruptions, str):  # "fog" would otherwise become ('f', 'o', 'g')
            object.__setattr__(self, "corruptions", (self.corruptions,))
        if not self.corruptions:
            raise ValueError("corruptions is empty: name at least one (or 'none' for clean data)")
        object.__setattr__(self, "corruptions", tuple(self.corruptions))
        data.check_names(self.dataset, self.outliers, self.corruptions)
        object.__setattr__(self, "severity", validation.check_severity(self.severity))
        validation.check_outlier_ratio(self.outlier_ratio)
        object.__setattr__(self, "seed", validation.check_seed(self.seed))
        get_profile(self.profile)
        if not isinstance(self.continual, bool):
            raise ValueError(f"continual is True or False, got {self.continual!r}")
        object.__setattr__(self, "dirichlet", validation.check_dirichlet(self.dirichlet))
        object.__setattr__(self, "outlier_burst", validation.check_outlier_burst(self.outlier_burst))
        if not isinstance(self.realistic, bool):
            raise ValueError(f"realistic is True or False, got {self.realistic!r}")
        object.__setattr__(self, "relative_speed", validation.check_relative_speed(self.relative_speed))
        if self.relative_speed and not self.realistic:
            raise ValueError("relative_speed fixes C(g) of the realistic protocol: give realistic=True with it")
        object.__setattr__(self, "batch_size", methods.check_batch_size(self.method, self.batch_size))
        shift = data.LabelShift.parse(self.label_shift)
        object.__setattr__(self, "label_shift", str(shift))
        if shift.sorted and self.dirichlet:
            raise ValueError("a stream has one label order: give dirichlet or label_shift='sorted', not both")
        for name in ("mixed_domains", "gradual"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} is True or False, got {getattr(self, name)!r}")
        runs_without_reset = [n for n in ("continual", "mixed_domains", "gradual") if getattr(self, n)]
        if len(runs_without_reset) > 1:
            raise ValueError(f"{' and '.join(runs_without_reset)} are different streams without a reset: give "
                             "one of continual (corruptions in turn), mixed_domains (all in one shuffled "
                             "stream) or gradual (severity 1→5→1 per corruption)")
        if self.realistic and (self.mixed_domains or self.gradual):
            raise ValueError("the realistic protocol runs on the paper's streams and the continual one; "
                             "leave mixed_domains and gradual off with realistic=True")
        if self.mixed_domains and len(self.corruptions) < 2:
            raise ValueError("mixed_domains mixes the cell's corruptions in one stream: name two or more")
        if self.outliers == data.CLOSED_SET and self.outlier_ratio != 0.0:
            object.__setattr__(self, "outlier_ratio", 0.0)
        object.__setattr__(self, "overrides", tuple(sorted((str(k), v) for k, v in dict(self.overrides).items())))
        methods.resolve_config(self.method, self.hyperparameter_setting(), **dict(self.overrides))  # validates

    @property
    def stream_options(self) -> dict[str, Any]:
        """The options of :func:`stamplib.data.build_stream` beyond the corruption's
        (``batch_size``, ``dirichlet``, ``outlier_burst``, ``label_shift``)."""
        return {"batch_size": self.batch_size, "dirichlet": self.dirichlet, "outlier_burst": self.outlier_burst,
                "label_shift": self.label_shift}

    @property
    def resets_per_corruption(self) -> bool:
        """True for the paper's protocol: the method is reset before each corruption (protocol.md
        §1.2); the continual, mixed-domain and gradual streams reset once, before the first."""
        return not (self.continual or self.mixed_domains or self.gradual)

    def hyperparameter_setting(self) -> str:
        """``setting`` if given, else the data set's own (from the data set registry)."""
        setting = self.setting or data.setting_of(self.dataset)
        if not setting:
            raise ValueError(
                f"dataset {self.dataset!r} has no hyperparameter setting of its own; give setting= one "
                f"of {', '.join(methods.SETTINGS)}"
            )
        return setting

    @classmethod
    def make(cls, method: str, overrides: dict[str, Any] | None = None, **kwargs: Any) -> RunSpec:
        return cls(method=method, overrides=tuple((overrides or {}).items()), **kwargs)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # Fields added after records existed are left out at their defaults: old keys stay valid.
        for name, default in _LATER_FIELDS.items():
            if d[name] == default:
                del d[name]
        d["corruptions"] = list(self.corruptions)
        d["overrides"] = {k: v for k, v in self.overrides}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSpec:
        d = dict(d)
        d["corruptions"] = tuple(d["corruptions"])
        d["overrides"] = tuple(d.get("overrides", {}).items())
        return cls(**d)

    def key(self) -> str:
        """Stable 16-hex-digit hash of the spec (names the results record)."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def with_(self, **changes: Any) -> RunSpec:
        d = self.to_dict()
        d.update(changes)
        if isinstance(d["overrides"], tuple):
            d["overrides"] = dict(d["overrides"])
        return RunSpec.from_dict(d)
