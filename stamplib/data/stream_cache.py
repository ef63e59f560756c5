"""The stream cache: built streams kept for reuse (every method of a table reads the same
streams) within a byte budget, least recently used out first: :data:`DEFAULT_STREAM_CACHE_BYTES`,
or ``$STAMPLIB_STREAM_CACHE`` (``"512M"``, ``"8G"``, ``"0"`` = keep none), or
:func:`set_stream_cache_budget`. A stream larger than the budget is never kept: it lives while
its corruption runs, so a cell over ImageNet-C's 15 corruptions (9.4 GB a stream) holds one at
a time."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Protocol

from stamplib import paths


class Sized(Protocol):
    """What the cache measures of a stream (:class:`stamplib.data.streams.Stream`)."""

    @property
    def nbytes(self) -> int: ...


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


def stream_bytes(stream: Sized) -> int:
    return stream.nbytes


class StreamCache:
    """Streams by their build arguments (:func:`stamplib.data.streams.build_stream`'s key),
    within :func:`stream_cache_budget` bytes, the least recently used dropped first. The budget bounds what is *kept*:
    while a stream is built the
    process also holds that stream, so the peak is the budget plus the largest stream."""

    def __init__(self) -> None:
        self._streams: OrderedDict[Hashable, Sized] = OrderedDict()
        self._lock = threading.Lock()  # callers on several threads must not see the dict change mid-update

    @property
    def nbytes(self) -> int:
        return sum(stream_bytes(s) for s in self._streams.values())

    def __len__(self) -> int:
        return len(self._streams)

    def get(self, key: Hashable, build: Callable[[], Sized]) -> Sized:
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
