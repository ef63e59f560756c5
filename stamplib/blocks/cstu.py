"""RoTTA's category-balanced sampling with timeliness and uncertainty (CSTU) memory
(baselines.md §7, official ``src/utils/memory.py`` ``CSTU``).

Rules, with N = capacity and C = classes:

* score of an item: s = λ_t·σ(age/N) + λ_u·u/ln C (σ = logistic); a new item has age 0;
* quota per class: N/C as a float;
* a new item of class k: if class k holds fewer than N/C items, then if the memory holds
  fewer than N items it is added, otherwise the victim is searched among the items of the
  classes of largest occupancy; if class k is at or over its quota the victim is searched in
  class k only. The victim is the item of highest score (ties → the later one in class order,
  then insertion order); if its score exceeds the new item's score it is removed and the new
  item appended to class k, else the new item is discarded (an empty search adds it);
* after every insertion attempt, discarded or not, every stored item's age grows by one.

``items()`` lists the stored items in class order, each class in insertion order, which is
the order the official ``get_memory`` stacks them in.

Speed: each insertion decides on the previous one's outcome, so the decisions run
one sample after the other, on the host, over a handful of numbers per stored item (label,
uncertainty term, birth, tag). The images stay on the device in a fixed buffer of N slots:
one indexed write per :meth:`add` call and one gather per :meth:`get_memory`, instead of a copy
and a stack per sample. The scores are the official ones to the bit: σ is evaluated by
``math.exp`` (a table over ages), and the two terms are added in float64 as Python adds them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class CSTUItem:
    data: torch.Tensor
    label: int
    uncertainty: float
    age: int = 0
    tag: int = -1  # the sample's tag (−1: unknown); see blocks.memory


class CSTUMemory:
    """Capacity-bounded, class-balanced memory with age- and uncertainty-based eviction."""

    def __init__(self, num_classes: int, capacity: int = 64, lambda_t: float = 1.0, lambda_u: float = 1.0) -> None:
        assert num_classes >= 2 and capacity >= 1
        self.num_classes = num_classes
        self.capacity = capacity
        self.per_class = capacity / num_classes
        self.lambda_t = lambda_t
        self.lambda_u = lambda_u
        self.clear()

    # -- queries ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return sum(len(slots) for slots in self._slots)

    def occupancy(self) -> list[int]:
        return [len(slots) for slots in self._slots]

    def _order(self) -> list[int]:
        """The stored slots in class order, each class in insertion order."""
        return [s for slots in self._slots for s in slots]

    def ages(self) -> list[int]:
        return [self._attempts - self._born[s] for s in self._order()]

    def labels(self) -> torch.Tensor:
        return torch.tensor([self._label[s] for s in self._order()], dtype=torch.long)

    def tags(self) -> torch.Tensor:
        return torch.tensor([self._tag[s] for s in self._order()], dtype=torch.long)

    def items(self) -> list[CSTUItem]:
        """Every stored item with its data (one view per item: for tests and diagnostics)."""
        assert self._data is not None or len(self) == 0
        return [CSTUItem(self._data[s], self._label[s], self._uncertainty[s], self._attempts - self._born[s],
                         self._tag[s]) for s in self._order()]

    def score(self, age: int, uncertainty: float) -> float:
        """Heuristic score (higher = evicted first): older and more uncertain items go."""
        timeliness = 1.0 / (1.0 + math.exp(-age / self.capacity))
        return self.lambda_t * timeliness + self.lambda_u * uncertainty / math.log(self.num_classes)

    def get_memory(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(stacked data [M, ...], ages / capacity [M] float32) in class-then-insertion order."""
        order = self._order()
        assert order and self._data is not None, "the memory is empty"
        data = self._data[torch.as_tensor(order).to(self._data.device, non_blocking=True)]
        ages = torch.tensor([(self._attempts - self._born[s]) / self.capacity for s in order],
                            dtype=torch.float32).to(data.device, non_blocking=True)
        return data, ages

    # -- updates ------------------------------------------------------------------------------------
    def clear(self) -> None:
        """Empty, as new (a reset leaves nothing behind, the data buffer included)."""
        self._timeliness = np.zeros(0)  # λ_t·σ(age/N) by age, grown on demand
        self._data: torch.Tensor | None = None  # [slots, ...] on the samples' device, from the first add
        self._slots: list[list[int]] = [[] for _ in range(self.num_classes)]
        self._free = list(range(self.capacity))[::-1]
        self._attempts = 0  # insertion attempts so far: an item's age is attempts − its birth
        self._born: dict[int, int] = {}
        self._label: dict[int, int] = {}
        self._uncertainty: dict[int, float] = {}
        self._uncertainty_term: dict[int, float] = {}  # λ_u·u / ln C, the score's second term
        self._tag: dict[int, int] = {}

    def add(self, samples: torch.Tensor, labels: Sequence[int], uncertainties: Sequence[float],
            tags: Sequence[int] | None = None) -> list[bool]:
        """Insertion attempts in order, one per sample; returns whether each was stored. The
        stored samples reach the device buffer in one indexed write."""
        n = samples.shape[0]
        assert len(labels) == len(uncertainties) == n and (tags is None or len(tags) == n)
        if self._data is None:
            self._data = samples.new_zeros((self.capacity, *samples.shape[1:]))  # zeros: states compare equal
        written: dict[int, int] = {}  # slot → the batch index whose data it holds now
        stored = []
        for i in range(n):
            slot = self._attempt(int(labels[i]), float(uncertainties[i]), -1 if tags is None else int(tags[i]))
            if slot is not None:
                written[slot] = i
            stored.append(slot is not None)
        if written:
            if max(written) >= self._data.shape[0]:  # only after an empty eviction search
                grown = self._data.new_zeros((max(written) + 1 - self._data.shape[0], *self._data.shape[1:]))
                self._data = torch.cat([self._data, grown])
            where = torch.as_tensor([list(written), list(written.values())]).to(samples.device, non_blocking=True)
            self._data[where[0]] = samples[where[1]].detach()
        return stored

    def _attempt(self, label: int, uncertainty: float, tag: int) -> int | None:
        """One insertion attempt; the slot the new item takes, or None. Ages grow afterwards."""
        assert 0 <= label < self.num_classes, f"label {label} out of range"
        term = self.lambda_u * uncertainty / math.log(self.num_classes)
        new_score = self._timeliness_of(np.zeros(1, dtype=np.int64))[0] + term
        slot = None
        if self._make_room(label, new_score):
            slot = self._free.pop() if self._free else len(self._born) + len(self._free)
            self._slots[label].append(slot)
            self._born[slot], self._label[slot], self._tag[slot] = self._attempts, label, tag
            self._uncertainty[slot], self._uncertainty_term[slot] = uncertainty, term
        self._attempts += 1
        return slot

    def _timeliness_of(self, ages: np.ndarray) -> np.ndarray:
        """λ_t·σ(age/N) as the official ``math.exp`` gives it, looked up by age."""
        top = int(ages.max()) if ages.size else 0
        if top >= self._timeliness.size:
            start, stop = self._timeliness.size, max(2 * top + 1, 2 * self.capacity)
            more = [self.lambda_t * (1.0 / (1.0 + math.exp(-age / self.capacity))) for age in range(start, stop)]
            self._timeliness = np.concatenate([self._timeliness, np.asarray(more, dtype=np.float64)])
        return self._timeliness[ages]

    def _make_room(self, label: int, new_score: float) -> bool:
        if len(self._slots[label]) < self.per_class:
            if len(self) < self.capacity:
                return True
            occupancy = self.occupancy()
            largest = max(occupancy)
            return self._evict([k for k, n in enumerate(occupancy) if n == largest], new_score)
        return self._evict([label], new_score)

    def _evict(self, classes: list[int], new_score: float) -> bool:
        candidates = [(k, s) for k in classes for s in self._slots[k]]
        if not candidates:
            return True
        slots = np.asarray([s for _, s in candidates])
        ages = self._attempts - np.asarray([self._born[s] for s in slots], dtype=np.int64)
        scores = self._timeliness_of(ages) + np.asarray([self._uncertainty_term[s] for s in slots])
        best = int(np.flatnonzero(scores == scores.max())[-1])  # ties go to the later item
        if scores[best] > new_score:
            k, slot = candidates[best]
            self._slots[k].remove(slot)
            for table in (self._born, self._label, self._uncertainty, self._uncertainty_term, self._tag):
                del table[slot]
            self._free.append(slot)
            return True
        return False
