"""SoTTA's high-confidence uniform-class sampling memory (HUS, baselines.md §8).

Per-class lists with a shared capacity. A sample enters only if its confidence (max softmax)
is at least the threshold C₀; samples below it are dropped without touching the memory. When
the memory is full, one item is evicted first: if the newcomer's class is *not* among the
currently largest classes, a random item of a randomly chosen largest class goes (this is what
drives the memory towards uniform classes); otherwise a random item of the newcomer's own
class goes. All random choices come from the generator passed in.
"""

from __future__ import annotations

import torch

from stamplib.blocks.memory import tag_list


class HUSMemory:
    def __init__(
        self,
        num_classes: int,
        capacity: int = 64,
        threshold: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> None:
        assert num_classes > 0 and capacity > 0, "HUS needs classes and a positive capacity"
        self.num_classes = num_classes
        self.capacity = capacity
        self.threshold = threshold
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)
        self.clear()

    def clear(self) -> None:
        self.items: list[list[torch.Tensor]] = [[] for _ in range(self.num_classes)]
        self.item_tags: list[list[int]] = [[] for _ in range(self.num_classes)]  # see blocks.memory

    def __len__(self) -> int:
        return sum(len(c) for c in self.items)

    def class_counts(self) -> list[int]:
        return [len(c) for c in self.items]

    def _randint(self, high: int) -> int:
        return int(torch.randint(high, (1,), generator=self.generator))

    def largest_classes(self) -> list[int]:
        counts = self.class_counts()
        top = max(counts)
        return [c for c, k in enumerate(counts) if k == top]

    def add(self, samples: torch.Tensor, labels: torch.Tensor, confidences: torch.Tensor,
            tags: torch.Tensor | None = None) -> int:
        """Offer samples one by one in batch order; returns how many were stored."""
        assert samples.shape[0] == labels.shape[0] == confidences.shape[0]
        stored = 0
        offered = zip(samples, labels.tolist(), confidences.tolist(), tag_list(tags, samples.shape[0]))
        for sample, label, conf, tag in offered:
            if conf < self.threshold:
                continue
            if len(self) >= self.capacity:
                self._evict_for(label)
            self.items[label].append(sample.detach().clone())
            self.item_tags[label].append(tag)
            stored += 1
        return stored

    def _evict_for(self, label: int) -> None:
        largest = self.largest_classes()
        victim = label
        if label not in largest:
            victim = largest[self._randint(len(largest))]
        index = self._randint(len(self.items[victim]))
        self.items[victim].pop(index)
        self.item_tags[victim].pop(index)

    def samples(self) -> torch.Tensor:
        """All stored samples, class 0 first (insertion order within a class), then class 1, …"""
        return torch.stack([s for cls in self.items for s in cls])

    def labels(self) -> torch.Tensor:
        return torch.tensor([c for c, cls in enumerate(self.items) for _ in cls], dtype=torch.long)

    def tags(self) -> torch.Tensor:
        """The tags of :meth:`samples`, in the same order."""
        return torch.tensor([p for cls in self.item_tags for p in cls], dtype=torch.long)
