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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
        self.data: list[list[CSTUItem]] = [[] for _ in range(num_classes)]

    # -- queries ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return sum(len(items) for items in self.data)

    def occupancy(self) -> list[int]:
        return [len(items) for items in self.data]

    def items(self) -> list[CSTUItem]:
        return [item for items in self.data for item in items]

    def score(self, age: int, uncertainty: float) -> float:
        """Heuristic score (higher = evicted first): older and more uncertain items go."""
        timeliness = 1.0 / (1.0 + math.exp(-age / self.capacity))
        return self.lambda_t * timeliness + self.lambda_u * uncertainty / math.log(self.num_classes)

    def get_memory(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(stacked data [M, ...], ages / capacity [M] float32) in class-then-insertion order."""
        items = self.items()
        assert items, "the memory is empty"
        data = torch.stack([item.data for item in items])
        ages = torch.tensor([item.age / self.capacity for item in items], dtype=torch.float32, device=data.device)
        return data, ages

    # -- updates ------------------------------------------------------------------------------------
    def clear(self) -> None:
        self.data = [[] for _ in range(self.num_classes)]

    def add(self, data: torch.Tensor, label: int, uncertainty: float, tag: int = -1) -> bool:
        """One insertion attempt; returns whether the item was stored. Ages grow afterwards."""
        assert 0 <= label < self.num_classes, f"label {label} out of range"
        new_score = self.score(0, uncertainty)
        stored = self._make_room(label, new_score)
        if stored:
            self.data[label].append(CSTUItem(data, label, float(uncertainty), tag=tag))
        for items in self.data:
            for item in items:
                item.age += 1
        return stored

    def _make_room(self, label: int, new_score: float) -> bool:
        if len(self.data[label]) < self.per_class:
            if len(self) < self.capacity:
                return True
            occupancy = self.occupancy()
            largest = max(occupancy)
            return self._evict([k for k, n in enumerate(occupancy) if n == largest], new_score)
        return self._evict([label], new_score)

    def _evict(self, classes: list[int], new_score: float) -> bool:
        best: tuple[int, int] | None = None
        best_score = -math.inf
        for k in classes:
            for idx, item in enumerate(self.data[k]):
                s = self.score(item.age, item.uncertainty)
                if best is None or s >= best_score:  # ">=": ties go to the later item
                    best, best_score = (k, idx), s
        if best is None:
            return True
        if best_score > new_score:
            self.data[best[0]].pop(best[1])
            return True
        return False
