"""Per-sample outputs beside each results record, and re-scoring records from them.

A record ``<name>.json`` made by :func:`stamplib.evaluation.runner.run` has a companion
``<name>.outputs.npz`` (compressed NumPy arrays, renamed into place *before* the record, which
carries its SHA-256 in ``outputs_sha256``; the store serves a record only while its outputs file
matches: :mod:`stamplib.evaluation.store`). Per corruption it keeps, in stream order:

* ``prediction`` (int16): the argmax class;
* ``ood_score`` (float32): the method's outlier score, higher = outlier;
* ``label`` (int16): the true class, −1 for an outlier;
* ``index`` (int32): the sample's position in its stream.

About 12 bytes per sample before compression (a quick-profile cell: ~40 KB). A new metric or a
new plot reads these instead of running the method again: :func:`rescore`. Records written
before outputs existed have no ``outputs`` field; they still render (their newer metrics are
NaN) and :func:`rescore` says that they must be recomputed.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from stamplib import paths
from stamplib.evaluation.metrics import check_metrics, score_outputs
from stamplib.evaluation.record import Record

#: The arrays of one stream, with their stored dtypes.
FIELDS = {"prediction": np.int16, "ood_score": np.float32, "label": np.int16, "index": np.int32}
SUFFIX = ".outputs.npz"


@dataclass(frozen=True)
class StreamOutputs:
    """One stream's per-sample outputs, in stream order."""

    prediction: np.ndarray
    ood_score: np.ndarray
    label: np.ndarray
    index: np.ndarray

    def __post_init__(self) -> None:
        n = {name: getattr(self, name).shape for name in FIELDS}
        if len({shape for shape in n.values()}) != 1 or len(next(iter(n.values()))) != 1:
            raise ValueError(f"stream outputs must be four 1-D arrays of one length, got shapes {n}")

    @classmethod
    def from_tensors(cls, probs: torch.Tensor, ood_score: torch.Tensor, labels: torch.Tensor) -> StreamOutputs:
        n = labels.shape[0]
        if probs.shape[1] > np.iinfo(np.int16).max:
            raise ValueError(f"{probs.shape[1]} classes do not fit the int16 predictions of the outputs file")
        return cls(
            prediction=probs.argmax(dim=1).cpu().numpy().astype(FIELDS["prediction"]),
            ood_score=ood_score.detach().cpu().float().numpy().astype(FIELDS["ood_score"]),
            label=labels.cpu().numpy().astype(FIELDS["label"]),
            index=np.arange(n, dtype=FIELDS["index"]),
        )

    def score(self, names: Iterable[str] | None = None) -> dict[str, float]:
        """The metrics ``names`` (default: every registered one) of these outputs."""
        return score_outputs(
            torch.from_numpy(self.prediction.astype(np.int64)),
            torch.from_numpy(self.ood_score.astype(np.float64)),
            torch.from_numpy(self.label.astype(np.int64)),
            names,
        )


def outputs_path(record_path: Path) -> Path:
    """``<name>.json`` → ``<name>.outputs.npz``."""
    return record_path.with_name(record_path.name.removesuffix(".json") + SUFFIX)


def outputs_bytes(streams: Mapping[str, StreamOutputs]) -> bytes:
    """The outputs file of ``streams``: every stream's arrays, keys ``<corruption>.<field>``."""
    arrays = {f"{corruption}.{name}": getattr(out, name) for corruption, out in streams.items() for name in FIELDS}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def save_outputs(path: Path, streams: Mapping[str, StreamOutputs]) -> Path:
    """Write :func:`outputs_bytes` of ``streams`` atomically to ``path``."""
    paths.atomic_write_bytes(path, outputs_bytes(streams))
    return path


def load_outputs(path: Path) -> dict[str, StreamOutputs]:
    """The streams saved by :func:`save_outputs`, by corruption, in the order they were saved."""
    with np.load(path, allow_pickle=False) as archive:
        names = list(archive.files)
        corruptions = list(dict.fromkeys(n.rsplit(".", 1)[0] for n in names))
        return {c: StreamOutputs(**{f: archive[f"{c}.{f}"] for f in FIELDS}) for c in corruptions}


class NoOutputsError(LookupError):
    """A record that predates per-sample outputs, or whose file is not kept in its store."""


def record_outputs(record: Record, directory: Path) -> dict[str, StreamOutputs]:
    """The outputs of ``record`` (stored in ``directory``, the results store's root)."""
    if not record.outputs:
        raise NoOutputsError(
            f"record {record.key} ({record.spec.method}) was made before records kept their "
            "per-sample outputs; recompute it (python -m stamplib run ... --force) to re-score it"
        )
    path = Path(directory) / record.outputs
    if not path.is_file():
        raise NoOutputsError(
            f"record {record.key} names its outputs file {path}, which this store does not keep (its metrics "
            "are served, its per-sample outputs are not); recompute the cell into a store that keeps them "
            "(python -m stamplib run ... --results results) to read them")
    return load_outputs(path)


def rescore(record: Record, directory: Path, metrics: Iterable[str] | None = None) -> Record:
    """``record`` with its per-corruption metrics ``metrics`` (default: every registered one)
    computed from its stored outputs, and its mean recomputed over corruptions. No method runs.
    Raises :class:`NoOutputsError` for a record without outputs."""
    names = check_metrics(metrics) if metrics is not None else None
    streams = record_outputs(record, directory)
    missing = [c for c in record.per_corruption if c not in streams]
    if missing:
        raise NoOutputsError(f"the outputs of record {record.key} lack the corruption(s) {missing}")
    return record.with_rows({c: dataclasses.replace(row, scores={**row.scores, **streams[c].score(names)})
                             for c, row in record.per_corruption.items()})


def rescore_all(records: Iterable[Record], directory: Path, metrics: Iterable[str] | None = None) -> list[Record]:
    """:func:`rescore` for each record that has outputs; older records are returned unchanged
    (their newer metrics stay NaN in the tables)."""
    out = []
    for record in records:
        try:
            out.append(rescore(record, directory, metrics))
        except NoOutputsError:
            out.append(record)
    return out
