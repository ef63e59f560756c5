"""Record: the result of one cell, as :func:`stamplib.evaluation.runner.run` builds it and the
results store keeps it — typed and frozen, read by attribute.

A stored record is JSON (``<results>/<method>__<dataset>__<outliers>__<key>.json``). Every record
ever written loads through :meth:`Record.from_json`, and :meth:`Record.to_json` writes back the
same keys and values, so a record read and written again is the file it came from. Parts a
record of an older version lacks (its outputs, provenance, trace, the later metrics) are None,
empty or absent, never invented.

* ``per_corruption`` — one :class:`Row` per corruption in the order they ran: the metrics
  (:attr:`Row.scores`, every registered metric; ``acc``, ``auroc`` and ``h`` as attributes),
  sample counts, time, collapse flag, and for the realistic protocol its speed;
* ``mean`` — :class:`Mean`, the metrics averaged over corruptions, with the collapsed ones named;
* ``stream`` — :class:`StreamSection`, for a stream other than the paper's: the continual flag,
  corruption order, Dirichlet δ and outlier bursts always, and every other option of the
  :class:`~stamplib.data.StreamSpec` that is set (so a new stream option appears with no list to
  update; a record written before an option existed does not name it, as it is at its default);
* ``realistic`` — :class:`Realistic`, the realistic protocol's C(g) and how many batches reached
  the method's step;
* ``trace`` — one :class:`Trace` per corruption, the columns of :mod:`stamplib.evaluation.traces`;
* ``provenance`` — :class:`Provenance`: the checkpoint (typed), the data, the git state, the
  command, the TF32 state and the memory layout.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stamplib.evaluation.metrics import aggregate
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.traces import FIELDS as TRACE_FIELDS

#: A measured ratio up to this much above an integer counts as that integer: timing noise alone
#: must not give a method whose step is one forward (BN Stats) C(g) = 2.
SPEED_TOLERANCE = 0.1


def _present(pairs: Mapping[str, Any]) -> dict[str, Any]:
    """``pairs`` without the None values: the parts an older record does not have."""
    return {k: v for k, v in pairs.items() if v is not None}


@dataclass(frozen=True)
class RelativeSpeed:
    """C(g) of the realistic protocol: how many batches pass while the method adapts on one.
    Measured (with the two least timings it came from) or fixed by the spec (times None)."""

    value: int
    step_seconds: float | None = None  # the method's step on one batch (least of several timings)
    forward_seconds: float | None = None  # the source model's forward on the same batch (likewise)

    @classmethod
    def from_times(cls, step_seconds: float, forward_seconds: float) -> RelativeSpeed:
        """C(g) = the ratio of the two times rounded up (Alfarra et al.), within :data:`SPEED_TOLERANCE`."""
        ratio = step_seconds / max(forward_seconds, 1e-9)
        return cls(max(1, math.ceil(ratio - SPEED_TOLERANCE)), round(step_seconds, 6), round(forward_seconds, 6))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RelativeSpeed:
        return cls(int(d["relative_speed"]), d.get("step_seconds"), d.get("forward_seconds"))

    def to_json(self) -> dict[str, Any]:
        return {"relative_speed": self.value, "step_seconds": self.step_seconds,
                "forward_seconds": self.forward_seconds}


class _Scored:
    """The paper's three metrics as attributes of something with :attr:`scores`."""

    scores: Mapping[str, float]

    @property
    def acc(self) -> float:
        return self.scores["acc"]

    @property
    def auroc(self) -> float:
        return self.scores["auroc"]

    @property
    def h(self) -> float:
        return self.scores["h"]


@dataclass(frozen=True)
class Severity(_Scored):
    """One severity level of a gradual corruption: its metrics."""

    severity: int
    scores: Mapping[str, float]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Severity:
        rest = dict(d)
        return cls(rest.pop("severity"), rest)

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, **self.scores}


@dataclass(frozen=True)
class Row(_Scored):
    """One corruption's result (or, in a stream section, the whole mixed stream's).

    ``scores``: every metric by name (a record of an older version has the paper's three only);
    the other fields are None where a record does not have them. ``speed``, ``adapted_batches``
    and ``batches``: the realistic protocol's; ``severities``: the gradual schedule's levels."""

    scores: Mapping[str, float]
    collapsed: bool | None = None
    collapse_reason: str | None = None
    n_id: int | None = None
    n_outliers: int | None = None
    seconds: float | None = None
    speed: RelativeSpeed | None = None
    adapted_batches: int | None = None
    batches: int | None = None
    severities: tuple[Severity, ...] | None = None

    _NAMED = ("collapsed", "collapse_reason", "n_id", "n_outliers", "seconds", "adapted_batches", "batches")
    _SPEED = ("relative_speed", "step_seconds", "forward_seconds")

    @property
    def samples(self) -> int:
        """Known-class samples and outliers together."""
        return (self.n_id or 0) + (self.n_outliers or 0)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Row:
        rest = dict(d)
        named = {name: rest.pop(name) for name in cls._NAMED if name in rest}
        speed = RelativeSpeed.from_json(rest) if "relative_speed" in rest else None
        for name in cls._SPEED:
            rest.pop(name, None)
        severities = tuple(Severity.from_json(s) for s in rest.pop("severities")) if "severities" in rest else None
        return cls(scores=rest, speed=speed, severities=severities, **named)

    def to_json(self) -> dict[str, Any]:
        out = {**self.scores, **_present({"n_id": self.n_id, "n_outliers": self.n_outliers, "seconds": self.seconds})}
        if self.collapsed is not None:
            out.update(collapsed=self.collapsed, collapse_reason=self.collapse_reason)
        if self.speed is not None:
            out.update(self.speed.to_json())
        out.update(_present({"adapted_batches": self.adapted_batches, "batches": self.batches}))
        if self.severities is not None:
            out["severities"] = [s.to_json() for s in self.severities]
        return out


@dataclass(frozen=True)
class Mean(_Scored):
    """The metrics averaged over a cell's corruptions (a collapsed one is averaged in, and named
    in ``collapsed``; None where the rows had no collapse flag)."""

    scores: Mapping[str, float]
    collapsed: tuple[str, ...] | None = None

    @classmethod
    def of(cls, rows: Mapping[str, Row]) -> Mean:
        """The mean of ``rows`` (:func:`stamplib.evaluation.metrics.aggregate`)."""
        return cls.from_json(aggregate({c: r.to_json() for c, r in rows.items()}))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Mean:
        rest = dict(d)
        collapsed = tuple(rest.pop("collapsed")) if "collapsed" in rest else None
        return cls(rest, collapsed)

    def to_json(self) -> dict[str, Any]:
        return {**self.scores, **({"collapsed": list(self.collapsed)} if self.collapsed is not None else {})}


@dataclass(frozen=True)
class StreamSection:
    """How a stream other than the paper's was fed: the continual flag, the corruption order,
    Dirichlet δ and outlier bursts (every such record has them), ``options``: the stream's other
    options that are set, by the names the spec's key gives them, and ``whole``: the mixed
    schedule's metrics over its one stream."""

    continual: bool
    order: tuple[str, ...]
    dirichlet: float
    outlier_burst: int
    options: Mapping[str, Any] = field(default_factory=dict)
    whole: Row | None = None

    #: Options with a section of their own (:class:`Realistic`), left out of this one.
    OWN_SECTION = ("realistic", "relative_speed")

    @classmethod
    def of(cls, spec: RunSpec, whole: Row | None = None) -> StreamSection | None:
        """The section of ``spec``'s stream, None for the paper's stream. Every option the
        :class:`~stamplib.data.StreamSpec` sets appears (:meth:`~stamplib.data.StreamSpec.key_fields`:
        the set ones only, so a record of a stream without a later option stays as it was)."""
        always = {f.name for f in dataclasses.fields(cls)} - {"options", "whole"}
        options = {name: value for name, value in spec.stream.key_fields().items()
                   if name not in always and name not in cls.OWN_SECTION}
        continual = spec.stream.schedule == "continual"
        if not (continual or spec.stream.dirichlet or spec.stream.outlier_burst or options):
            return None
        return cls(continual, tuple(spec.corruptions), spec.stream.dirichlet, spec.stream.outlier_burst, options, whole)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StreamSection:
        rest = dict(d)
        whole = Row.from_json(rest.pop("whole")) if "whole" in rest else None
        return cls(rest.pop("continual"), tuple(rest.pop("order")), rest.pop("dirichlet"), rest.pop("outlier_burst"),
                   rest, whole)

    def to_json(self) -> dict[str, Any]:
        out = {"continual": self.continual, "order": list(self.order), "dirichlet": self.dirichlet,
               "outlier_burst": self.outlier_burst, **self.options}
        return {**out, "whole": self.whole.to_json()} if self.whole is not None else out


@dataclass(frozen=True)
class Realistic:
    """The realistic protocol's C(g) for the cell, whether it was measured (else fixed by the
    spec), and how many of the batches reached the method's step."""

    speed: RelativeSpeed
    measured: bool
    adapted_batches: int
    batches: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Realistic:
        return cls(RelativeSpeed.from_json(d), d["measured"], d["adapted_batches"], d["batches"])

    def to_json(self) -> dict[str, Any]:
        return {**self.speed.to_json(), "measured": self.measured, "adapted_batches": self.adapted_batches,
                "batches": self.batches}


@dataclass(frozen=True)
class Trace:
    """One corruption's per-batch columns (:data:`stamplib.evaluation.traces.FIELDS`); a column
    the method never filled is None."""

    seconds: tuple[float, ...] | None = None
    peak_memory_mb: tuple[float, ...] | None = None
    n_passed: tuple[int | None, ...] | None = None
    passed_outliers: tuple[int | None, ...] | None = None
    memory_size: tuple[int | None, ...] | None = None
    memory_outliers: tuple[int | None, ...] | None = None
    memory_counts: tuple[list[int] | None, ...] | None = None
    adapted_size: tuple[int | None, ...] | None = None
    adapted_outliers: tuple[int | None, ...] | None = None
    n_known: tuple[int | None, ...] | None = None
    n_correct: tuple[int | None, ...] | None = None
    n_outliers: tuple[int | None, ...] | None = None
    loss: tuple[float, ...] | None = None

    @property
    def batches(self) -> int:
        return max((len(c) for c in self.columns().values()), default=0)

    def columns(self) -> dict[str, list[Any]]:
        """The filled columns by name, as lists (a frame's columns), in the order of the stored
        JSON (its keys sorted), so a frame has the same columns whether its record is fresh or read."""
        return {name: list(column) for name in sorted(TRACE_FIELDS) if (column := getattr(self, name)) is not None}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Trace:
        return cls(**{name: tuple(column) for name, column in d.items()})

    def to_json(self) -> dict[str, list[Any]]:
        return self.columns()


@dataclass(frozen=True)
class Checkpoint:
    """The source model a record's method started from: its name, the SHA-256 its sidecar
    vouches for and the clean accuracy the trainer measured (None when unknown)."""

    name: str
    sha256: str | None
    clean_test_accuracy: float | None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Checkpoint:
        return cls(d["name"], d.get("sha256"), d.get("clean_test_accuracy"))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "clean_test_accuracy": self.clean_test_accuracy}


@dataclass(frozen=True)
class Provenance:
    """Where a record came from (:func:`stamplib.evaluation.provenance.provenance`): ``data``
    and ``git`` as they were written, ``tf32`` and ``layout`` None in records from before they
    were recorded."""

    checkpoint: Checkpoint
    data: Mapping[str, Any]
    git: Mapping[str, Any]
    command: str
    tf32: Mapping[str, bool] | None = None
    layout: str | None = None
    cpu: Mapping[str, Any] | None = None  # model and vector extensions; None in records from before

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Provenance:
        return cls(Checkpoint.from_json(d["checkpoint"]), d["data"], d["git"], d["command"], d.get("tf32"),
                   d.get("layout"), d.get("cpu"))

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint.to_json(), "data": dict(self.data), "git": dict(self.git),
                "command": self.command, **_present({"tf32": self.tf32, "layout": self.layout, "cpu": self.cpu})}


@dataclass(frozen=True)
class Record:
    """One cell's result (module docstring). The fields after ``mean`` are None (``trace``:
    empty) in a record that lacks them: one written before they existed, or a hand-made one."""

    key: str
    spec: RunSpec
    per_corruption: Mapping[str, Row]
    mean: Mean
    collapsed: tuple[str, ...] | None = None  # the collapsed corruptions, as the mean names them
    config: str | None = None  # repr of the method's typed config: a changed default makes it stale
    seconds: float | None = None  # the cell's wall time (an interrupted run's kept corruptions counted)
    device: str | None = None
    versions: Mapping[str, str] | None = None
    provenance: Provenance | None = None
    trace: Mapping[str, Trace] = field(default_factory=dict)
    realistic: Realistic | None = None
    stream: StreamSection | None = None
    outputs: str | None = None  # the per-sample outputs file beside it (:mod:`stamplib.evaluation.outputs`)
    outputs_sha256: str | None = None  # that file's digest: a truncated or replaced file is caught on load

    @property
    def method(self) -> str:
        return self.spec.method

    @property
    def corruptions(self) -> list[str]:
        """The corruptions in the order the spec names them, those with a row only."""
        return [c for c in self.spec.corruptions if c in self.per_corruption] or list(self.per_corruption)

    def with_rows(self, per_corruption: Mapping[str, Row]) -> Record:
        """This record with other rows and their mean (a re-scored or restricted record)."""
        mean = Mean.of(per_corruption)
        return dataclasses.replace(self, per_corruption=dict(per_corruption), mean=mean,
                                   collapsed=mean.collapsed if mean.collapsed is not None else self.collapsed)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Record:
        """The record of a stored JSON dict, of any version: ``key``, ``spec`` and ``mean`` are
        required (a record without rows has none). Raises KeyError, TypeError or ValueError for
        a dict that is no record."""
        return cls(
            key=d["key"],
            spec=RunSpec.from_dict(d["spec"]),
            per_corruption={c: Row.from_json(row) for c, row in d.get("per_corruption", {}).items()},
            mean=Mean.from_json(d["mean"]),
            collapsed=tuple(d["collapsed"]) if "collapsed" in d else None,
            config=d.get("config"),
            seconds=d.get("seconds"),
            device=d.get("device"),
            versions=d.get("versions"),
            provenance=Provenance.from_json(d["provenance"]) if "provenance" in d else None,
            trace={c: Trace.from_json(t) for c, t in d.get("trace", {}).items()},
            realistic=Realistic.from_json(d["realistic"]) if "realistic" in d else None,
            stream=StreamSection.from_json(d["stream"]) if "stream" in d else None,
            outputs=d.get("outputs"),
            outputs_sha256=d.get("outputs_sha256"),
        )

    def to_json(self) -> dict[str, Any]:
        """The stored JSON dict: for a loaded record, the dict it was loaded from (a spec field
        renamed since it was written under its new name: :meth:`RunSpec.from_dict`)."""
        out: dict[str, Any] = {
            "key": self.key,
            "spec": self.spec.to_dict(),
            "per_corruption": {c: row.to_json() for c, row in self.per_corruption.items()},
            "mean": self.mean.to_json(),
            **_present({"collapsed": list(self.collapsed) if self.collapsed is not None else None,
                        "config": self.config, "seconds": self.seconds, "device": self.device,
                        "versions": dict(self.versions) if self.versions is not None else None,
                        "provenance": self.provenance.to_json() if self.provenance is not None else None,
                        "realistic": self.realistic.to_json() if self.realistic is not None else None,
                        "stream": self.stream.to_json() if self.stream is not None else None,
                        "outputs": self.outputs, "outputs_sha256": self.outputs_sha256}),
        }
        if self.trace:
            out["trace"] = {c: t.to_json() for c, t in self.trace.items()}
        return out
