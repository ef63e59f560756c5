"""RunSpec: one cell of a table, frozen and hashable; its hash names its results record."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from stamplib.profiles import ALL_CORRUPTIONS, PROFILES

_CORRUPTION_NAMES = set(ALL_CORRUPTIONS) | {"none"}


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines a result.

    ``overrides`` are hyperparameter overrides as sorted (name, value) pairs, so the spec stays
    hashable; build it from a dict with ``RunSpec.make(..., overrides={...})``.
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

    def __post_init__(self) -> None:
        from stamplib import methods

        if self.method not in methods.available():
            raise ValueError(f"unknown method {self.method!r}; available: {', '.join(methods.available())}")
        if isinstance(self.corruptions, str):  # "fog" would otherwise become ('f', 'o', 'g')
            object.__setattr__(self, "corruptions", (self.corruptions,))
        if not self.corruptions:
            raise ValueError("corruptions is empty: name at least one (or 'none' for clean data)")
        bad = [c for c in self.corruptions if c not in _CORRUPTION_NAMES]
        if bad:
            raise ValueError(f"unknown corruption(s) {bad}; valid: {', '.join(ALL_CORRUPTIONS)}, none")
        # Names first, before any file or model is touched (the data layer knows the registries).
        from stamplib import data

        data.check_names(self.dataset, self.outliers)
        if isinstance(self.severity, bool) or not isinstance(self.severity, int) or not 1 <= self.severity <= 5:
            raise ValueError(f"severity must be an integer from 1 to 5 (the paper uses 5), got {self.severity!r}")
        if not isinstance(self.outlier_ratio, (int, float)) or not 0.0 <= self.outlier_ratio < 1.0:
            raise ValueError(
                f"outlier_ratio is the outliers' share of the stream and must be in [0, 1) (the paper "
                f"uses 0.2), got {self.outlier_ratio!r}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile {self.profile!r}; choose one of {', '.join(PROFILES)}")
        if self.outliers == "none" and self.outlier_ratio != 0.0:
            object.__setattr__(self, "outlier_ratio", 0.0)
        object.__setattr__(self, "corruptions", tuple(self.corruptions))
        object.__setattr__(self, "overrides", tuple(sorted((str(k), v) for k, v in dict(self.overrides).items())))
        methods.resolve_config(self.method, self.setting or self.dataset, **dict(self.overrides))  # validates

    @classmethod
    def make(cls, method: str, overrides: dict[str, Any] | None = None, **kwargs: Any) -> RunSpec:
        return cls(method=method, overrides=tuple((overrides or {}).items()), **kwargs)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if not self.setting:
            del d["setting"]  # records written before the field existed keep their key
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
