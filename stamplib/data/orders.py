"""The orders of a stream beyond the paper's uniform shuffle, each a function of a seeded
generator alone (:func:`stamplib.data.streams.stream_order` puts them together):

* Dirichlet label order (δ > 0) — non-i.i.d. labels as in RoTTA and mariodoebler's
  test-time-adaptation suite: the ID samples are split into as many time slots as there are
  classes, each class spread over the slots by proportions drawn from Dirichlet(δ, …, δ), the
  classes within a slot in random order. Small δ (0.01–0.1) gives long runs of one class.
  Outliers keep uniform positions, so the outlier share per batch stays what it was.
* outlier bursts (L > 0) — outliers arrive in runs of L consecutive samples (the last run may be
  shorter), the runs at distinct random positions between ID samples (so never merged).
* label shift (:class:`LabelShift`): ``imbalance=ρ > 1`` — long-tailed known classes, as
  CIFAR-10-LT (Cao et al., NeurIPS 2019): class c (in index order) keeps the first
  n_max·ρ^(−c/(C−1)) of its samples, so the largest class over the smallest is ρ (the outliers
  follow the smaller ID count, so the outlier share stays the spec's); ``sorted`` — a temporally
  correlated order: the ID samples come class by class (ascending class index, each class
  shuffled), the outliers at uniform positions between them, the limit δ → 0 of the Dirichlet
  order with the class order fixed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


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
