"""The three memories: STAMP's class-balanced memory (stamp.md §4.3), RoTTA's CSTU memory
(baselines.md §7) and SoTTA's high-confidence uniform-class memory (baselines.md §8)."""

from __future__ import annotations

import math

import pytest
import torch

from stamplib.blocks.cstu import CSTUMemory
from stamplib.blocks.hus import HUSMemory
from stamplib.blocks.memory import ClassBalancedMemory

C = 4


# -- class-balanced memory (STAMP) ----------------------------------------------------------------
def _sample(value: float) -> torch.Tensor:
    return torch.full((1, 2, 2), value)


def _memory_values(mem: ClassBalancedMemory) -> list[list[float]]:
    return [[float(s[0, 0, 0]) for s in cls] for cls in mem.items]


def test_memory_fills_then_evicts_oldest_of_top_class():
    mem = ClassBalancedMemory(num_classes=3, capacity=4, generator=torch.Generator().manual_seed(0))
    mem.add(torch.stack([_sample(v) for v in (1, 2, 3, 4)]), torch.tensor([0, 0, 0, 1]))
    mem.update_frequency()  # ξ = 0.1·(3, 1, 0)
    assert torch.allclose(mem.xi, torch.tensor([0.3, 0.1, 0.0], dtype=torch.float64))
    mem.add(_sample(5).unsqueeze(0), torch.tensor([2]))
    assert _memory_values(mem) == [[2, 3], [4], [5]]  # class 0 had the top ξ: its oldest (1) left


def test_xi_frozen_during_a_batch_can_empty_the_top_class():
    mem = ClassBalancedMemory(num_classes=3, capacity=3, generator=torch.Generator().manual_seed(0))
    mem.add(torch.stack([_sample(v) for v in (1, 2, 3)]), torch.tensor([0, 0, 1]))
    mem.update_frequency()  # ξ = (0.2, 0.1, 0)
    # Three new class-2 samples in one batch: ξ stays (0.2, 0.1, 0) throughout, so class 0 is
    # emptied first (oldest first), then class 1 (the only present class with ξ > 0 left) ...
    mem.add(torch.stack([_sample(v) for v in (7, 8, 9)]), torch.tensor([2, 2, 2]))
    assert _memory_values(mem) == [[], [], [7, 8, 9]]
    assert torch.allclose(mem.xi, torch.tensor([0.2, 0.1, 0.0], dtype=torch.float64))


def test_never_present_class_is_protected_and_ties_use_the_seeded_generator():
    picks = set()
    for seed in range(12):
        mem = ClassBalancedMemory(num_classes=3, capacity=2, generator=torch.Generator().manual_seed(seed))
        mem.add(torch.stack([_sample(1), _sample(2)]), torch.tensor([0, 1]))
        # ξ is all zero: classes 0 and 1 tie (both present), class 2 is not present.
        mem.add(_sample(3).unsqueeze(0), torch.tensor([2]))
        picks.add(tuple(len(c) for c in mem.items))
        again = ClassBalancedMemory(num_classes=3, capacity=2, generator=torch.Generator().manual_seed(seed))
        again.add(torch.stack([_sample(1), _sample(2)]), torch.tensor([0, 1]))
        again.add(_sample(3).unsqueeze(0), torch.tensor([2]))
        assert _memory_values(again) == _memory_values(mem)  # same seed, same choice
    assert picks == {(0, 1, 1), (1, 0, 1)}  # both tied classes get picked across seeds


# -- CSTU (RoTTA) -----------------------------------------------------------------------------------
def tag(v: float) -> torch.Tensor:
    return torch.tensor([v])


class OneByOne(CSTUMemory):
    """The memory with the one-sample ``add`` of the rule's statement, for the tests below."""

    def add(self, data, label, uncertainty, tag=-1):  # noqa: ANN001, ANN201
        if isinstance(label, int):
            return super().add(data[None], [label], [uncertainty], [tag])[0]
        return super().add(data, label, uncertainty, tag)


def contents(mem: CSTUMemory) -> list[list[float]]:
    items = mem.items()
    return [[float(item.data) for item in items if item.label == k] for k in range(mem.num_classes)]


def test_cstu_score_formula() -> None:
    mem = OneByOne(num_classes=4, capacity=8)
    assert mem.score(0, 0.3) == pytest.approx(0.5 + 0.3 / math.log(4))
    assert mem.score(8, 0.0) == pytest.approx(1 / (1 + math.exp(-1)))


def test_cstu_fills_then_replaces_within_full_class_by_score_and_age() -> None:
    mem = OneByOne(num_classes=2, capacity=4)  # quota 2 per class
    assert mem.add(tag(1), 0, 0.1) and mem.add(tag(2), 0, 0.2)
    assert [i.age for i in mem.items()] == [2, 1], "every stored item ages after each attempt"
    # Class 0 is at its quota: the new item competes within class 0 only. Scores (N = 4):
    # item 1: σ(2/4) + 0.1/ln2 ≈ 0.767; item 2: σ(1/4) + 0.2/ln2 ≈ 0.851; new: 0.5 + 0.05/ln2.
    assert mem.add(tag(3), 0, 0.05)
    assert contents(mem) == [[1.0, 3.0], []]
    # A very uncertain newcomer scores higher than everything stored: it is discarded, ages grow.
    ages = [i.age for i in mem.items()]
    assert not mem.add(tag(4), 0, 0.69)
    assert contents(mem) == [[1.0, 3.0], []]
    assert [i.age for i in mem.items()] == [a + 1 for a in ages]


def test_cstu_age_decides_between_equal_uncertainties() -> None:
    mem = OneByOne(num_classes=2, capacity=4)
    mem.add(tag(1), 0, 0.3)  # older
    mem.add(tag(2), 0, 0.3)
    mem.add(tag(3), 0, 0.0)
    assert contents(mem) == [[2.0, 3.0], []], "the older of two equally uncertain items goes"
    # Ages keep accumulating: the oldest remaining item is now the victim.
    mem.add(tag(4), 0, 0.0)
    assert contents(mem) == [[3.0, 4.0], []]


def test_cstu_full_memory_evicts_from_the_largest_classes() -> None:
    mem = OneByOne(num_classes=3, capacity=4)  # quota 4/3
    mem.add(tag(1), 0, 0.9)
    mem.add(tag(2), 0, 0.1)  # class 0 holds 2 > quota: allowed while the memory is not full
    mem.add(tag(3), 1, 1.0)
    mem.add(tag(4), 2, 0.0)
    assert len(mem) == 4 and mem.occupancy() == [2, 1, 1]
    # Class 1 is under quota but the memory is full: the victim comes from class 0 (largest),
    # even though the most uncertain item overall is in class 1.
    assert mem.add(tag(5), 1, 0.0)
    assert contents(mem) == [[2.0], [3.0, 5.0], [4.0]]
    # A newcomer scoring above every item of the largest classes is discarded.
    assert not mem.add(tag(6), 2, 1.3)
    assert contents(mem) == [[2.0], [3.0, 5.0], [4.0]]


def test_cstu_ties_go_to_the_later_item() -> None:
    mem = OneByOne(num_classes=3, capacity=4, lambda_t=0.0)  # score = u / ln C: ties possible
    for v, k in ((1, 0), (2, 0), (3, 1), (4, 1)):
        mem.add(tag(v), k, 0.5)
    assert mem.occupancy() == [2, 2, 0]
    mem.add(tag(5), 2, 0.1)  # majority classes 0 and 1 tie on every score: the last item goes
    assert contents(mem) == [[1.0, 2.0], [3.0], [5.0]]


def test_cstu_get_memory_order_and_ages() -> None:
    mem = OneByOne(num_classes=2, capacity=4)
    mem.add(tag(1), 1, 0.1)
    mem.add(tag(2), 0, 0.1)
    mem.add(tag(3), 1, 0.1)
    data, ages = mem.get_memory()
    assert data.flatten().tolist() == [2.0, 1.0, 3.0], "class order, then insertion order"
    assert ages.tolist() == [2 / 4, 3 / 4, 1 / 4]
    mem.clear()
    assert len(mem) == 0


# -- HUS (SoTTA) ------------------------------------------------------------------------------------
def tagged(values: list[float]) -> torch.Tensor:
    """One 1-element 'sample' per value, so a stored item tells which sample it was."""
    return torch.tensor(values).view(-1, 1)


def test_confidence_threshold_is_inclusive_and_drops_the_rest():
    mem = HUSMemory(C, capacity=10, threshold=0.9)
    stored = mem.add(
        tagged([0, 1, 2, 3]),
        torch.tensor([0, 1, 2, 3]),
        torch.tensor([0.95, 0.5, 0.9, 0.8999], dtype=torch.float64),
    )
    assert stored == 2
    assert mem.class_counts() == [1, 0, 1, 0]
    assert mem.samples().view(-1).tolist() == [0.0, 2.0]


def test_eviction_targets_a_largest_class_unless_the_newcomer_is_in_one():
    mem = HUSMemory(C, capacity=4, threshold=0.0, generator=torch.Generator().manual_seed(0))
    conf = torch.ones(4)
    mem.add(tagged([0, 1, 2, 3]), torch.tensor([0, 0, 0, 1]), conf)
    assert mem.class_counts() == [3, 1, 0, 0] and len(mem) == 4
    mem.add(tagged([4]), torch.tensor([2]), conf[:1])  # class 2 not largest → a class-0 item goes
    assert mem.class_counts() == [2, 1, 1, 0]
    mem.add(tagged([5]), torch.tensor([0]), conf[:1])  # class 0 is the largest → its own item goes
    assert mem.class_counts() == [2, 1, 1, 0]
    assert mem.samples()[mem.labels() == 0][-1].tolist() == [5.0]  # appended at the end of its class
    mem.add(tagged([6]), torch.tensor([1]), conf[:1])  # class 1 not largest → class 0 loses one
    assert mem.class_counts() == [1, 2, 1, 0]
    # Now class 1 holds the maximum alone; a class-3 newcomer evicts from class 1.
    mem.add(tagged([7]), torch.tensor([3]), conf[:1])
    assert mem.class_counts() == [1, 1, 1, 1]
    assert len(mem) == 4


def test_eviction_among_tied_largest_classes_and_within_a_class_is_random():
    victims_class, victims_item = set(), set()
    for seed in range(30):
        mem = HUSMemory(3, capacity=4, threshold=0.0, generator=torch.Generator().manual_seed(seed))
        mem.add(tagged([0, 1, 2, 3]), torch.tensor([0, 0, 1, 1]), torch.ones(4))
        mem.add(tagged([9]), torch.tensor([2]), torch.ones(1))
        counts = mem.class_counts()
        assert counts[2] == 1 and sorted(counts[:2]) == [1, 2]
        victims_class.add(counts.index(1))
        left = {float(s) for s, label in zip(mem.samples(), mem.labels()) if label < 2}
        victims_item.update({0.0, 1.0, 2.0, 3.0} - left)
    assert victims_class == {0, 1}  # either tied class can lose an item
    assert victims_item == {0.0, 1.0, 2.0, 3.0}  # any item of it, not only the oldest


def test_memory_order_is_class_major():
    mem = HUSMemory(C, capacity=8, threshold=0.0)
    mem.add(tagged([0, 1, 2, 3]), torch.tensor([2, 0, 2, 1]), torch.ones(4))
    assert mem.samples().view(-1).tolist() == [1.0, 3.0, 0.0, 2.0]
    assert mem.labels().tolist() == [0, 1, 2, 2]



# -- the vectorised memories against the per-sample loops they replaced (issue 51) ------------------
class ReferenceCSTU:
    """RoTTA's memory as it was before issue 51: a list of items per class, one insertion per call,
    scores by ``math`` (the official code's structure). The reference of :class:`CSTUMemory`."""

    def __init__(self, num_classes: int, capacity: int = 64, lambda_t: float = 1.0, lambda_u: float = 1.0) -> None:
        self.num_classes, self.capacity, self.per_class = num_classes, capacity, capacity / num_classes
        self.lambda_t, self.lambda_u = lambda_t, lambda_u
        self.data: list[list[list]] = [[] for _ in range(num_classes)]  # [data, label, u, age, tag]

    def __len__(self) -> int:
        return sum(len(items) for items in self.data)

    def items(self) -> list[list]:
        return [item for items in self.data for item in items]

    def score(self, age: int, uncertainty: float) -> float:
        timeliness = 1.0 / (1.0 + math.exp(-age / self.capacity))
        return self.lambda_t * timeliness + self.lambda_u * uncertainty / math.log(self.num_classes)

    def get_memory(self) -> tuple[torch.Tensor, torch.Tensor]:
        items = self.items()
        data = torch.stack([item[0] for item in items])
        return data, torch.tensor([item[3] / self.capacity for item in items], dtype=torch.float32)

    def clear(self) -> None:
        self.data = [[] for _ in range(self.num_classes)]

    def add(self, data: torch.Tensor, label: int, uncertainty: float, tag: int = -1) -> bool:
        stored = self._make_room(label, self.score(0, uncertainty))
        if stored:
            self.data[label].append([data, label, float(uncertainty), 0, tag])
        for items in self.data:
            for item in items:
                item[3] += 1
        return stored

    def _make_room(self, label: int, new_score: float) -> bool:
        if len(self.data[label]) < self.per_class:
            if len(self) < self.capacity:
                return True
            occupancy = [len(items) for items in self.data]
            return self._evict([k for k, n in enumerate(occupancy) if n == max(occupancy)], new_score)
        return self._evict([label], new_score)

    def _evict(self, classes: list[int], new_score: float) -> bool:
        best, best_score = None, -math.inf
        for k in classes:
            for idx, item in enumerate(self.data[k]):
                s = self.score(item[3], item[2])
                if best is None or s >= best_score:
                    best, best_score = (k, idx), s
        if best is None:
            return True
        if best_score > new_score:
            self.data[best[0]].pop(best[1])
            return True
        return False


def _cstu_state(mem: CSTUMemory | ReferenceCSTU) -> tuple:
    if isinstance(mem, ReferenceCSTU):
        items = mem.items()
        return ([it[1] for it in items], [it[2] for it in items], [it[3] for it in items], [it[4] for it in items])
    items = mem.items()
    return ([it.label for it in items], [it.uncertainty for it in items], [it.age for it in items],
            [it.tag for it in items])


@pytest.mark.parametrize("lambda_t,classes,capacity", [(1.0, 10, 64), (0.0, 3, 8), (1.0, 4, 3), (0.5, 100, 64)])
def test_cstu_equals_the_per_sample_loop(lambda_t: float, classes: int, capacity: int) -> None:
    """Seeded batches of images, labels and uncertainties (with repeated values, so ties occur):
    the same decisions, contents, ages, tags and ``get_memory`` as the loop, batch by batch."""
    g = torch.Generator().manual_seed(classes)
    ours, loop = CSTUMemory(classes, capacity, lambda_t), ReferenceCSTU(classes, capacity, lambda_t)
    tag = 0
    for b in range(12):
        n = int(torch.randint(1, 40, (1,), generator=g))
        x = torch.rand(n, 3, 4, 4, generator=g)
        labels = torch.randint(0, min(classes, 6 + b), (n,), generator=g).tolist()
        # float32 values, as RoTTA's entropies are; a coarse grid makes equal scores frequent
        u = (torch.randint(0, 5, (n,), generator=g).float() * 0.25 * math.log(classes)).tolist()
        tags = list(range(tag, tag + n))
        tag += n
        stored = ours.add(x, labels, u, tags)
        assert stored == [loop.add(x[i].clone(), labels[i], u[i], tags[i]) for i in range(n)]
        assert _cstu_state(ours) == _cstu_state(loop)
        assert ours.occupancy() == [len(items) for items in loop.data]
        data, ages = ours.get_memory()
        ref_data, ref_ages = loop.get_memory()
        assert torch.equal(data, ref_data) and torch.equal(ages, ref_ages)
        assert ours.labels().tolist() == _cstu_state(loop)[0] and ours.tags().tolist() == _cstu_state(loop)[3]
    assert any(not s for s in stored) or lambda_t == 0.5  # discards took place


class ReferenceHUS:
    """SoTTA's memory as it was before issue 51: a copy per stored sample, lists per class."""

    def __init__(self, num_classes: int, capacity: int, threshold: float, generator: torch.Generator) -> None:
        self.capacity, self.threshold, self.generator = capacity, threshold, generator
        self.items: list[list[torch.Tensor]] = [[] for _ in range(num_classes)]
        self.item_tags: list[list[int]] = [[] for _ in range(num_classes)]

    def __len__(self) -> int:
        return sum(len(c) for c in self.items)

    def _randint(self, high: int) -> int:
        return int(torch.randint(high, (1,), generator=self.generator))

    def add(self, samples: torch.Tensor, labels: torch.Tensor, confidences: torch.Tensor, tags: torch.Tensor) -> int:
        stored = 0
        for sample, label, conf, tag in zip(samples, labels.tolist(), confidences.tolist(), tags.tolist()):
            if conf < self.threshold:
                continue
            if len(self) >= self.capacity:
                counts = [len(c) for c in self.items]
                largest = [c for c, k in enumerate(counts) if k == max(counts)]
                victim = label if label in largest else largest[self._randint(len(largest))]
                index = self._randint(len(self.items[victim]))
                self.items[victim].pop(index)
                self.item_tags[victim].pop(index)
            self.items[label].append(sample.detach().clone())
            self.item_tags[label].append(tag)
            stored += 1
        return stored

    def clear(self) -> None:
        self.items = [[] for _ in self.items]
        self.item_tags = [[] for _ in self.item_tags]

    def samples(self) -> torch.Tensor:
        return torch.stack([s for cls in self.items for s in cls])

    def labels(self) -> torch.Tensor:
        return torch.tensor([c for c, cls in enumerate(self.items) for _ in cls], dtype=torch.long)

    def tags(self) -> torch.Tensor:
        return torch.tensor([t for cls in self.item_tags for t in cls], dtype=torch.long)


@pytest.mark.parametrize("classes,capacity,threshold", [(10, 64, 0.9), (3, 5, 0.5), (100, 64, 0.0)])
def test_hus_equals_the_per_sample_loop(classes: int, capacity: int, threshold: float) -> None:
    """Seeded batches: the same stored counts, contents in class-major order, labels, tags and
    generator state (the same random draws) as the loop, batch by batch."""
    g = torch.Generator().manual_seed(capacity)
    ours = HUSMemory(classes, capacity, threshold, generator=torch.Generator().manual_seed(7))
    loop = ReferenceHUS(classes, capacity, threshold, generator=torch.Generator().manual_seed(7))
    evictions = 0
    for b in range(12):
        n = int(torch.randint(1, 40, (1,), generator=g))
        x = torch.rand(n, 3, 4, 4, generator=g)
        labels = torch.randint(0, min(classes, 4 + b), (n,), generator=g)
        conf = torch.rand(n, generator=g) * 0.2 + 0.8  # float32, a part of them under the threshold
        conf[:3] = threshold  # the threshold itself enters (≥)
        tags = torch.arange(100 * b, 100 * b + n)
        before = len(loop)
        assert ours.add(x, labels, conf, tags) == (stored := loop.add(x, labels, conf, tags))
        evictions += max(0, before + stored - capacity)
        assert torch.equal(ours.samples(), torch.stack([s for cls in loop.items for s in cls]))
        assert ours.labels().tolist() == [c for c, cls in enumerate(loop.items) for _ in cls]
        assert ours.tags().tolist() == [t for cls in loop.item_tags for t in cls]
        assert torch.equal(ours.generator.get_state(), loop.generator.get_state())
    assert evictions > 0
