"""Test streams: ID and outlier images mixed, ordered with a seed, served in batches.

:class:`StreamSpec` says how a cell's stream is made and fed — the schedule (``episodic``,
``continual``, ``mixed``, ``gradual``), the label order (i.i.d., Dirichlet δ, sorted, long-tail
ρ), where the outliers go (spread, bursts of n), the batch size and the realistic protocol's
speed. It is one frozen object, checked once where it is built, and passed whole: a RunSpec
holds one, :func:`build_stream` and the stream cache take it. :func:`build_stream` turns a
:class:`CorruptionStreamSpec` (ID data set, outlier set, corruption, severity, ratio, seed,
StreamSpec), checked once where it was made, into a :class:`Stream`, reading
both sets through the data set registry from the data root it is given (none: only the
data sets that ship with the package).

Images stay resident as one uint8 N×H×W×3 tensor; a batch is a slice converted to float
N×3×H×W in [0,1] on the target device (no DataLoader: one stream fits in memory). Built streams
are kept for reuse within a byte budget (:mod:`stamplib.data.stream_cache`).

Mixing follows protocol.md §1: the *first* N outliers of the pool (not a random sample), the
concatenation shuffled uniformly. Unlike the authors' code, the order depends only on the
stream seed, not on how much randomness a method consumed, so every method sees the same order.
The harder orders beyond the paper (Dirichlet labels, outlier bursts, label shift) are
:mod:`stamplib.data.orders`'; :func:`interleave` makes one stream of several (mixed domains:
every corruption of a cell in one shuffled stream), keeping which stream each sample came from.

A new stream option (docs/architecture.md, "A stream option") is one field of
:class:`StreamSpec` with its check, read in one place here.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from stamplib import validation
from stamplib.data.lookup import check_names, dataset, outlier_set
from stamplib.data.orders import (
    LabelShift,
    burst_positions,
    class_sorted_order,
    dirichlet_order,
    long_tail_subset,
)
from stamplib.data.registry import CLOSED_SET
from stamplib.data.stream_cache import _CACHE


@dataclass(frozen=True)
class Batch:
    x: torch.Tensor  # float [B, 3, H, W] in [0, 1]
    y: torch.Tensor  # long [B]; −1 for outliers
    is_outlier: torch.Tensor  # bool [B]


@dataclass(frozen=True)
class Stream:
    images: torch.Tensor  # uint8 [N, H, W, 3], already in stream order
    labels: torch.Tensor  # long [N], −1 for outliers
    batch_size: int = 64

    def __post_init__(self) -> None:
        # ValueError, not assert: these are caller mistakes and must survive ``python -O``.
        if self.images.dtype != torch.uint8 or self.images.dim() != 4 or self.images.shape[3] != 3:
            raise ValueError(
                f"stream images must be uint8 N×H×W×3, got {self.images.dtype} {tuple(self.images.shape)}; "
                "convert float N×3×H×W in [0,1] with (x * 255).round().byte().permute(0, 2, 3, 1)"
            )
        if self.labels.shape != (self.images.shape[0],):
            raise ValueError(
                f"stream labels must be one per image ({self.images.shape[0]}), got shape {tuple(self.labels.shape)}"
            )
        validation.check_positive_int("batch_size", self.batch_size, "the paper uses 64")

    @property
    def is_outlier(self) -> torch.Tensor:
        return self.labels < 0

    @property
    def num_outliers(self) -> int:
        return int(self.is_outlier.sum())

    @property
    def nbytes(self) -> int:
        """What the stream holds in memory (the stream cache's budget counts it)."""
        return self.images.nbytes + self.labels.nbytes

    def __len__(self) -> int:
        """Number of batches (the last one may be partial)."""
        return -(-self.images.shape[0] // self.batch_size)

    def batches(self, device: str | torch.device = "cpu") -> Iterator[Batch]:
        images = self.images.to(device)
        labels = self.labels.to(device)
        for start in range(0, images.shape[0], self.batch_size):
            chunk = images[start : start + self.batch_size]
            x = chunk.permute(0, 3, 1, 2).float().div_(255.0).contiguous()
            y = labels[start : start + self.batch_size]
            yield Batch(x=x, y=y, is_outlier=y < 0)


#: How the corruptions of a cell follow one another: ``episodic`` — the paper's protocol, the
#: method reset before each corruption's stream; ``continual`` — one stream through the
#: corruptions in their order, no reset between them; ``mixed`` — every corruption's stream in
#: one shuffled stream, no reset; ``gradual`` — CoTTA's gradual setting, per corruption in order
#: severity 1 up to the cell's and back to 1, each level a whole stream, no reset.
SCHEDULES = ("episodic", "continual", "mixed", "gradual")

#: The key's name of each schedule but the paper's: keys written before the StreamSpec name the
#: schedule by one of three booleans, and every key stays what it was.
SCHEDULE_FLAGS = {"continual": "continual", "mixed": "mixed_domains", "gradual": "gradual"}


def option(default: Any, check: Callable[[Any], Any], *, run_level: bool = False,
           orders: Callable[[Any], bool] | None = None) -> Any:
    """A field of :class:`StreamSpec`: its default, the check that returns its value in canonical
    form (or raises a ValueError saying what to give), ``run_level`` for the options the
    runner reads (how the stream is fed) rather than :func:`build_stream` (how it is made), so
    that the stream cache shares one stream between them, and ``orders`` for an option that
    orders the samples: whether a value of it does. The mixed schedule shuffles every corruption's
    samples into one stream (:func:`interleave`), which would undo that order without a word, so
    :class:`StreamSpec` refuses the two together."""
    return field(default=default, metadata={"check": check, "run_level": run_level, "orders": orders})


def _check_schedule(schedule: object) -> str:
    return validation.check_choice("schedule", schedule, SCHEDULES)  # type: ignore[arg-type]


def _check_label_shift(text: object) -> str:
    return str(LabelShift.parse(text))  # type: ignore[arg-type]


def _check_batch_size(size: object) -> int:
    return validation.check_positive_int("batch_size", size, "the paper uses 64")


def _check_realistic(value: object) -> bool:
    return validation.check_bool("realistic", value)


@dataclass(frozen=True)
class StreamSpec:
    """How a cell's test stream is made and fed (module docstring), every field off by default.

    * ``schedule`` — :data:`SCHEDULES`;
    * ``dirichlet`` — concentration δ of a non-i.i.d. label order (0: i.i.d.);
    * ``label_shift`` — ``"imbalance:ρ"`` long-tailed known classes (largest over smallest = ρ),
      ``"sorted"`` class-by-class order, or both joined by ``+`` (:class:`LabelShift`);
    * ``outlier_burst`` — outliers arrive in runs of this length (0: spread uniformly);
    * ``batch_size`` — samples per batch (the paper's 64);
    * ``realistic`` — the realistic online protocol (Alfarra et al., ICML 2024): the stream
      arrives at a constant speed, so a method whose step costs C(g) plain forwards adapts only
      on every C(g)-th batch; ``relative_speed`` fixes C(g) by hand (0: measured in the run).

    Options that cannot combine are refused in one line naming both: the mixed schedule with an
    order (Dirichlet δ, ``sorted``, outlier bursts: :func:`option`'s ``orders``), which its
    shuffle would undo, and the realistic protocol with the mixed or gradual schedule.

    A RunSpec's key holds the fields not at their defaults (:meth:`key_fields`), so a key
    written before a field existed stays what it was.
    """

    schedule: str = option("episodic", _check_schedule, run_level=True)
    dirichlet: float = option(0.0, validation.check_dirichlet, orders=bool)
    label_shift: str = option("", _check_label_shift, orders=lambda shift: LabelShift.parse(shift).sorted)
    outlier_burst: int = option(0, validation.check_outlier_burst, orders=bool)
    batch_size: int = option(64, _check_batch_size)
    realistic: bool = option(False, _check_realistic, run_level=True)
    relative_speed: int = option(0, validation.check_relative_speed, run_level=True)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](getattr(self, f.name)))
        if self.relative_speed and not self.realistic:
            raise ValueError("relative_speed fixes C(g) of the realistic protocol: give realistic=True with it")
        if self.dirichlet and LabelShift.parse(self.label_shift).sorted:
            raise ValueError("a stream has one label order: give dirichlet or label_shift='sorted', not both")
        if self.realistic and self.schedule in ("mixed", "gradual"):
            raise ValueError("the realistic protocol runs on the paper's streams and the continual one; leave "
                             "the schedule episodic or continual (no mixed_domains, no gradual) with realistic=True")
        if self.schedule == "mixed":
            for f in dataclasses.fields(self):
                value = getattr(self, f.name)
                if f.metadata["orders"] is not None and f.metadata["orders"](value):
                    raise ValueError(f"schedule='mixed' shuffles every corruption's samples into one stream, which "
                                     f"would undo the order {f.name}={value!r} makes: give one of the two")

    @property
    def resets_per_corruption(self) -> bool:
        """True for the paper's protocol: the method is reset before each corruption (protocol.md
        §1.2); the continual, mixed and gradual schedules reset once, before the first."""
        return self.schedule == "episodic"

    def with_(self, **changes: Any) -> StreamSpec:
        """This stream with ``changes`` (field names), checked again."""
        return dataclasses.replace(self, **changes)

    def building(self) -> StreamSpec:
        """The options that make the stream, the runner's at their defaults: what the stream
        cache tells streams apart by."""
        return dataclasses.replace(self, **{f.name: f.default for f in dataclasses.fields(self)
                                            if f.metadata["run_level"]})

    def key_fields(self) -> dict[str, Any]:
        """The fields a RunSpec's key holds: those not at their defaults, the schedule under the
        boolean keys have always named it by (:data:`SCHEDULE_FLAGS`)."""
        fields = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                fields.update({SCHEDULE_FLAGS[value]: True} if f.name == "schedule" else {f.name: value})
        return fields

    @classmethod
    def key_names(cls) -> set[str]:
        """Every name :meth:`from_key_fields` takes."""
        return {f.name for f in dataclasses.fields(cls)} | set(SCHEDULE_FLAGS.values())

    @classmethod
    def from_key_fields(cls, **fields: Any) -> StreamSpec:
        """The stream of a key's fields (:meth:`key_fields`: a RunSpec's dict, a record's spec),
        the schedule from its boolean."""
        flags = [s for s, name in SCHEDULE_FLAGS.items() if validation.check_bool(name, fields.pop(name, False))]
        if len(flags) > 1:
            given = " and ".join(SCHEDULE_FLAGS[s] for s in flags)
            raise ValueError(f"{given} are different streams without a reset: give one of continual (corruptions "
                             "in turn), mixed_domains (all in one shuffled stream) or gradual (severity 1→5→1 per "
                             "corruption)")
        if flags and fields.setdefault("schedule", flags[0]) != flags[0]:
            raise ValueError(f"schedule={fields['schedule']!r} and {SCHEDULE_FLAGS[flags[0]]}=True disagree: give one")
        return cls(**fields)

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> StreamSpec:
        """The stream of ``options`` by field name, text read as each field's type says
        (:func:`stamplib.validation.coerce`; ``--stream NAME=VALUE``, a notebook's parameters)."""
        types_ = typing.get_type_hints(cls)
        unknown = sorted(set(options) - set(types_))
        if unknown:
            raise ValueError(f"unknown stream option(s) {unknown}; the stream's options are {', '.join(types_)}")
        return cls(**{name: validation.coerce(f"stream option {name!r}", value, types_[name])
                      for name, value in options.items()})


#: The paper's stream: every option off.
PAPER_STREAM = StreamSpec()


def outliers_for_ratio(num_id: int, ratio: float) -> int:
    """N outliers giving an outlier share ``ratio`` of the stream: N = num_id·r/(1−r)
    (protocol.md §3.2; 0.2 → num_id/4). ``ratio`` is in [0, 1), as a stream's spec checked it."""
    assert 0.0 <= ratio < 1.0, ratio
    return round(num_id * ratio / (1.0 - ratio))


def stream_order(id_labels: torch.Tensor, num_outliers: int, seed: int, stream: StreamSpec = PAPER_STREAM
                 ) -> torch.Tensor:
    """The order of a stream made of ``id_labels`` followed by ``num_outliers`` outliers: a
    permutation of their indices. The paper's stream: one uniform shuffle; otherwise the ID
    order and the outlier positions of :mod:`stamplib.data.orders`."""
    n_id = id_labels.numel()
    g = torch.Generator().manual_seed(seed)
    sort_by_class = LabelShift.parse(stream.label_shift).sorted
    if not stream.dirichlet and not stream.outlier_burst and not sort_by_class:
        return torch.randperm(n_id + num_outliers, generator=g)
    if stream.dirichlet:
        id_order = dirichlet_order(id_labels, stream.dirichlet, g)
    elif sort_by_class:
        id_order = class_sorted_order(id_labels, g)
    else:
        id_order = torch.randperm(n_id, generator=g)
    outlier_order = n_id + torch.randperm(num_outliers, generator=g)
    if stream.outlier_burst:
        is_outlier = burst_positions(n_id, num_outliers, stream.outlier_burst, g)
    else:
        is_outlier = torch.zeros(n_id + num_outliers, dtype=torch.bool)
        is_outlier[torch.randperm(n_id + num_outliers, generator=g)[:num_outliers]] = True
    order = torch.empty(n_id + num_outliers, dtype=torch.long)
    order[~is_outlier] = id_order
    order[is_outlier] = outlier_order
    return order


def mix(
    id_images: torch.Tensor,
    id_labels: torch.Tensor,
    outlier_images: torch.Tensor | None,
    num_outliers: int,
    seed: int,
    stream: StreamSpec = PAPER_STREAM,
) -> Stream:
    """Concatenate ID images with the first ``num_outliers`` outliers and order them with
    ``seed`` (:func:`stream_order`: a uniform shuffle for the paper's stream), in batches of
    ``stream.batch_size``."""
    if num_outliers < 0:
        raise ValueError(f"num_outliers must be ≥ 0, got {num_outliers}; outliers_for_ratio(n_id, ratio) gives it")
    if num_outliers > 0:
        if outlier_images is None or outlier_images.shape[0] < num_outliers:
            have = 0 if outlier_images is None else outlier_images.shape[0]
            raise ValueError(f"need {num_outliers} outlier images, the outlier pool has {have}")
        if outlier_images.shape[1:] != id_images.shape[1:]:
            raise ValueError(
                f"outlier images are {tuple(outlier_images.shape[1:])}, ID images "
                f"{tuple(id_images.shape[1:])}: resize the outlier set first"
            )
        parts = [id_images, outlier_images[:num_outliers]]
        labels = torch.cat((id_labels.long(), torch.full((num_outliers,), -1, dtype=torch.long)))
    else:
        parts, labels = [id_images], id_labels.long()
    order = stream_order(id_labels, num_outliers, seed, stream)
    return Stream(gather_rows(parts, order), labels[order], stream.batch_size)


def gradual_severities(peak: int) -> tuple[int, ...]:
    """CoTTA's gradual setting for one corruption: severity 1 up to ``peak`` and back to 1
    (peak 5: 1, 2, 3, 4, 5, 4, 3, 2, 1)."""
    peak = validation.check_severity(peak)
    return (*range(1, peak + 1), *range(peak - 1, 0, -1))


#: Offset of the seed that shuffles a mixed-domain stream, so it does not replay a part's order.
_INTERLEAVE_SEED = 104729


def interleave(streams: list[Stream], seed: int) -> tuple[Stream, torch.Tensor]:
    """One stream of all of ``streams``' samples, shuffled uniformly with ``seed`` (mixed
    domains), and for each of its samples the index of the stream it came from (long [N])."""
    if not streams:
        raise ValueError("interleave needs at least one stream")
    g = torch.Generator().manual_seed(seed + _INTERLEAVE_SEED)
    source = torch.cat([torch.full((s.labels.numel(),), i, dtype=torch.long) for i, s in enumerate(streams)])
    order = torch.randperm(source.numel(), generator=g)
    images = gather_rows([s.images for s in streams], order)
    labels = torch.cat([s.labels for s in streams])[order]
    return Stream(images, labels, streams[0].batch_size), source[order]


#: Rows copied per step of :func:`gather_rows`: about 150 MB of 224-px images.
_GATHER_ROWS = 1024


def gather_rows(parts: list[torch.Tensor], order: torch.Tensor) -> torch.Tensor:
    """``torch.cat(parts)[order]`` (bit for bit) without the concatenated copy: an ImageNet-C
    stream is 9.4 GB, and the copy would double the peak. Reads the parts chunk by chunk, so a
    memory-mapped part is paged in as needed."""
    out = torch.empty((order.numel(), *parts[0].shape[1:]), dtype=parts[0].dtype)
    bounds = torch.tensor([0, *(p.shape[0] for p in parts)]).cumsum(0).tolist()
    for start in range(0, order.numel(), _GATHER_ROWS):
        rows, chunk = order[start : start + _GATHER_ROWS], out[start : start + _GATHER_ROWS]
        for part, low, high in zip(parts, bounds, bounds[1:]):
            hit = (rows >= low) & (rows < high)
            chunk[hit] = part[rows[hit] - low]
    return out


def apply_corruption(images: torch.Tensor, corruption: str, severity: int, seed: int) -> torch.Tensor:
    if corruption == "none":
        return images
    from stamplib.data.corruptions import corrupt

    return corrupt(images, corruption, severity, seed=seed)


@dataclass(frozen=True)
class CorruptionStreamSpec:
    """Which test stream of one corruption to build: the ID data set, the outlier set (or
    ``"none"``), the corruption (or ``"none"``) at ``severity``, the outlier share, the stream
    seed, at most ``max_id`` known-class samples (None: all), and how it is fed (``stream``).

    Every field is checked here, once, when the spec is made, and before any file is read; a
    RunSpec makes one per corruption of its cell (:meth:`stamplib.evaluation.spec.RunSpec.corruption_stream`),
    so its values are checked by this class. :func:`build_stream` and the stream cache trust it.
    A closed-set stream has no outliers: its ratio is 0, so one stream is built once.
    """

    dataset: str
    outlier_set: str
    corruption: str
    severity: int = 5
    outlier_ratio: float = 0.2
    seed: int = 0
    max_id: int | None = None
    stream: StreamSpec = PAPER_STREAM

    def __post_init__(self) -> None:
        check_names(self.dataset, self.outlier_set, (self.corruption,))
        object.__setattr__(self, "severity", validation.check_severity(self.severity))
        validation.check_outlier_ratio(self.outlier_ratio)
        if self.outlier_set == CLOSED_SET:
            object.__setattr__(self, "outlier_ratio", 0.0)
        object.__setattr__(self, "seed", validation.check_seed(self.seed))
        if self.max_id is not None:
            validation.check_positive_int("max_id", self.max_id, "or None for every ID sample")
        if not isinstance(self.stream, StreamSpec):
            raise ValueError("stream is a StreamSpec (stamplib.data.StreamSpec, e.g. "
                             f"StreamSpec(schedule='continual')), got {self.stream!r}")

    def building(self) -> CorruptionStreamSpec:
        """This spec with the feeding options that do not change the images at their defaults
        (:meth:`StreamSpec.building`): what the stream cache tells streams apart by."""
        return dataclasses.replace(self, stream=self.stream.building())


def build_stream(spec: CorruptionStreamSpec, *, data_root: str | os.PathLike | None = None) -> Stream:
    """The test stream ``spec`` names (kept in memory within the stream cache's budget: every
    method of a table reuses it).

    ID images: the released corrupted set when the data set has one, else the clean test set
    corrupted with the seed. Outliers: the *first* N of the pool (N from the outlier ratio,
    protocol.md §1.1/§3.2), corrupted like the ID images except Noise, resized to the ID size.
    The spec's ``stream``: its label order, outlier placement and batch size. Both sets are read
    from ``data_root`` (None: no data folder, so only data sets that ship with the package).
    """
    if not isinstance(spec, CorruptionStreamSpec):
        raise TypeError(f"build_stream takes a CorruptionStreamSpec (stamplib.data.CorruptionStreamSpec(dataset, "
                        f"outlier_set, corruption, ...)), got {type(spec).__name__}")
    root = Path(data_root) if data_root else None
    built = spec.building()
    return _CACHE.get((built, root), lambda: _build_stream(built, root))


def _build_stream(spec: CorruptionStreamSpec, root: Path | None) -> Stream:
    """The stream of ``spec`` as :meth:`CorruptionStreamSpec.building` gives it (the run-level
    options at their defaults: they do not change the images)."""
    outlier_set_name, corruption, severity = spec.outlier_set, spec.corruption, spec.severity
    seed, max_id, stream = spec.seed, spec.max_id, spec.stream
    data = dataset(spec.dataset)
    if corruption != "none" and data.released is not None:
        id_images, id_labels = data.released(root, corruption, severity)
        if max_id is not None:
            id_images, id_labels = id_images[:max_id], id_labels[:max_id]
    else:
        id_images, id_labels = data.clean_test(root)
        if max_id is not None:
            id_images, id_labels = id_images[:max_id], id_labels[:max_id]
        id_images = apply_corruption(id_images, corruption, severity, seed)
    imbalance = LabelShift.parse(stream.label_shift).imbalance
    if imbalance > 1.0:
        kept = long_tail_subset(id_labels, imbalance)
        id_images, id_labels = id_images[kept], id_labels[kept]
    pool = None
    n_out = 0
    if outlier_set_name != CLOSED_SET:
        source = outlier_set(outlier_set_name, data)
        n_out = outliers_for_ratio(id_images.shape[0], spec.outlier_ratio)
        if source.corrupted and corruption != "none" and source.released is not None:
            pool = source.released(root, corruption, severity, n_out)
        if pool is None:
            pool = source.load(root, n_out)[:n_out]
            if source.corrupted:
                # A seed of its own, so outliers do not replay the ID images' random draws.
                pool = apply_corruption(pool, corruption, severity, seed + 7919)
        pool = pool[:n_out]
        if pool.shape[0] and pool.shape[1:3] != id_images.shape[1:3]:
            from stamplib.data.loaders import resize_images

            if id_images.shape[1] != id_images.shape[2]:
                raise ValueError(f"cannot resize outliers to non-square ID images {tuple(id_images.shape[1:3])}")
            pool = resize_images(pool, int(id_images.shape[1]))
    return mix(id_images, id_labels, pool, n_out, seed, stream)


build_stream.cache_clear = _CACHE.clear  # type: ignore[attr-defined]
build_stream.cache = _CACHE  # type: ignore[attr-defined]
