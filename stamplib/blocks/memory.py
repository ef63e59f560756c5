"""Memories used by the methods.

:class:`ClassBalancedMemory` is STAMP's reliable class-balanced memory (RBM), exactly as in
stamp.md §4.3: per-class FIFO lists, eviction from a *present* class with the largest class-
frequency EMA ξ (ties uniformly at random, oldest sample of that class removed), ξ frozen
during the insertions of a batch and moved once per adaptation step.

Every memory here keeps, beside each sample, the tag it came with (−1 when none was given:
:meth:`stamplib.methods.TTAMethod.sample_tags`); a tracer, which knows the stream position of
every tag, tells the outliers in the memory by them. Tags never take part in a decision, so they
change nothing the method computes.
"""

from __future__ import annotations

import torch


def tag_list(tags: torch.Tensor | None, n: int) -> list[int]:
    """``tags`` as ints, or −1 (unknown) for each of the ``n`` samples."""
    if tags is None:
        return [-1] * n
    assert tags.shape == (n,), f"{tags.numel()} tags for {n} samples"
    return tags.tolist()


class PerClassMemory:
    """What the per-class memories share (STAMP's RBM here, SoTTA's HUS in :mod:`.hus`): their
    classes, capacity and the generator of their random choices, their size, and the order in
    which they give their samples out (class 0 first, insertion order within a class). A subclass
    keeps each class's entries in :meth:`per_class` and empties itself in ``clear``."""

    def __init__(self, num_classes: int, capacity: int, generator: torch.Generator | None) -> None:
        assert num_classes > 0 and capacity > 0, "a memory needs classes and a positive capacity"
        self.num_classes = num_classes
        self.capacity = capacity
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)
        self.clear()

    def clear(self) -> None:
        raise NotImplementedError

    def per_class(self) -> list[list]:
        """Each class's entries, in insertion order."""
        raise NotImplementedError

    def __len__(self) -> int:
        return sum(len(c) for c in self.per_class())

    def _randint(self, high: int) -> int:
        # The generator is a CPU one: a host draw, no device wait.
        return int(torch.randint(high, (1,), generator=self.generator))

    def labels(self) -> torch.Tensor:
        """The class of each sample, in the order the samples are given out."""
        return torch.tensor([c for c, cls in enumerate(self.per_class()) for _ in cls], dtype=torch.long)


class ClassBalancedMemory(PerClassMemory):
    def __init__(self, num_classes: int, capacity: int = 64, beta: float = 0.1,
                 generator: torch.Generator | None = None) -> None:
        assert 0.0 < beta <= 1.0, f"beta is the class-frequency EMA's step, in (0, 1], got {beta}"
        self.beta = beta
        super().__init__(num_classes, capacity, generator)

    def clear(self) -> None:
        self.items: list[list[torch.Tensor]] = [[] for _ in range(self.num_classes)]
        self.item_tags: list[list[int]] = [[] for _ in range(self.num_classes)]
        self.xi = torch.zeros(self.num_classes, dtype=torch.float64)

    def per_class(self) -> list[list[torch.Tensor]]:
        return self.items

    def class_counts(self) -> torch.Tensor:
        return torch.tensor([len(c) for c in self.items], dtype=torch.float64)

    def add(self, samples: torch.Tensor, labels: torch.Tensor, tags: torch.Tensor | None = None) -> None:
        """Insert samples one by one in batch order; evicts by the current (frozen) ξ."""
        assert samples.shape[0] == labels.shape[0]
        for sample, label, tag in zip(samples, labels.tolist(), tag_list(tags, samples.shape[0])):
            if len(self) >= self.capacity:
                self._evict_one()
            self.items[label].append(sample.detach().clone())
            self.item_tags[label].append(tag)

    def eviction_candidates(self) -> list[int]:
        """The classes the next insertion may evict from: none while the memory has room, else
        the classes present in it with the largest class-frequency EMA ξ (§4.3)."""
        if len(self) < self.capacity:
            return []
        present = [c for c in range(self.num_classes) if self.items[c]]
        top = max(0.0, max(float(self.xi[c]) for c in present))
        return [c for c in present if float(self.xi[c]) == top]

    def _evict_one(self) -> None:
        candidates = self.eviction_candidates()
        pick = self._randint(len(candidates))
        self.items[candidates[pick]].pop(0)
        self.item_tags[candidates[pick]].pop(0)

    def update_frequency(self) -> None:
        """ξ ← (1−β)·ξ + β·counts (paper Eq. 5); called once per adaptation step."""
        self.xi = (1.0 - self.beta) * self.xi + self.beta * self.class_counts()

    def samples(self) -> torch.Tensor:
        """All stored samples, class 0 oldest→newest first, then class 1, ... (§4.3)."""
        return torch.stack([s for cls in self.items for s in cls])

    def tags(self) -> torch.Tensor:
        """The tags of :meth:`samples`, in the same order."""
        return torch.tensor([p for cls in self.item_tags for p in cls], dtype=torch.long)
