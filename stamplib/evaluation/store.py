"""The results store: one JSON record per RunSpec hash, written atomically, and the state of
the cells being computed.

A record is complete or absent: it is written to a temporary file and renamed, so a run
killed mid-write leaves no partial record (and a stray temporary file is never read).

Beside the records, under ``<results>/.grid/``: ``running/<key>.json`` marks a cell claimed by
a live job (job id, host, pid, start, deadline), ``failed/<key>.json`` keeps the last
failure of a cell that is still missing, and ``partial/<key>/<corruption>.json`` (with its
``.outputs.npz``) keeps each finished corruption of an episodic cell that is still running, so
that a cell interrupted at its 7th corruption resumes there (:meth:`ResultsStore.partial`). :meth:`ResultsStore.status` splits cells into done,
running and missing from these files; grids and notebooks both ask it.

A record whose stored hyperparameters (``config``) differ from what the spec resolves to today
is stale — a default changed since it was computed — and counts as absent, so it is recomputed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from stamplib import paths
from stamplib.evaluation.outputs import SUFFIX as OUTPUTS_SUFFIX
from stamplib.evaluation.outputs import (
    StreamOutputs,
    load_outputs,
    outputs_path,
    rescore_all,
    save_outputs,
)
from stamplib.evaluation.record import Record, Row, Trace
from stamplib.evaluation.spec import RunSpec


def _read(path: Path) -> Record | None:
    """A complete record from ``path``, or None with a warning (it will be recomputed)."""
    try:
        stored = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        warnings.warn(f"ignoring unreadable results record {path} ({exc}); it will be recomputed", stacklevel=3)
        return None
    try:
        return Record.from_json(stored)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # written by something else, or edited
        warnings.warn(f"ignoring incomplete results record {path} ({exc!r}); it will be recomputed", stacklevel=3)
        return None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None  # absent, or being replaced: treat as no marker


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def marker_alive(marker: dict[str, Any], now: float | None = None) -> bool:
    """A marker counts while its job can still be computing the cell: before its deadline (the
    job's time limit), and, on this host, while its process exists. A job on another node is
    trusted until its deadline."""
    now = time.time() if now is None else now
    deadline = marker.get("deadline")
    if deadline is not None and now > float(deadline):
        return False
    if marker.get("host") == socket.gethostname():
        return _pid_alive(int(marker.get("pid", -1)))
    return deadline is not None


class CellStatus(NamedTuple):
    done: list[RunSpec]
    missing: list[RunSpec]  # neither stored nor claimed by a live job (stale markers count here)
    running: list[RunSpec]  # claimed by a job that is running


def current_config(spec: RunSpec) -> str:
    """The method's hyperparameters for ``spec`` as the code resolves them now (the spec's
    config), as the runner records them (``repr`` of the typed config)."""
    return repr(spec.config)


class ResultsStore:
    """The records and grid state under ``root`` (a run context's ``results``)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, spec: RunSpec) -> Path:
        return self.root / f"{spec.method}__{spec.dataset}__{spec.outliers}__{spec.key()}.json"

    def get(self, spec: RunSpec) -> Record | None:
        path = self.path(spec)
        if not path.is_file():
            return None
        record = _read(path)
        if record is None or record.key != spec.key():
            return None
        if record.config is not None and record.config != current_config(spec):
            return None  # computed under other defaults
        return record

    def put(self, record: Record, outputs: Mapping[str, StreamOutputs] | None = None) -> Record:
        """Store ``record`` and return it as stored; with ``outputs`` (per-sample outputs by
        corruption) first write them beside it and name the file in its ``outputs``, so a stored
        record's outputs exist."""
        path = self.path(record.spec)
        if outputs is not None:
            record = dataclasses.replace(record, outputs=save_outputs(outputs_path(path), outputs).name)
        paths.atomic_write_bytes(path, json.dumps(record.to_json(), indent=1, sort_keys=True).encode())
        self.clear_partials(record.spec)
        return record

    def rescored(self, records: Iterable[Record], metrics: Iterable[str] | None = None) -> list[Record]:
        """``records`` (of this store) with ``metrics`` computed from their stored outputs;
        records without outputs unchanged (:func:`stamplib.evaluation.outputs.rescore_all`)."""
        return rescore_all(records, self.root, metrics)

    def records_by_key(self) -> dict[str, Record]:
        """Every complete record (:meth:`records`) by its key."""
        return {record.key: record for record in self.records()}

    def records(self) -> list[Record]:
        """Every complete record. Temporary files of a killed writer (``.tmp-*``, hidden) are
        skipped, and so — with a warning — are unreadable or incomplete ones."""
        out = []
        for p in sorted(self.root.glob("*.json")):
            if p.name.startswith("."):  # pathlib's glob, unlike a shell's, matches dot files
                continue
            record = _read(p)
            if record is not None:
                out.append(record)
        return out

    # -- finished corruptions of unfinished cells --------------------------------------------

    def partial_dir(self, spec: RunSpec) -> Path:
        return self.grid_dir / "partial" / spec.key()

    def put_partial(self, spec: RunSpec, corruption: str, row: Row, outputs: StreamOutputs,
                    trace: Trace | None, checkpoint_sha256: str | None) -> None:
        """Keep one finished corruption of ``spec`` until its record is stored. The outputs are
        written first and the JSON last, so a JSON always has its outputs."""
        folder = self.partial_dir(spec)
        save_outputs(folder / f"{corruption}{OUTPUTS_SUFFIX}", {corruption: outputs})
        entry = {"key": spec.key(), "corruption": corruption, "config": current_config(spec),
                 "checkpoint_sha256": checkpoint_sha256, "row": row.to_json(),
                 "trace": trace.to_json() if trace is not None else None}
        paths.atomic_write_bytes(folder / f"{corruption}.json", json.dumps(entry, sort_keys=True).encode())

    def partial(self, spec: RunSpec, corruption: str, checkpoint_sha256: str | None
                ) -> tuple[Row, StreamOutputs, Trace | None] | None:
        """A finished corruption of ``spec`` kept by :meth:`put_partial`, as (row,
        outputs, trace), or None when absent, unreadable, or made under other hyperparameters
        or another source model (then it is computed again)."""
        folder = self.partial_dir(spec)
        entry = _read_json(folder / f"{corruption}.json")
        if (entry is None or entry.get("key") != spec.key() or entry.get("corruption") != corruption
                or entry.get("config") != current_config(spec) or entry.get("checkpoint_sha256") != checkpoint_sha256):
            return None
        try:
            outputs = load_outputs(folder / f"{corruption}{OUTPUTS_SUFFIX}")[corruption]
        except (OSError, KeyError, ValueError):
            return None
        trace = entry.get("trace")
        return Row.from_json(entry["row"]), outputs, Trace.from_json(trace) if trace else None

    def clear_partials(self, spec: RunSpec) -> None:
        shutil.rmtree(self.partial_dir(spec), ignore_errors=True)

    # -- the state of cells being computed ---------------------------------------------------

    @property
    def grid_dir(self) -> Path:
        return self.root / ".grid"

    def marker_path(self, spec: RunSpec) -> Path:
        return self.grid_dir / "running" / f"{spec.key()}.json"

    def failure_path(self, spec: RunSpec) -> Path:
        return self.grid_dir / "failed" / f"{spec.key()}.json"

    def mark_running(self, spec: RunSpec, marker: dict[str, Any]) -> None:
        paths.atomic_write_bytes(self.marker_path(spec), json.dumps({**marker, "spec": spec.to_dict()}).encode())

    def unmark_running(self, spec: RunSpec) -> None:
        self.marker_path(spec).unlink(missing_ok=True)

    def running_marker(self, spec: RunSpec) -> dict[str, Any] | None:
        """The live marker of ``spec``, or None (absent or stale)."""
        marker = _read_json(self.marker_path(spec))
        return marker if marker is not None and marker_alive(marker) else None

    def record_failure(self, spec: RunSpec, failure: dict[str, Any]) -> None:
        record = {**failure, "time": time.time(), "spec": spec.to_dict()}
        paths.atomic_write_bytes(self.failure_path(spec), json.dumps(record, indent=1).encode())

    def clear_failure(self, spec: RunSpec) -> None:
        self.failure_path(spec).unlink(missing_ok=True)

    def failure(self, spec: RunSpec) -> dict[str, Any] | None:
        return _read_json(self.failure_path(spec))

    def status(self, specs: Iterable[RunSpec]) -> CellStatus:
        """Split ``specs`` into done (a record is stored), running (a live job holds it) and missing."""
        done, missing, running = [], [], []
        for spec in specs:
            if self.path(spec).is_file() and self.get(spec) is not None:
                done.append(spec)
            elif self.running_marker(spec) is not None:
                running.append(spec)
            else:
                missing.append(spec)
        return CellStatus(done, missing, running)
