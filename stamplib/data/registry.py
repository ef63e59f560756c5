"""The data set registry: one frozen description per ID data set and per outlier set.

A :class:`Dataset` says everything the layers above need to know about an ID data set: its
classes and known classes, the set it is cut from, the methods' hyperparameter set, the
source network, the paper's name for it, and the loaders of its test, source-training and
held-out pools. An :class:`OutlierSet` says how to read an outlier pool and whether it carries
the stream's corruption. Entries are descriptions only: building one reads no file; the
loaders read images from the data root when a stream or a trainer asks for them.

The built-in entries are in :mod:`stamplib.data.catalog`; :func:`register_dataset` and
:func:`register_outlier_set` add more (a test adds a fake data set that way).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

Pool = tuple[torch.Tensor, torch.Tensor]  # uint8 images [N, H, W, 3], int64 labels [N]

#: The outlier-set name that means "the held-out classes of a class-split ID data set".
HELDOUT = "heldout_classes"
#: The outlier-set name of a closed-set stream (no outliers).
CLOSED_SET = "none"

Locate = Callable[[Path], tuple[bool, str]]  # data root → (usable, where it is / how to get it)
#: How a ``locate`` starts its text when the files are there but damaged (package data whose
#: SHA-256 differs from the recorded one): ``doctor`` reports such a data set as damaged, not missing.
DAMAGED = "damaged"
Missing = Callable[[Path, Sequence[str], int], tuple[list[Path], str]]  # → (missing files, the fix)


def built_in(root: Path) -> tuple[bool, str]:
    """``locate`` of a data set that ships with the package."""
    return True, "built-in (no download needed)"


def nothing_missing(root: Path, corruptions: Sequence[str], severity: int) -> tuple[list[Path], str]:
    """``missing`` of a data set whose loader handles its own absent files."""
    return [], ""


@dataclass(frozen=True)
class OutlierSet:
    """An outlier pool.

    ``load(root, limit)``: the clean uint8 pool [N, H, W, 3] in protocol order (protocol.md
    §1.1), at least its first ``limit`` images. ``corrupted``: the pool carries the ID stream's
    corruption (all but Noise, §1). ``released(root, corruption, severity, limit)``: an already
    corrupted copy in the same order, or None to corrupt the clean pool on the fly (with the
    stream seed + 7919, so that outliers do not replay the ID images' random draws).
    """

    name: str
    load: Callable[[Path, int | None], torch.Tensor]
    corrupted: bool = True
    released: Callable[[Path, str, int, int | None], torch.Tensor | None] | None = None
    locate: Locate = built_in


@dataclass(frozen=True)
class Dataset:
    """An ID data set and everything that belongs to it.

    ``test(root)``: the clean test images and labels in protocol order (None when only released
    corrupted copies exist). ``released(root, corruption, severity)``: the released, already
    corrupted test set (CIFAR-10-C, ImageNet-C), read instead of corrupting the clean one.
    ``train(root)``: the clean source-training images and labels (source models, and the
    source statistics of EATA and OWTTT). ``heldout``: the pool behind the outlier set
    ``heldout_classes``. ``locate`` and ``missing`` only look at paths: what ``stamplib
    doctor`` prints, and which files of a partial copy are absent.
    """

    name: str
    classes: int  # classes of the full test set
    hyperparameter_set: str  # of the methods ("" = none: a RunSpec must name one)
    test: Callable[[Path], Pool] | None
    released: Callable[[Path, str, int], Pool] | None = None
    train: Callable[[Path, int | None], Pool] | None = None  # (root, first N or None = all)
    known: int = 0  # classes the source model predicts; 0 = all of them
    heldout: OutlierSet | None = None
    base: str = ""  # the data set a class split is cut from
    architecture: str = ""  # source network (stamplib.models.ARCHITECTURES) ...
    checkpoint: str = ""  # ... and its weights (a checkpoint name or torchvision weights)
    paper_name: str = ""  # the paper's data set whose numbers this one's are compared with
    archive: str = ""  # the download (data/downloads.py) whose checksum identifies the files
    builtin: bool = False  # ships with the package (profiles size its streams differently)
    class_names: tuple[str, ...] = ()  # by label, for figures; () = show the label numbers
    locate: Locate = built_in
    missing: Missing = nothing_missing

    def __post_init__(self) -> None:
        if not self.known:
            object.__setattr__(self, "known", self.classes)
        assert 2 <= self.known <= self.classes, f"{self.name}: known classes must lie in 2..{self.classes}"

    @property
    def num_classes(self) -> int:
        """What the source model predicts: the known classes."""
        return self.known

    def clean_test(self, root: Path) -> Pool:
        if self.test is None:
            raise ValueError(
                f"dataset {self.name!r} has no clean test images (only released corrupted ones); "
                "choose a corruption other than 'none'"
            )
        return self.test(root)


def keep_classes(pool: Pool, known: int, inside: bool) -> Pool:
    """The samples whose label is below ``known`` (``inside``) or not."""
    images, labels = pool
    mask = labels < known if inside else labels >= known
    return images[mask], labels[mask]


def _first(pool: Pool, limit: int | None) -> Pool:
    images, labels = pool
    return images[:limit], labels[:limit]


def class_split(base: Dataset, known: int, name: str, **fields: object) -> Dataset:
    """Classes 0..known−1 of ``base`` stay ID; the rest become the ``heldout_classes`` outlier
    pool, taken from the same (released or on-the-fly) corrupted images (protocol.md §1, 8:2 /
    80:20). ``fields`` set the split's own hyperparameter set, source model and paper name."""
    test, released, train = base.test, base.released, base.train
    heldout = OutlierSet(
        name=HELDOUT,
        load=lambda root, limit=None: keep_classes(base.clean_test(root), known, False)[0],
        corrupted=True,
        released=None if released is None else (
            lambda root, c, s, limit: keep_classes(released(root, c, s), known, False)[0]
        ),
        locate=base.locate,
    )
    return dataclasses.replace(
        base,
        name=name,
        known=known,
        base=base.name,
        test=None if test is None else (lambda root: keep_classes(test(root), known, True)),
        released=None if released is None else (lambda root, c, s: keep_classes(released(root, c, s), known, True)),
        train=None if train is None else (lambda root, limit=None: _first(keep_classes(train(root), known, True),
                                                                          limit)),
        heldout=heldout,
        **fields,
    )


def interleave_classes(labels: torch.Tensor) -> torch.Tensor:
    """A permutation that deals the samples out class by class (first of every class, then the
    second of every class, …), keeping file order within a class.

    An ImageFolder lists one class after another; the protocol takes the *first N* test images
    (protocol.md §1), which in the official, mixed test order cover every class. Taking the first
    N of an ImageFolder would give two or three classes only, so the folder is read in this
    order instead (shared/data README: the official order itself cannot be recovered)."""
    labels = torch.as_tensor(labels)
    n = labels.numel()
    order = torch.argsort(labels, stable=True)
    sorted_labels = labels[order]
    rank = torch.empty_like(order)
    rank[order] = torch.arange(n) - torch.searchsorted(sorted_labels, sorted_labels, side="left")
    return torch.argsort(rank * n + torch.arange(n))


#: Every registered ID data set and outlier set by name, in registration order (doctor's order).
DATASETS: dict[str, Dataset] = {}
OUTLIER_SETS: dict[str, OutlierSet] = {}


def register_dataset(entry: Dataset) -> Dataset:
    """Add an ID data set; its name must be new and must not look like a scheme path."""
    if entry.name in DATASETS or ":" in entry.name:
        raise ValueError(f"cannot register dataset {entry.name!r}: the name is taken or contains ':'")
    DATASETS[entry.name] = entry
    return entry


def register_outlier_set(entry: OutlierSet) -> OutlierSet:
    """Add an outlier set; its name must be new (and not one of the reserved names)."""
    if entry.name in OUTLIER_SETS or entry.name in (HELDOUT, CLOSED_SET) or ":" in entry.name:
        raise ValueError(f"cannot register outlier set {entry.name!r}: the name is taken or reserved")
    OUTLIER_SETS[entry.name] = entry
    return entry
