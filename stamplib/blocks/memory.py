"""Memories used by the methods.

:class:`ClassBalancedMemory` is STAMP's reliable class-balanced memory (RBM), exactly as in
stamp.md §4.3: per-class FIFO lists, eviction from a *present* class with the largest class-
frequency EMA ξ (ties uniformly at random, oldest sample of that class removed), ξ frozen
during the insertions of a batch and moved once per adaptation step.

Every memory here keeps, beside each sample, the stream position it came with (−1 when none
was given): a trace tells the outliers in the memory by it. Positions never take part in a
decision, so they change nothing the method computes.
"""

from __future__ import annotations

import torch


def position_list(positions: torch.Tensor | None, n: int) -> list[int]:
    """``positions`` as ints, or −1 (unknown) for each of the ``n`` samples."""
    if positions is None:
        return [-1] * n
    assert positions.shape == (n,), f"{positions.numel()} positions for {n} samples"
    return positions.tolist()


class ClassBalancedMemory:
    def __init__(
        self,
        num_classes: int,
        capacity: int = 64,
        beta: float = 0.1,
        generator: torch.Generator | None = None,
    ) -> None:
        assert num_classes > 0 and capacity > 0 and 0.0 < beta <= 1.0
        self.num_classes = num_classes
        self.capacity = capacity
        self.beta = beta
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)
        self.clear()

    def clear(self) -> None:
        self.items: list[list[torch.Tensor]] = [[] for _ in range(self.num_classes)]
        self.item_positions: list[list[int]] = [[] for _ in range(self.num_classes)]
        self.xi = torch.zeros(self.num_classes, dtype=torch.float64)

    def __len__(self) -> int:
        return sum(len(c) for c in self.items)

    def class_counts(self) -> torch.Tensor:
        return torch.tensor([len(c) for c in self.items], dtype=torch.float64)

    def add(self, samples: torch.Tensor, labels: torch.Tensor, positions: torch.Tensor | None = None) -> None:
        """Insert samples one by one in batch order; evicts by the current (frozen) ξ."""
        assert samples.shape[0] == labels.shape[0]
        for sample, label, position in zip(samples, labels.tolist(), position_list(positions, samples.shape[0])):
            if len(self) >= self.capacity:
                self._evict_one()
            self.items[label].append(sample.detach().clone())
            self.item_positions[label].append(position)

    def _evict_one(self) -> None:
        present = [c for c in range(self.num_classes) if self.items[c]]
        top = max(0.0, max(float(self.xi[c]) for c in present))
        candidates = [c for c in present if float(self.xi[c]) == top]
        pick = int(torch.randint(len(candidates), (1,), generator=self.generator))
        self.items[candidates[pick]].pop(0)
        self.item_positions[candidates[pick]].pop(0)

    def update_frequency(self) -> None:
        """ξ ← (1−β)·ξ + β·counts (paper Eq. 5); called once per adaptation step."""
        self.xi = (1.0 - self.beta) * self.xi + self.beta * self.class_counts()

    def samples(self) -> torch.Tensor:
        """All stored samples, class 0 oldest→newest first, then class 1, ... (§4.3)."""
        return torch.stack([s for cls in self.items for s in cls])

    def labels(self) -> torch.Tensor:
        return torch.tensor([c for c, cls in enumerate(self.items) for _ in cls], dtype=torch.long)

    def positions(self) -> torch.Tensor:
        """The stream positions of :meth:`samples`, in the same order."""
        return torch.tensor([p for cls in self.item_positions for p in cls], dtype=torch.long)
