"""The results store: one JSON record per RunSpec hash, written atomically, and the state of
the cells being computed.

Writing. A cell's outputs file and its record are first written whole to temporary names
(hidden ``.tmp-*`` files that no reader opens), then renamed into place, the outputs file first
and the record last: an interrupted or failed write (a full disk) leaves neither an orphan
outputs file nor half a record. A full disk is one line (:class:`OutOfSpace`), never a
traceback, and :meth:`ResultsStore.check_space` refuses a cell that would not fit before it is
computed.

Serving. A record is served only when it is whole and consistent (:func:`record_problem`):

* every metric of every row is a number: finite, or NaN where it is undefined (a metric of the
  outliers in a stream without outliers, :data:`UNDEFINED_WITHOUT_OUTLIERS`);
* its mean follows from its rows (each metric's mean over corruptions, the collapsed ones named);
* its outputs file is a plain name in the store, exists, and matches ``outputs_sha256``. A record
  written before records carried that digest is checked to be a complete archive instead (and
  ``tools/add_outputs_digests.py`` adds the digest to such records without changing anything
  else in them).

A record that fails is stale: it is moved aside to ``<results>/.grid/stale/`` with a one-line
warning naming the reason, and counts as missing, so it is recomputed. It is never served and
never crashes a command.

Committed evidence. A store with a manifest (:mod:`~stamplib.evaluation.manifest`,
``MANIFEST.sha256``: ``results/builtin_benchmark``, ``results/reference``) is *sealed*: its
records are what was computed, digest by digest. There nothing is moved aside or recomputed in
silence: a record file that differs from its manifest entry (edited, forged, truncated), one the
manifest does not list, a listed one that is absent (:meth:`ResultsStore.records`), or a listed
one that fails the checks above is refused with one line (:class:`~stamplib.evaluation.manifest.EvidenceError`,
a ValueError: exit 2 on the command line) naming the file, before any page is written.
:meth:`ResultsStore.put` gives the record it writes its manifest entry in the same step.

Stores that do not keep outputs files. A store may declare, with a file
:data:`OUTPUTS_NOT_KEPT` in its root (whose text says why), that the outputs files its records
name are not kept — ``results/builtin_benchmark`` commits its records only, to stay small. There
a record whose outputs file is absent is served for its metrics (tables, figures, the ledger,
skipping a computed cell), and whatever needs its per-sample outputs (re-scoring, the lessons'
per-batch views) says to recompute it into a store that keeps them
(:class:`~stamplib.evaluation.outputs.NoOutputsError`). An outputs file that *is* there is
checked as anywhere else: a mismatching one makes its record stale.

Beside the records, under ``<results>/.grid/``: ``running/<key>.json`` marks a cell claimed by
a live job (job id, host, pid, start, deadline; claimed atomically: :meth:`ResultsStore.claim`),
``failed/<key>.json`` keeps the last failure of a cell that is still missing, and
``partial/<key>/<corruption>.json`` (with its ``.outputs.npz``) keeps each finished corruption
of an episodic cell that is still running, so that a cell interrupted at its 7th corruption
resumes there (:meth:`ResultsStore.partial`), on this machine or, where the partial folder is
committed (``results/reference``), on a fresh clone: an entry is used only under the cell's key, its
current hyperparameters and the same checkpoint's SHA-256. :meth:`ResultsStore.status` splits cells into
done, running and missing from these files; grids and notebooks both ask it.

A record whose stored hyperparameters (``config``) differ from what the spec resolves to today
is stale too — a default changed since it was computed — and counts as absent, so it is
recomputed (it stays in place: the recomputed record replaces it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import math
import os
import shutil
import socket
import tempfile
import threading
import time
import warnings
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from stamplib import paths
from stamplib.data import downloads
from stamplib.data.registry import CLOSED_SET
from stamplib.evaluation import manifest
from stamplib.evaluation.outputs import SUFFIX as OUTPUTS_SUFFIX
from stamplib.evaluation.outputs import (
    StreamOutputs,
    load_outputs,
    outputs_bytes,
    outputs_path,
    rescore_all,
    save_outputs,
)
from stamplib.evaluation.profiles import get_profile
from stamplib.evaluation.record import Record, Row, Trace
from stamplib.evaluation.spec import RunSpec

#: A file in a store's root declaring that the outputs files its records name are not kept.
OUTPUTS_NOT_KEPT = "OUTPUTS_NOT_KEPT.txt"
#: The metrics that are NaN, not a number, in a stream without outliers (everything but ACC).
UNDEFINED_WITHOUT_OUTLIERS = ("auroc", "h", "fpr95", "aupr_in", "aupr_out", "oscr")
#: Bytes a cell writes per sample, at most: its outputs twice (an episodic cell keeps each
#: corruption until its record is stored), the per-batch traces and the JSON, with room to spare.
BYTES_PER_SAMPLE = 64
#: What every write needs beyond its samples' share (the record, markers, temporary names).
BYTES_PER_CELL = 1 << 20
#: Known-class samples per corruption assumed where a profile takes a whole data set.
WHOLE_DATA_SET = 50_000


class OutOfSpace(ValueError):
    """The disk (or quota) of a results store cannot hold what a cell writes: one line."""


@contextlib.contextmanager
def _writing(what: Path) -> Iterator[None]:
    """Turn a full disk while writing ``what`` into one line (:class:`OutOfSpace`)."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise OutOfSpace(f"no space left on the disk of {what.parent} while writing {what.name} ({_free(what)} free); "
                         "free some space or pass another --results folder, then run the same command again") from None


def disk_full(exc: BaseException) -> OutOfSpace | None:
    """``exc`` as one line (:class:`OutOfSpace`) if a full disk or quota caused it, anywhere in its
    chain: the store's own OutOfSpace, or an ``OSError`` of ENOSPC/EDQUOT raised by whatever else
    wrote (a checkpoint's copy, a log, an executed notebook); else None."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OutOfSpace):
            return cause
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            where = f" while writing {cause.filename}" if cause.filename else ""
            return OutOfSpace(f"no space left on the disk{where} ({cause.strerror}); free some space or pass "
                              "another --results folder, then run the same command again")
        cause = cause.__cause__ or cause.__context__
    return None


def _free(path: Path) -> str:
    folder = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    return f"{shutil.disk_usage(folder).free / 2**20:.1f} MiB"


_UMASK: list[int] = []


def _file_mode() -> int:
    """The mode a file created here gets under the process's umask (0o644 under the usual 022),
    read once: :func:`tempfile.mkstemp` makes its files 0600 whatever the umask, and a record,
    once renamed into place, is a file like any other that the user's group may read."""
    if not _UMASK:
        try:  # Linux says it without changing it
            line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("Umask:"))
            _UMASK.append(int(line.split()[1], 8))
        except (OSError, StopIteration, ValueError, IndexError):
            current = os.umask(0o022)
            os.umask(current)
            _UMASK.append(current)
    return 0o666 & ~_UMASK[0]


def _temporary(path: Path, payload: bytes) -> Path:
    """``payload`` written whole and synced to a hidden temporary sibling of ``path``, with the
    mode the umask gives a new file (:func:`_file_mode`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}-")
    tmp = Path(name)
    try:
        os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def read_record(path: Path) -> Record | str:
    """The record stored at ``path``, or why it is not one."""
    try:
        stored = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return f"unreadable ({exc})"
    try:
        return Record.from_json(stored)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # written by something else, or edited
        return f"incomplete ({exc!r})"


#: Outputs files already checked, by (path, size, modification time): their digests.
_DIGESTS: dict[tuple[str, int, int], str | None] = {}
_DIGESTS_LOCK = threading.Lock()


def _outputs_digest(path: Path) -> str | None:
    """The digest of the outputs file ``path``, None if it is no complete archive; remembered
    while the file is unchanged, so a store read many times hashes each file once."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _DIGESTS_LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
    try:
        with zipfile.ZipFile(path) as archive:
            complete = archive.testzip() is None
    except (zipfile.BadZipFile, OSError, EOFError):
        complete = False
    digest = downloads.file_digest(path, "sha256") if complete else None
    with _DIGESTS_LOCK:
        _DIGESTS[key] = digest
    return digest


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _row_problem(name: str, row: Row, without_outliers: bool) -> str | None:
    for metric, value in row.scores.items():
        if not _is_number(value):
            return f"{name}'s {metric} is {value!r}, not a number"
        if math.isinf(value) or (math.isnan(value) and not (without_outliers and metric in UNDEFINED_WITHOUT_OUTLIERS)):
            return f"{name}'s {metric} is {value}"
    for level in row.severities or ():
        problem = _row_problem(f"{name} at severity {level.severity}", Row(level.scores), without_outliers)
        if problem:
            return problem
    return None


def _close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def record_problem(record: Record, root: Path, outputs_kept: bool = True) -> str | None:
    """Why ``record`` (stored in the store at ``root``) must not be served, or None (the module
    docstring gives the rules; ``outputs_kept`` False: the store declares :data:`OUTPUTS_NOT_KEPT`)."""
    rows = record.per_corruption
    for corruption, row in rows.items():
        without = row.n_outliers == 0 if row.n_outliers is not None else record.spec.outlier_set == CLOSED_SET
        problem = _row_problem(corruption, row, without)
        if problem:
            return problem
    for metric, value in record.mean.scores.items():
        if not _is_number(value):
            return f"the mean {metric} is {value!r}, not a number"
    if rows:
        for metric, value in record.mean.scores.items():
            if not all(metric in row.scores for row in rows.values()):
                return f"the mean has {metric}, which not every corruption has"
            follows = sum(row.scores[metric] for row in rows.values()) / len(rows)
            if not _close(follows, value):
                return f"the mean {metric} is {value:.4g}, but its corruptions average {follows:.4g}"
        if record.mean.collapsed is not None and any(row.collapsed is not None for row in rows.values()):
            collapsed = [c for c, row in rows.items() if row.collapsed]
            if list(record.mean.collapsed) != collapsed:
                return f"the mean names {list(record.mean.collapsed)} collapsed, its corruptions {collapsed}"
    return _outputs_problem(record, root, outputs_kept)


def _outputs_problem(record: Record, root: Path, outputs_kept: bool) -> str | None:
    if not record.outputs:
        return None  # a record from before outputs were kept, or one made by hand: metrics only
    if Path(record.outputs).name != record.outputs:
        return f"its outputs file {record.outputs!r} is not a file of the store"
    path = root / record.outputs
    if not path.is_file():
        return None if not outputs_kept else f"its outputs file {record.outputs} is missing"
    digest = _outputs_digest(path)
    if digest is None:
        return f"its outputs file {record.outputs} is truncated or damaged"
    if record.outputs_sha256 is not None and digest != record.outputs_sha256:
        return f"its outputs file {record.outputs} does not match the record's digest (replaced or changed)"
    return None


def add_outputs_digest(path: Path) -> str:
    """Give the record at ``path`` the ``outputs_sha256`` of its outputs file, changing nothing
    else in it (its other lines stay byte for byte). Returns what happened: ``added``, ``has
    one``, ``no outputs file`` (none named, or not kept here), ``damaged outputs file``, ``not
    in the store's format`` or ``in a sealed store`` (then it is left as it is: its manifest
    entry would no longer match)."""
    if manifest.is_sealed(path.parent):
        return "in a sealed store"
    text = path.read_text()
    stored = json.loads(text)
    if "outputs_sha256" in stored:
        return "has one"
    name = stored.get("outputs")
    if not name or Path(name).name != name or not (path.parent / name).is_file():
        return "no outputs file"
    if json.dumps(stored, indent=1, sort_keys=True) != text:
        return "not in the store's format"
    digest = _outputs_digest(path.parent / name)
    if digest is None:
        return "damaged outputs file"
    stored["outputs_sha256"] = digest
    paths.atomic_write_bytes(path, json.dumps(stored, indent=1, sort_keys=True).encode())
    return "added"


def file_problem(root: Path, path: Path) -> str | None:
    """Why the file ``path`` is not a record the store at ``root`` may serve under its name:
    unreadable, inconsistent (:func:`record_problem`), or named for another cell; None if it is."""
    record = checked_record(root, path)
    return record if isinstance(record, str) else None


def checked_record(root: Path, path: Path) -> Record | str:
    """The record at ``path`` if the store at ``root`` may serve it under its name, else why not
    (:func:`file_problem`), from one read of the file."""
    record = read_record(path)
    if isinstance(record, str):
        return record
    named = f"{record.spec.method}__{record.spec.dataset}__{record.spec.outlier_set}__{record.key}.json"
    if path.name != named or record.spec.key() != record.key:
        return f"it holds the record of cell {record.spec.key()} ({named}), not of its file name"
    why = record_problem(record, root, not (root / OUTPUTS_NOT_KEPT).is_file())
    return record if why is None else why


def _shown(path: Path) -> str:
    """``path`` as a user types it here: relative to the working folder when under it."""
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    return str(path)


def expected_bytes(spec: RunSpec) -> int:
    """At most how many bytes computing ``spec`` writes to its store (:data:`BYTES_PER_SAMPLE`)."""
    profile = get_profile(spec.profile)
    limits = [n for n in (profile.max_id, profile.max_id_real) if n is not None]
    known = max(limits) if limits and len(limits) == 2 else WHOLE_DATA_SET
    samples = known / max(1e-6, 1.0 - spec.outlier_ratio)
    return BYTES_PER_CELL + int(BYTES_PER_SAMPLE * samples * max(1, len(spec.corruptions)))


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # ValueError: not JSON, or not text (UnicodeDecodeError)
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

    @property
    def outputs_kept(self) -> bool:
        """Whether this store keeps the outputs files its records name (module docstring)."""
        return not (self.root / OUTPUTS_NOT_KEPT).is_file()

    @property
    def sealed(self) -> bool:
        """Whether this store is committed evidence: it has a manifest, or git's last commit holds
        its files (then a missing manifest is refused, never taken for a store of one's own;
        module docstring)."""
        return manifest.is_sealed(self.root) or bool(manifest.committed_names(self.root))

    def verify(self) -> None:
        """Refuse (:class:`~stamplib.evaluation.manifest.EvidenceError`) a sealed store that
        differs from its manifest or holds a record that may not be served; nothing for a store
        of one's own. Commands that build pages from committed records call it first."""
        if self.sealed:
            self.records()

    def check_guarded(self, names: Iterable[str] | None = None) -> None:
        """Refuse the first guarded file (of ``names``, as the manifest names them, or of the whole
        store with every listed one: :func:`~stamplib.evaluation.manifest.guarded_names`) that
        differs from the manifest; nothing for a store of one's own."""
        if self.sealed:
            self._check_manifest(names)

    def _check_manifest(self, names: Iterable[str] | None = None) -> None:
        """Refuse the first guarded file (of ``names``, or of the whole store with every listed
        one) that differs from the manifest; a manifest that is missing, or damaged, is refused
        first, by its own name."""
        listing = manifest.path_of(self.root)
        if not listing.is_file():
            raise self._manifest_refusal("is missing")
        entries = manifest.read(self.root)  # a manifest that does not parse is named by its reader
        if names is None:
            names, expected = manifest.guarded_names(self.root), entries
        else:
            names = list(names)
            expected = {name: entries[name] for name in names if name in entries}
        present = {name: manifest.file_digest(self.root / name) for name in names}
        found = manifest.differences(expected, present)
        if found:
            raise self._refusal(found)

    def _manifest_refusal(self, state: str, detail: str = "") -> manifest.EvidenceError:
        """The one line that names the manifest as what is wrong (``state``: is missing, is
        damaged, differs from the committed one): the records are never blamed for it."""
        listing = _shown(manifest.path_of(self.root))
        committed = manifest.NAME in manifest.committed_names(self.root)
        fix = (f"restore it (git checkout -- {listing})" if committed
               else f"seal the store (python tools/seal_evidence.py {_shown(self.root)})")
        where = "; its files are committed to git, so it is committed evidence" if state == "is missing" else ""
        return manifest.EvidenceError(f"committed evidence refused: the manifest {listing} {state}{detail}{where}: "
                                      f"{fix}; the records themselves are not what is wrong")

    def _blames_manifest(self, difference: manifest.Difference) -> bool:
        """Whether git shows that ``difference`` comes from the manifest, not the file it names:
        the manifest differs from its committed copy while the file is as committed (for an
        absent one: it was never committed)."""
        changed = manifest.changed_names(self.root)
        if manifest.NAME not in changed:
            return False
        committed = manifest.committed_names(self.root)
        if difference.kind == "absent":
            return difference.name not in committed
        return difference.name in committed and difference.name not in changed

    def _refusal(self, found: Sequence[manifest.Difference]) -> manifest.EvidenceError:
        difference, more = found[0], len(found) - 1
        if self._blames_manifest(difference):
            how = {"absent": "lists a file that was never committed", "unlisted": "no longer lists",
                   "changed": "gives another SHA-256 for"}[difference.kind]
            count = f" (and {more} more entr{'ies' if more > 1 else 'y'})" if more else ""
            return self._manifest_refusal("differs from the committed one", f": it {how} {difference.name}{count}")
        path, listing = self.root / difference.name, f"the store's {manifest.NAME}"
        file = _shown(path)
        if difference.kind == "absent":
            what = f"is listed in {listing} but absent; restore it (git checkout -- {file})"
        elif difference.kind == "unlisted":
            what = (f"is not in {listing}: no command of this store wrote it; remove it, or, if this project "
                    f"computed it, seal it (python tools/seal_evidence.py {_shown(self.root)})")
        else:
            if "/" in difference.name:  # a network diagnostic: no record, so only whether it is whole JSON
                damaged = _read_json(path) is None
                problem = "it is not whole JSON" if damaged else None
            else:
                problem = file_problem(self.root, path)
                damaged = problem is not None and problem.startswith(("unreadable", "incomplete"))
            state = (f"is damaged or truncated: {problem}" if damaged
                     else f"was edited: {problem}" if problem is not None
                     else "was edited: its numbers are not the ones computed")
            what = f"{state}; it differs from its SHA-256 in {listing}; restore it (git checkout -- {file})"
        also = f" (and {more} more file{'s' if more > 1 else ''})" if more else ""
        return manifest.EvidenceError(f"committed evidence refused: {file} {what}{also}")

    def path(self, spec: RunSpec) -> Path:
        return self.root / f"{spec.method}__{spec.dataset}__{spec.outlier_set}__{spec.key()}.json"

    def get(self, spec: RunSpec) -> Record | None:
        """The stored record of ``spec`` if it may be served, else None (a stale one is set aside)."""
        path = self.path(spec)
        if not path.is_file():
            return None  # in a sealed store too: a missing cell is computed, and put lists it
        if self.sealed:
            self._check_manifest([path.name])
        record = self._load(path, self.outputs_kept)
        if record is None:
            return None
        if record.key != spec.key():
            self._set_aside(path, f"it holds the record of cell {record.key}, not of {spec.key()}")
            return None
        if record.config is not None and record.config != current_config(spec):
            return None  # computed under other defaults
        return record

    def _load(self, path: Path, outputs_kept: bool) -> Record | None:
        """The record at ``path`` if it is whole and consistent (:func:`record_problem`); else
        it is set aside and None returned."""
        record = read_record(path)
        problem = record if isinstance(record, str) else record_problem(record, self.root, outputs_kept)
        if problem is not None:
            self._set_aside(path, problem, None if isinstance(record, str) else record.outputs)
            return None
        return record

    def _set_aside(self, path: Path, reason: str, outputs: str | None = None) -> None:
        """Move a stale record (and its outputs file) to ``.grid/stale/``, warning in one line;
        in a sealed store, refuse it instead (a committed file is never moved)."""
        if self.sealed:
            raise manifest.EvidenceError(f"committed evidence refused: {_shown(path)}: {reason}; restore the store's "
                                         f"committed files (git checkout -- {_shown(self.root)})")
        folder = self.grid_dir / "stale"
        moved = ""
        try:
            folder.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y%m%dT%H%M%S")
            if outputs and Path(outputs).name == outputs and (self.root / outputs).is_file():
                os.replace(self.root / outputs, folder / f"{stamp}-{outputs}")
            os.replace(path, folder / f"{stamp}-{path.name}")
            moved = f"; moved to {folder}"
        except OSError as exc:  # a read-only store: it is still never served
            moved = f"; could not move it aside ({exc.strerror or exc})"
        warnings.warn(f"stale results record {path.name}: {reason}{moved}; it counts as missing and will be "
                      "recomputed", stacklevel=3)

    def check_space(self, spec: RunSpec) -> None:
        """Refuse, in one line, a cell whose record and outputs would not fit on the store's disk."""
        need = expected_bytes(spec)
        self.root.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(self.root).free
        if free < need:
            raise OutOfSpace(f"the results folder {self.root} has {free / 2**20:.1f} MiB free, and cell {spec.key()} "
                             f"({spec.method}) writes up to {need / 2**20:.1f} MiB; free some space or pass another "
                             "--results folder")

    def put(self, record: Record, outputs: Mapping[str, StreamOutputs] | None = None) -> Record:
        """Store ``record`` and return it as stored; with ``outputs`` (per-sample outputs by
        corruption) the outputs file is stored beside it, and the record names it and its digest.
        Both are written whole to temporary names first, then renamed: outputs, then the record
        (module docstring); in a sealed store the manifest with the record's entry is written
        beside them and renamed last, under the manifest's lock. A full disk raises
        :class:`OutOfSpace` and leaves the store as it was."""
        path = self.path(record.spec)
        written: list[tuple[Path, Path]] = []  # (temporary, final), in the order they are renamed
        renamed: list[Path] = []
        sealed = self.sealed
        if sealed:
            self._check_manifest([])  # a committed store without its manifest: refused before anything is written
        try:
            with _writing(path), manifest.locked(self.root) if sealed else contextlib.nullcontext():
                payload = outputs_bytes(outputs) if outputs is not None else None
                if payload is not None:
                    record = dataclasses.replace(record, outputs=outputs_path(path).name,
                                                 outputs_sha256=hashlib.sha256(payload).hexdigest())
                if sealed and (kept := self._same_result(path, record)) is not None:
                    self.clear_partials(record.spec)
                    return kept  # committed evidence computed again to the same numbers: its files stay as committed
                if payload is not None:
                    written.append((_temporary(outputs_path(path), payload), outputs_path(path)))
                text = json.dumps(record.to_json(), indent=1, sort_keys=True).encode()
                written.append((_temporary(path, text), path))
                if sealed:
                    entries = manifest.with_entry(manifest.read(self.root), path.name, manifest.digest(text))
                    listing = manifest.path_of(self.root)
                    written.append((_temporary(listing, manifest.render(entries).encode()), listing))
                for tmp, final in written:
                    os.replace(tmp, final)
                    renamed.append(final)
        except BaseException:
            if renamed and path not in renamed:  # the outputs file is in place, its record is not
                renamed[0].unlink(missing_ok=True)
            raise
        finally:
            for tmp, _ in written:
                tmp.unlink(missing_ok=True)
        self.clear_partials(record.spec)
        return record

    #: What a record holds besides its result: when and where, and by which command, it was computed.
    PROVENANCE_FIELDS = ("provenance", "seconds", "versions", "device")

    def _same_result(self, path: Path, record: Record) -> Record | None:
        """The record stored at ``path`` if it holds what ``record`` holds but for its provenance
        (:data:`PROVENANCE_FIELDS`): the same rows, mean, config and outputs digest; else None."""
        if not path.is_file():
            return None
        stored = read_record(path)
        if isinstance(stored, str):
            return None

        def result(r: Record) -> dict[str, Any]:
            return {k: v for k, v in r.to_json().items() if k not in self.PROVENANCE_FIELDS}

        return stored if result(stored) == result(record) else None

    def put_file(self, name: str, payload: bytes) -> bool:
        """Write the guarded file ``name`` (as the manifest names it: ``networks/<checkpoint>.json``)
        whole, through a temporary name; in a sealed store its manifest entry is written in the same
        step, under the manifest's lock, as :meth:`put` does for a record. Returns False, writing
        nothing, where the file already holds ``payload`` (and, sealed, is listed under it); a file that
        holds it but is not listed under it keeps its bytes and gets its entry."""
        assert manifest.is_guarded_name(name) and "/" in name, f"{name!r} is no guarded file beside the records"
        path = self.root / name
        sealed = self.sealed
        if sealed:
            self._check_manifest([])
        written: list[tuple[Path, Path]] = []
        try:
            with _writing(path), manifest.locked(self.root) if sealed else contextlib.nullcontext():
                entries = manifest.read(self.root) if sealed else {}
                same = path.is_file() and path.read_bytes() == payload
                if same and (not sealed or entries.get(name) == manifest.digest(payload)):
                    return False
                if not same:  # a file already holding it keeps its bytes; only its entry is written
                    written.append((_temporary(path, payload), path))
                if sealed:
                    listing = manifest.path_of(self.root)
                    text = manifest.render(manifest.with_entry(entries, name, manifest.digest(payload)))
                    written.append((_temporary(listing, text.encode()), listing))
                for tmp, final in written:
                    os.replace(tmp, final)
        finally:
            for tmp, _ in written:
                tmp.unlink(missing_ok=True)
        return True

    def rescored(self, records: Iterable[Record], metrics: Iterable[str] | None = None) -> list[Record]:
        """``records`` (of this store) with ``metrics`` computed from their stored outputs;
        records without outputs unchanged (:func:`stamplib.evaluation.outputs.rescore_all`)."""
        return rescore_all(records, self.root, metrics)

    def records_by_key(self) -> dict[str, Record]:
        """Every complete record (:meth:`records`) by its key."""
        return {record.key: record for record in self.records()}

    def records(self) -> list[Record]:
        """Every record that may be served. Temporary files of a killed writer (``.tmp-*``,
        hidden) are skipped, and so, with a warning, is anything named like a record that is no
        file (a folder ``x.json``); stale records are set aside with a warning, and a sealed store
        that differs from its manifest is refused (module docstring)."""
        out = []
        kept = self.outputs_kept
        if self.sealed:
            self._check_manifest()
        for p in sorted(self.root.glob("*.json")):
            if p.name.startswith("."):  # pathlib's glob, unlike a shell's, matches dot files
                continue
            if not p.is_file():  # a folder named like a record: not ours to move, only to skip
                warnings.warn(f"{p} is not a file, so not a record: skipped (move it out of the results store)",
                              stacklevel=2)
                continue
            record = self._load(p, kept)
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
        entry = {"key": spec.key(), "corruption": corruption, "config": current_config(spec),
                 "checkpoint_sha256": checkpoint_sha256, "row": row.to_json(),
                 "trace": trace.to_json() if trace is not None else None}
        with _writing(folder / f"{corruption}.json"):
            save_outputs(folder / f"{corruption}{OUTPUTS_SUFFIX}", {corruption: outputs})
            paths.atomic_write_bytes(folder / f"{corruption}.json", json.dumps(entry, sort_keys=True).encode())

    def partial(self, spec: RunSpec, corruption: str, checkpoint_sha256: str | None
                ) -> tuple[Row, StreamOutputs, Trace | None] | None:
        """A finished corruption of ``spec`` kept by :meth:`put_partial`, as (row,
        outputs, trace), or None when absent, unreadable, or made under other hyperparameters
        or another source model (then it is computed again)."""
        entry = self._kept_entry(spec, corruption)
        if entry is None or entry.get("checkpoint_sha256") != checkpoint_sha256:
            return None
        try:
            outputs = load_outputs(self.partial_dir(spec) / f"{corruption}{OUTPUTS_SUFFIX}")[corruption]
        except (OSError, KeyError, ValueError):
            return None
        trace = entry.get("trace")
        return Row.from_json(entry["row"]), outputs, Trace.from_json(trace) if trace else None

    def kept_corruptions(self, spec: RunSpec) -> tuple[str, ...]:
        """The corruptions of ``spec`` kept by :meth:`put_partial` under its current
        hyperparameters, in the spec's order: where ``claims compute`` resumes the cell. (The
        checkpoint is checked when the cell resumes, not here: this is for counting.)"""
        return tuple(c for c in spec.corruptions if self._kept_entry(spec, c) is not None)

    def _kept_entry(self, spec: RunSpec, corruption: str) -> dict[str, Any] | None:
        """The entry :meth:`put_partial` wrote for ``corruption`` of ``spec``, if it is readable and
        made under the cell's key and current hyperparameters."""
        entry = _read_json(self.partial_dir(spec) / f"{corruption}.json")
        if (entry is None or entry.get("key") != spec.key() or entry.get("corruption") != corruption
                or entry.get("config") != current_config(spec)):
            return None
        return entry

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
        """Mark ``spec`` running under ``marker`` whoever holds it (a requeued job retaking its own)."""
        with _writing(self.marker_path(spec)):
            paths.atomic_write_bytes(self.marker_path(spec), json.dumps({**marker, "spec": spec.to_dict()}).encode())

    def claim(self, spec: RunSpec, marker: dict[str, Any]) -> dict[str, Any] | None:
        """Claim ``spec`` for the job of ``marker``: None when it is now this job's, else the live
        marker of the job that holds it. Atomic: the marker is created whole by a hard link, which
        fails when one exists (``O_EXCL`` semantics), so of two jobs claiming at once exactly one
        wins; a stale marker (its job is gone) or this job's own (requeued) is replaced under a lock
        on ``.grid/claims.lock``, so that two jobs do not both take it over."""
        target = self.marker_path(spec)
        payload = json.dumps({**marker, "spec": spec.to_dict()}).encode()
        with _writing(target):
            tmp = _temporary(target, payload)
            try:
                with self._claims_lock():
                    held = _read_json(target)
                    if held is not None and marker_alive(held) and held.get("job_id") != marker.get("job_id"):
                        return held
                    if target.exists():  # stale, unreadable, or this job's own
                        target.unlink(missing_ok=True)
                    try:
                        os.link(tmp, target)
                    except FileExistsError:  # a job that does not take the lock was faster
                        return _read_json(target) or {"job_id": "?"}
            finally:
                tmp.unlink(missing_ok=True)
        return None

    @contextlib.contextmanager
    def _claims_lock(self) -> Iterator[None]:
        lock = self.grid_dir / "claims.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        with open(lock, "a") as fh:
            try:
                import fcntl
            except ImportError:  # no flock (Windows): the hard link alone decides fresh claims
                yield
                return
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def unmark_running(self, spec: RunSpec) -> None:
        self.marker_path(spec).unlink(missing_ok=True)

    def running_marker(self, spec: RunSpec) -> dict[str, Any] | None:
        """The live marker of ``spec``, or None (absent or stale)."""
        marker = _read_json(self.marker_path(spec))
        return marker if marker is not None and marker_alive(marker) else None

    def record_failure(self, spec: RunSpec, failure: dict[str, Any]) -> None:
        record = {**failure, "time": time.time(), "spec": spec.to_dict()}
        with _writing(self.failure_path(spec)):
            paths.atomic_write_bytes(self.failure_path(spec), json.dumps(record, indent=1).encode())

    def clear_failure(self, spec: RunSpec) -> None:
        self.failure_path(spec).unlink(missing_ok=True)

    def failure(self, spec: RunSpec) -> dict[str, Any] | None:
        return _read_json(self.failure_path(spec))

    def status(self, specs: Iterable[RunSpec]) -> CellStatus:
        """Split ``specs`` into done (a record is stored), running (a live job holds it) and missing.

        A job stores a cell's record before it removes the cell's marker, so a cell found with
        neither is looked at once more: its job may have stored it between the two looks (a cell
        seen as missing while another grid finishes it would be reported lost)."""
        done, missing, running = [], [], []
        for spec in specs:
            if self._stored(spec):
                done.append(spec)
            elif self.running_marker(spec) is not None:
                running.append(spec)
            elif self._stored(spec):
                done.append(spec)
            else:
                missing.append(spec)
        return CellStatus(done, missing, running)

    def _stored(self, spec: RunSpec) -> bool:
        return self.path(spec).is_file() and self.get(spec) is not None
