"""SoTTA's high-confidence uniform-class sampling memory (HUS, baselines.md §8).

Per-class lists with a shared capacity. A sample enters only if its confidence (max softmax)
is at least the threshold C₀; samples below it are dropped without touching the memory. When
the memory is full, one item is evicted first: if the newcomer's class is *not* among the
currently largest classes, a random item of a randomly chosen largest class goes (this is what
drives the memory towards uniform classes); otherwise a random item of the newcomer's own
class goes. All random choices come from the generator passed in.

Speed: the decisions (threshold, eviction, the random draws, in the official order)
run one sample after the other on the host, from one copy of the batch's labels and
confidences; the images stay on the device in a fixed buffer of ``capacity`` slots, written
once per :meth:`add` and gathered once per :meth:`samples`, instead of a copy per sample and a
stack per step.
"""

from __future__ import annotations

import torch

from stamplib.blocks.memory import PerClassMemory, tag_list


class HUSMemory(PerClassMemory):
    def __init__(self, num_classes: int, capacity: int = 64, threshold: float = 0.0,
                 generator: torch.Generator | None = None) -> None:
        self.threshold = threshold
        super().__init__(num_classes, capacity, generator)

    def clear(self) -> None:
        """Empty, as new (a reset leaves nothing behind, the data buffer included)."""
        self._data: torch.Tensor | None = None  # [capacity, ...] on the samples' device, from the first add
        self._slots: list[list[int]] = [[] for _ in range(self.num_classes)]  # per class, insertion order
        self._free = list(range(self.capacity))[::-1]
        self._tag: dict[int, int] = {}  # see blocks.memory

    def per_class(self) -> list[list[int]]:
        return self._slots

    def class_counts(self) -> list[int]:
        return [len(c) for c in self._slots]

    def largest_classes(self) -> list[int]:
        counts = self.class_counts()
        top = max(counts)
        return [c for c, k in enumerate(counts) if k == top]

    def add(self, samples: torch.Tensor, labels: torch.Tensor, confidences: torch.Tensor,
            tags: torch.Tensor | None = None) -> int:
        """Offer samples one by one in batch order; returns how many were stored. Labels and
        confidences may be on the device: one copy brings both (float holds the labels exactly)."""
        assert samples.shape[0] == labels.shape[0] == confidences.shape[0]
        if self._data is None:
            self._data = samples.new_zeros((self.capacity, *samples.shape[1:]))  # zeros: states compare equal
        host_labels, host_conf = torch.stack([labels.to(confidences.dtype), confidences]).tolist()
        written: dict[int, int] = {}  # slot → the batch index whose data it holds now
        stored = 0
        for i, (label, conf, tag) in enumerate(zip(host_labels, host_conf, tag_list(tags, samples.shape[0]))):
            if conf < self.threshold:
                continue
            label = int(label)
            if len(self) >= self.capacity:
                self._evict_for(label)
            slot = self._free.pop()
            self._slots[label].append(slot)
            self._tag[slot] = tag
            written[slot] = i
            stored += 1
        if written:
            where = torch.as_tensor([list(written), list(written.values())]).to(samples.device, non_blocking=True)
            self._data[where[0]] = samples[where[1]].detach()
        return stored

    def _evict_for(self, label: int) -> None:
        largest = self.largest_classes()
        victim = label
        if label not in largest:
            victim = largest[self._randint(len(largest))]
        index = self._randint(len(self._slots[victim]))
        slot = self._slots[victim].pop(index)
        del self._tag[slot]
        self._free.append(slot)

    @property
    def items(self) -> list[list[torch.Tensor]]:
        """The stored samples per class, in insertion order (views of the buffer, for diagnostics)."""
        return [[self._data[s] for s in cls] for cls in self._slots]

    def _order(self) -> list[int]:
        return [s for cls in self._slots for s in cls]

    def samples(self) -> torch.Tensor:
        """All stored samples, class 0 first (insertion order within a class), then class 1, …"""
        assert self._data is not None and len(self) > 0, "the memory is empty"
        return self._data[torch.as_tensor(self._order()).to(self._data.device, non_blocking=True)]

    def tags(self) -> torch.Tensor:
        """The tags of :meth:`samples`, in the same order."""
        return torch.tensor([self._tag[s] for s in self._order()], dtype=torch.long)
