"""Test streams: ID and outlier images mixed, shuffled with a seed, served in batches.

:func:`build_stream` turns (ID data set, outlier set, corruption, severity, ratio, seed) into a
:class:`Stream`, reading both through the data set registry.

Images stay resident as one uint8 N×H×W×3 tensor; a batch is a slice converted to float
N×3×H×W in [0,1] on the target device (no DataLoader: one stream fits in memory).

Built streams are kept for reuse (every method of a table reads the same streams) within a
byte budget, least recently used out first: :data:`DEFAULT_STREAM_CACHE_BYTES`, or
``$STAMPLIB_STREAM_CACHE`` (``"512M"``, ``"8G"``, ``"0"`` = keep none), or
:func:`set_stream_cache_budget`. A stream larger than the budget is never kept: it lives while
its corruption runs, so a cell over ImageNet-C's 15 corruptions (9.4 GB a stream) holds one at
a time.

Mixing follows protocol.md §1: the *first* N outliers of the pool (not a random sample), the
concatenation shuffled uniformly. Unlike the authors' code, the order depends only on the
stream seed, not on how much randomness a method consumed, so every method sees the same order.

Two harder orders (beyond the paper; :func:`stream_order`), both off by default:

* ``dirichlet=δ > 0`` — non-i.i.d. labels as in RoTTA and mariodoebler's test-time-adaptation
  suite: the ID samples are split into as many time slots as there are classes, each class
  spread over the slots by proportions drawn from Dirichlet(δ, …, δ), the classes within a slot
  in random order. Small δ (0.01–0.1) gives long runs of one class. Outliers keep uniform
  positions, so the outlier share per batch stays what it was.
* ``outlier_burst=L > 0`` — outliers arrive in runs of L consecutive samples (the last run may
  be shorter), the runs at distinct random positions between ID samples (so never merged).

Label shift (:class:`LabelShift`, beyond the paper; off by default):

* ``imbalance=ρ > 1`` — long-tailed known classes, as CIFAR-10-LT (Cao et al., NeurIPS 2019):
  class c (in index order) keeps the first n_max·ρ^(−c/(C−1)) of its samples, so the largest
  class over the smallest is ρ. The outliers follow the smaller ID count, so the outlier share
  stays the spec's.
* ``sorted`` — a temporally correlated order: the ID samples come class by class (ascending
  class index, each class shuffled), the outliers at uniform positions between them. It is the
  limit δ → 0 of the Dirichlet order, with the class order fixed.

:func:`interleave` makes one stream of several (mixed domains: every corruption of a cell in one
shuffled stream), keeping which stream each sample came from.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from stamplib import paths, validation
from stamplib.data.lookup import check_names, dataset, outlier_set
from stamplib.data.registry import CLOSED_SET


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


def outliers_for_ratio(num_id: int, ratio: float) -> int:
    """N outliers giving an outlier share ``ratio`` of the stream: N = num_id·r/(1−r)
    (protocol.md §3.2; 0.2 → num_id/4)."""
    validation.check_outlier_ratio(ratio)
    return round(num_id * ratio / (1.0 - ratio))


def dirichlet_order(labels: torch.Tensor, concentration: float, generator: torch.Generator) -> torch.Tensor:
    """A permutation of ``labels``' indices in non-i.i.d. label order (module docstring):
    one time slot per class; class c's samples (in random order) are cut into consecutive
    pieces of sizes ∝ Dirichlet(δ·1) and piece s goes to slot s; within a slot the pieces of
    the classes come in random order."""
    classes = labels.unique()
    n_slots = int(classes.numel())
    alpha = torch.full((n_slots,), float(concentration), dtype=torch.float64)
    slots: list[list[torch.Tensor]] = [[] for _ in range(n_slots)]
    for c in classes.tolist():
        members = torch.nonzero(labels == c).flatten()
        members = members[torch.randperm(members.numel(), generator=generator)]
        # torch's Dirichlet sampler has no generator argument: gamma draws through one seeded
        # from ours keep the order a function of the stream seed alone.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
            shares = torch.distributions.Dirichlet(alpha).sample()
        cuts = (shares.cumsum(0)[:-1] * members.numel()).long().clamp(0, members.numel()).tolist()
        for slot, piece in enumerate(torch.tensor_split(members, cuts)):
            slots[slot].append(piece)
    order = []
    for pieces in slots:
        for i in torch.randperm(len(pieces), generator=generator).tolist():
            order.append(pieces[i])
    return torch.cat(order)


def burst_positions(num_id: int, num_outliers: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """Bool mask over a stream of ``num_id + num_outliers`` samples: True where an outlier goes,
    in runs of ``length`` (the last may be shorter) placed at distinct gaps between ID samples."""
    runs = -(-num_outliers // length) if num_outliers else 0
    if runs > num_id + 1:
        raise ValueError(
            f"{num_outliers} outliers in runs of {length} need {runs} gaps between ID samples, but "
            f"{num_id} ID samples leave {num_id + 1}: choose a longer outlier_burst"
        )
    gaps = torch.randperm(num_id + 1, generator=generator)[:runs].sort().values
    sizes = torch.full((runs,), length)
    if runs:
        sizes[-1] = num_outliers - length * (runs - 1)
    # ID sample i sits after the runs at gaps ≤ i: position = i + outliers before it.
    before = torch.zeros(num_id + 1, dtype=torch.long)
    before.index_add_(0, gaps, sizes)
    id_positions = torch.arange(num_id) + before.cumsum(0)[:num_id]
    mask = torch.ones(num_id + num_outliers, dtype=torch.bool)
    mask[id_positions] = False
    return mask


@dataclass(frozen=True)
class LabelShift:
    """Class-imbalanced known classes and/or a class-sorted order (module docstring). Written as
    text in a RunSpec: ``""`` (off), ``"imbalance:10"``, ``"sorted"`` or ``"imbalance:10+sorted"``."""

    imbalance: float = 1.0  # largest class over the smallest; 1 = the classes as the data set has them
    sorted: bool = False  # ID samples class by class

    def __post_init__(self) -> None:
        if isinstance(self.imbalance, bool) or not isinstance(self.imbalance, (int, float)) or not (
            math.isfinite(float(self.imbalance)) and float(self.imbalance) >= 1.0
        ):
            raise ValueError(f"the imbalance ratio is the largest class over the smallest, a number ≥ 1 (1 = "
                             f"off; long-tailed CIFAR uses 10 to 100), got {self.imbalance!r}")
        object.__setattr__(self, "imbalance", float(self.imbalance))

    @classmethod
    def parse(cls, text: str | LabelShift) -> LabelShift:
        if isinstance(text, LabelShift):
            return text
        if not isinstance(text, str):
            raise ValueError(f"label_shift is text such as 'imbalance:10', 'sorted' or 'imbalance:10+sorted' "
                             f"('' = off), got {text!r}")
        imbalance, is_sorted = 1.0, False
        for part in (p.strip() for p in text.replace(",", "+").split("+") if p.strip()):
            name, _, value = part.replace("=", ":").partition(":")
            if name == "sorted" and not value:
                is_sorted = True
            elif name == "imbalance" and value:
                try:
                    imbalance = float(value)
                except ValueError:
                    raise ValueError(f"label_shift {text!r}: the imbalance ratio must be a number ≥ 1, "
                                     f"got {value!r}") from None
            else:
                raise ValueError(f"label_shift {text!r}: unknown part {part!r}; give 'imbalance:ρ' (ρ ≥ 1, the "
                                 "largest class over the smallest), 'sorted' (class by class), or both "
                                 "joined by '+'")
        return cls(imbalance, is_sorted)

    def __str__(self) -> str:
        parts = [f"imbalance:{self.imbalance:g}"] if self.imbalance > 1.0 else []
        return "+".join(parts + (["sorted"] if self.sorted else []))

    def __bool__(self) -> bool:
        return self.imbalance > 1.0 or self.sorted


def long_tail_counts(num_classes: int, largest: int, imbalance: float) -> list[int]:
    """Samples kept per class (index order) for a long tail with ``imbalance`` = first/last:
    largest·ρ^(−c/(C−1)), at least 1."""
    if num_classes < 2:
        return [largest]
    return [max(1, round(largest * imbalance ** (-c / (num_classes - 1)))) for c in range(num_classes)]


def long_tail_subset(labels: torch.Tensor, imbalance: float) -> torch.Tensor:
    """Indices (ascending) of the first :func:`long_tail_counts` samples of every class of
    ``labels``, the largest class's count the most frequent class's."""
    classes, counts = labels.unique(return_counts=True)
    keep = long_tail_counts(classes.numel(), int(counts.max()), imbalance)
    chosen = [torch.nonzero(labels == c).flatten()[:n] for c, n in zip(classes.tolist(), keep)]
    return torch.cat(chosen).sort().values


def class_sorted_order(labels: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A permutation of ``labels``' indices class by class (ascending), each class shuffled."""
    shuffled = torch.randperm(labels.numel(), generator=generator)
    return shuffled[torch.sort(labels[shuffled], stable=True).indices]


def stream_order(
    id_labels: torch.Tensor, num_outliers: int, seed: int, dirichlet: float = 0.0, outlier_burst: int = 0,
    sort_by_class: bool = False,
) -> torch.Tensor:
    """The order of a stream made of ``id_labels`` followed by ``num_outliers`` outliers: a
    permutation of their indices. Every option off: one uniform shuffle (today's order, bit for
    bit); otherwise ID order and outlier positions as the module docstring describes."""
    if dirichlet and sort_by_class:
        raise ValueError("a stream has one label order: give dirichlet or a sorted label_shift, not both")
    n_id = id_labels.numel()
    g = torch.Generator().manual_seed(seed)
    if not dirichlet and not outlier_burst and not sort_by_class:
        return torch.randperm(n_id + num_outliers, generator=g)
    if dirichlet:
        id_order = dirichlet_order(id_labels, dirichlet, g)
    elif sort_by_class:
        id_order = class_sorted_order(id_labels, g)
    else:
        id_order = torch.randperm(n_id, generator=g)
    outlier_order = n_id + torch.randperm(num_outliers, generator=g)
    if outlier_burst:
        is_outlier = burst_positions(n_id, num_outliers, outlier_burst, g)
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
    batch_size: int = 64,
    dirichlet: float = 0.0,
    outlier_burst: int = 0,
    sort_by_class: bool = False,
) -> Stream:
    """Concatenate ID images with the first ``num_outliers`` outliers and order them with
    ``seed`` (:func:`stream_order`: a uniform shuffle unless ``dirichlet``/``outlier_burst``/
    ``sort_by_class``)."""
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
    order = stream_order(id_labels, num_outliers, seed, validation.check_dirichlet(dirichlet),
                         validation.check_outlier_burst(outlier_burst), sort_by_class)
    return Stream(gather_rows(parts, order), labels[order], batch_size)


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


def check_stream_args(
    dataset: str, outliers: str, corruption: str, severity: int, outlier_ratio: float, seed: int,
    max_id: int | None, batch_size: int, dirichlet: float = 0.0, outlier_burst: int = 0,
    label_shift: str | LabelShift = "",
) -> None:
    """Everything :func:`build_stream` can refuse without reading a file, checked up front."""
    validation.check_dirichlet(dirichlet)
    validation.check_outlier_burst(outlier_burst)
    if LabelShift.parse(label_shift).sorted and dirichlet:
        raise ValueError("a stream has one label order: give dirichlet or a sorted label_shift, not both")
    check_names(dataset, outliers, (corruption,))
    validation.check_severity(severity)
    validation.check_outlier_ratio(outlier_ratio)
    validation.check_seed(seed)
    if max_id is not None:
        validation.check_positive_int("max_id", max_id, "or None for every ID sample")
    validation.check_positive_int("batch_size", batch_size, "the paper uses 64")


def build_stream(
    dataset: str,
    outliers: str,
    corruption: str,
    severity: int = 5,
    outlier_ratio: float = 0.2,
    seed: int = 0,
    max_id: int | None = None,
    batch_size: int = 64,
    *,
    data_root: str | os.PathLike | None = None,
    dirichlet: float = 0.0,
    outlier_burst: int = 0,
    label_shift: str | LabelShift = "",
) -> Stream:
    """The test stream of one corruption (kept in memory within the stream cache's budget,
    module docstring: every method of a table reuses it).

    ID images: the released corrupted set when the data set has one, else the clean test set
    corrupted with ``seed``. Outliers: the *first* N of the pool (N from ``outlier_ratio``,
    protocol.md §1.1/§3.2), corrupted like the ID images except Noise, resized to the ID size.
    ``dirichlet``/``outlier_burst``: the harder orders of the module docstring (0: off);
    ``label_shift``: a :class:`LabelShift` or its text (``""``: off). Names and numbers are
    checked before any image is read.
    """
    check_stream_args(dataset, outliers, corruption, severity, outlier_ratio, seed, max_id, batch_size,
                      dirichlet, outlier_burst, label_shift)
    key = (dataset, outliers, corruption, severity, outlier_ratio, seed, max_id, batch_size,
           str(paths.data_root(data_root)), float(dirichlet), int(outlier_burst), str(LabelShift.parse(label_shift)))
    return _CACHE.get(key, lambda: _build_stream(*key))


def _build_stream(
    dataset_name: str, outliers: str, corruption: str, severity: int, outlier_ratio: float, seed: int,
    max_id: int | None, batch_size: int, root_str: str, dirichlet: float = 0.0, outlier_burst: int = 0,
    label_shift: str = "",
) -> Stream:
    root = Path(root_str)
    data = dataset(dataset_name)
    if corruption != "none" and data.released is not None:
        id_images, id_labels = data.released(root, corruption, severity)
        if max_id is not None:
            id_images, id_labels = id_images[:max_id], id_labels[:max_id]
    else:
        id_images, id_labels = data.clean_test(root)
        if max_id is not None:
            id_images, id_labels = id_images[:max_id], id_labels[:max_id]
        id_images = apply_corruption(id_images, corruption, severity, seed)
    shift = LabelShift.parse(label_shift)
    if shift.imbalance > 1.0:
        kept = long_tail_subset(id_labels, shift.imbalance)
        id_images, id_labels = id_images[kept], id_labels[kept]
    pool = None
    n_out = 0
    if outliers != CLOSED_SET:
        source = outlier_set(outliers, data)
        n_out = outliers_for_ratio(id_images.shape[0], outlier_ratio)
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
    return mix(id_images, id_labels, pool, n_out, seed=seed, batch_size=batch_size, dirichlet=dirichlet,
               outlier_burst=outlier_burst, sort_by_class=shift.sorted)


# --------------------------------------------------------------------------- the stream cache

#: The stream cache's budget when neither $STAMPLIB_STREAM_CACHE nor set_stream_cache_budget
#: says otherwise: all 15 CIFAR-10-C streams of an outlier set (38 MB each) several times over,
#: no ImageNet-C stream (9.4 GB each).
DEFAULT_STREAM_CACHE_BYTES = 4 * 2**30
STREAM_CACHE_ENV = "STAMPLIB_STREAM_CACHE"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_budget_override: int | None = None


def parse_bytes(value: str | int) -> int:
    """A byte count: an integer, or a number with K, M, G or T (powers of 1024), e.g. ``512M``."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", str(value).strip(), re.IGNORECASE)
    if isinstance(value, bool) or not found:
        raise ValueError(
            f"a byte count must be a non-negative integer or a number with K, M, G or T "
            f"(e.g. 512M, 8G; 0 keeps no stream), got {value!r}"
        )
    return int(float(found.group(1)) * _UNITS[found.group(2).upper()])


def stream_cache_budget() -> int:
    """Bytes of streams kept for reuse: :func:`set_stream_cache_budget`'s, else
    ``$STAMPLIB_STREAM_CACHE``'s, else :data:`DEFAULT_STREAM_CACHE_BYTES`."""
    if _budget_override is not None:
        return _budget_override
    text = paths.environment(STREAM_CACHE_ENV).strip()
    if not text:
        return DEFAULT_STREAM_CACHE_BYTES
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise ValueError(f"${STREAM_CACHE_ENV}: {exc}") from None


def set_stream_cache_budget(nbytes: int | str | None) -> None:
    """Keep at most ``nbytes`` of streams (``"512M"``, ``0`` = none; None: back to the
    environment's or the default budget). Streams over the new budget are dropped at once."""
    global _budget_override
    _budget_override = None if nbytes is None else parse_bytes(nbytes)
    _CACHE.shrink(stream_cache_budget())


def stream_bytes(stream: Stream) -> int:
    return stream.images.nbytes + stream.labels.nbytes


class StreamCache:
    """Streams by their build arguments, within :func:`stream_cache_budget` bytes, the least
    recently used dropped first. The budget bounds what is *kept*: while a stream is built the
    process also holds that stream, so the peak is the budget plus the largest stream."""

    def __init__(self) -> None:
        self._streams: OrderedDict[tuple, Stream] = OrderedDict()
        self._lock = threading.Lock()  # callers on several threads must not see the dict change mid-update

    @property
    def nbytes(self) -> int:
        return sum(stream_bytes(s) for s in self._streams.values())

    def __len__(self) -> int:
        return len(self._streams)

    def get(self, key: tuple, build: Callable[[], Stream]) -> Stream:
        with self._lock:
            if key in self._streams:
                self._streams.move_to_end(key)
                return self._streams[key]
        stream = build()  # outside the lock: building reads and corrupts images for a while
        budget = stream_cache_budget()
        with self._lock:
            if stream_bytes(stream) <= budget:
                self._streams[key] = stream
                self._shrink(budget)
        return stream

    def shrink(self, budget: int) -> None:
        with self._lock:
            self._shrink(budget)

    def _shrink(self, budget: int) -> None:
        while self._streams and self.nbytes > budget:
            self._streams.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._streams.clear()


_CACHE = StreamCache()
build_stream.cache_clear = _CACHE.clear  # type: ignore[attr-defined]
build_stream.cache = _CACHE  # type: ignore[attr-defined]
