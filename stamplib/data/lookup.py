"""Names → registry entries, and the checks that need only names or paths.

Besides the registered names, every role takes a path scheme: ``npz:/path/file.npz`` or
``folder:/path/dir`` (an ImageFolder); a path containing ``{corruption}`` and ``{severity}``
names already corrupted copies. Such a data set has no hyperparameter set and no source model of its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from stamplib import paths, validation
from stamplib.data import catalog  # noqa: F401  (registers the built-in entries)
from stamplib.data.corruptions import CORRUPTIONS
from stamplib.data.registry import (
    CLOSED_SET,
    DATASETS,
    HELDOUT,
    OUTLIER_SETS,
    Dataset,
    Missing,
    OutlierSet,
    Pool,
)

SCHEMES = ("npz", "folder")
_SCHEME_HINT = "npz:/path/file.npz, folder:/path/dir"


def parse_scheme(name: str) -> tuple[str, str] | None:
    """``("npz", "/path")`` for ``npz:/path``; None for a registry name."""
    for scheme in SCHEMES:
        if name.startswith(scheme + ":"):
            return scheme, name[len(scheme) + 1 :]
    return None


def _is_template(path: str) -> bool:
    return "{corruption}" in path and "{severity}" in path


def _read_scheme(scheme: str, path: str, *, require_labels: bool, limit: int | None = None):
    from stamplib.data import loaders

    if scheme == "npz":
        return loaders.load_npz(path, require_labels=require_labels)
    return loaders.load_image_folder(path, limit=limit)


def _scheme_missing(name: str, scheme: str, path: str) -> Missing:
    """The files of a scheme data set that are not there (templates: one per corruption)."""
    template = _is_template(path)

    def missing(root: Path, corruptions, severity: int) -> tuple[list[Path], str]:
        files = (
            [path.format(corruption=c, severity=severity) for c in corruptions if c != "none"] if template else [path]
        )
        absent = [Path(f) for f in files if not (Path(f).is_file() if scheme == "npz" else Path(f).is_dir())]
        return absent, f"check the path given in {name!r}"

    return missing


def _scheme_dataset(name: str, scheme: str, path: str) -> Dataset:
    import numpy as np

    from stamplib.data import loaders

    template = _is_template(path)
    probe = path.format(corruption="gaussian_noise", severity=5) if template else path
    if scheme == "npz":
        if not Path(probe).is_file():
            raise loaders.DatasetNotFound(f"{probe} does not exist (from dataset {name!r})")
        with np.load(loaders.check_npz(probe), allow_pickle=False) as z:  # labels only: cheap, decides C
            if "labels" not in z.files:
                raise loaders.DatasetFormatError(f"{probe}: no 'labels' array; an ID set needs labels")
            classes = int(np.asarray(z["labels"]).max()) + 1
    else:
        classes = len(loaders.list_image_folder(probe)[2])

    def pool(p: str) -> Pool:
        s = _read_scheme(scheme, p, require_labels=True)
        return s.images, s.labels

    return Dataset(
        name,
        classes=classes,
        hyperparameter_set="",
        test=None if template else (lambda root: pool(path)),
        released=(lambda root, c, s: pool(path.format(corruption=c, severity=s))) if template else None,
        missing=_scheme_missing(name, scheme, path),
    )


def _scheme_outlier_set(name: str, scheme: str, path: str) -> OutlierSet:
    template = _is_template(path)

    def load(root: Path, limit: int | None = None):
        if template:
            raise ValueError(f"{path} names corrupted copies only; corruption 'none' needs a clean pool")
        return _read_scheme(scheme, path, require_labels=False, limit=limit).images

    def released(root: Path, corruption: str, severity: int, limit: int | None):
        return _read_scheme(
            scheme, path.format(corruption=corruption, severity=severity), require_labels=False, limit=limit
        ).images

    return OutlierSet(name, load, corrupted=True, released=released if template else None)


def dataset(name: str) -> Dataset:
    """The registry entry of ``name``, or a scheme data set (which reads its labels file)."""
    scheme = parse_scheme(name)
    if scheme is not None:
        return _scheme_dataset(name, *scheme)
    validation.check_choice("dataset", name, DATASETS, also=_SCHEME_HINT)
    return DATASETS[name]


def hyperparameter_set_of(name: str) -> str:
    """The hyperparameter set of data set ``name`` ("" for a scheme data set); reads no file."""
    check_names(name)
    return "" if parse_scheme(name) else DATASETS[name].hyperparameter_set


def num_classes(name: str) -> int:
    """Classes the source model of ``name`` predicts (its known classes)."""
    return dataset(name).known


def class_split_names() -> list[str]:
    """The data sets that carry held-out classes (the outlier set ``heldout_classes``)."""
    return sorted(n for n, d in DATASETS.items() if d.heldout is not None)


def outlier_set(name: str, data: Dataset | None = None) -> OutlierSet:
    """The outlier set ``name``; ``heldout_classes`` is the held-out pool of ``data``."""
    if name == HELDOUT:
        if data is None or data.heldout is None:
            raise ValueError(
                f"{HELDOUT!r} needs a class-split dataset ({', '.join(class_split_names())}), "
                f"not {getattr(data, 'name', None)!r}"
            )
        return data.heldout
    scheme = parse_scheme(name)
    if scheme is not None:
        return _scheme_outlier_set(name, *scheme)
    validation.check_choice("outlier set", name, OUTLIER_SETS, also=f"{HELDOUT}, {_SCHEME_HINT}, {CLOSED_SET}")
    return OUTLIER_SETS[name]


def check_names(dataset: str, outlier_set_name: str | None = None,
                corruptions: tuple[str, ...] | list[str] = ()) -> None:
    """Refuse unknown dataset, outlier-set and corruption names with the list of valid ones.

    Names only: no file is read, so a typo fails at once instead of after loading data."""
    if parse_scheme(dataset) is None:
        validation.check_choice("dataset", dataset, DATASETS, also=_SCHEME_HINT)
    if outlier_set_name is not None and outlier_set_name != CLOSED_SET and parse_scheme(outlier_set_name) is None:
        if outlier_set_name == HELDOUT:
            if dataset not in class_split_names():
                raise ValueError(
                    f"outlier set {HELDOUT!r} needs a class-split dataset ({', '.join(class_split_names())}), "
                    f"not {dataset!r}; pick one of those datasets or another outlier set"
                )
        else:
            validation.check_choice(
                "outlier set", outlier_set_name, OUTLIER_SETS,
                also=f"{HELDOUT}, {_SCHEME_HINT}, or {CLOSED_SET} (closed set)",
            )
    validation.check_choices("corruption", list(corruptions), [*CORRUPTIONS, "none"], also="or none (clean images)")


def check_available(
    dataset_name: str,
    corruptions: tuple[str, ...] | list[str],
    severity: int = 5,
    data_root: str | os.PathLike | None = None,
) -> None:
    """Refuse a *partial* copy of a data set before any work: every requested corruption's file
    must be there. Only paths are checked. A data set folder that is absent as a whole is left
    to its loader, which may unpack a placed archive or download it. ``data_root`` None: no
    data folder, enough only for the data sets that ship with the package or name their paths."""
    from stamplib.data import loaders

    check_names(dataset_name)
    scheme = parse_scheme(dataset_name)
    missing = _scheme_missing(dataset_name, *scheme) if scheme else DATASETS[dataset_name].missing
    if scheme or DATASETS[dataset_name].builtin:
        root = Path(data_root) if data_root else None
    else:
        root = paths.given_data_root(data_root, f"dataset {dataset_name!r}")
    absent, fix = missing(root, tuple(corruptions), severity)
    if absent:
        shown = ", ".join(str(m) for m in absent[:6]) + (f", … ({len(absent)} in all)" if len(absent) > 6 else "")
        raise loaders.DatasetNotFound(f"dataset {dataset_name!r} is incomplete: missing {shown}; {fix}")


def dataset_status(data_root: str | os.PathLike) -> list[tuple[str, bool, str]]:
    """(name, usable, where it was found / how to get it) for every registered ID and outlier
    set under ``data_root`` — what ``stamplib doctor`` prints. Only checks paths; reads no image."""
    root = paths.given_data_root(data_root, "the data sets' listing")
    entries: list[Dataset | OutlierSet] = [*DATASETS.values(), *OUTLIER_SETS.values()]
    return [(e.name, *e.locate(root)) for e in entries]


def source_train(name: str, data_root: str | os.PathLike | None, limit: int | None = None) -> Pool:
    """Clean source images (uint8 NHWC) and labels of an ID data set, the first ``limit`` by
    index (None: all): the training split (known classes only for the class splits; protocol.md
    §4.2 (c)), or for ImageNet-C the ImageNet validation split (baselines.md §5, §9)."""
    entry = dataset(name)
    if entry.train is None:
        raise ValueError(f"no source training data registered for dataset {name!r}")
    return entry.train(Path(data_root) if data_root else None, limit)
