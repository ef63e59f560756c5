"""The manifest of a committed evidence store: every record file it holds and its SHA-256.

A results store whose root holds :data:`NAME` is *sealed*: it is committed evidence
(``results/builtin_benchmark``, ``results/reference``), and what it serves must be exactly what
was computed. The manifest is one line per record file, sorted by name, in the format of
``sha256sum`` (so ``cd results/reference && sha256sum -c MANIFEST.sha256`` checks it without
stamplib)::

    <64 hex digits>  <record file name>

Only two things write it: :meth:`~stamplib.evaluation.store.ResultsStore.put` (each record the
store's commands compute gets its entry in the same step) and ``tools/seal_evidence.py`` (a
maintainer's bootstrap for records present but unlisted). A sealed store refuses
(:class:`EvidenceError`) a record file that differs from its entry, one the manifest does not
list, and an entry whose file is absent; it never moves a committed file aside.

The functions on text and mappings are pure; :func:`read`, :func:`write` and :func:`locked` touch
the store's folder (atomic writes, one writer at a time).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from stamplib import paths

#: The manifest's file name in a store's root.
NAME = "MANIFEST.sha256"
_LINE = re.compile(r"([0-9a-f]{64})  (\S+)")


class EvidenceError(ValueError):
    """A committed evidence store holds something other than what was computed: one line naming
    the file, what is wrong and what to do."""


class Difference(NamedTuple):
    """One record file that disagrees with the manifest: ``kind`` is ``absent`` (listed, no
    file), ``unlisted`` (a file, no entry) or ``changed`` (a file whose digest is not its entry's)."""

    name: str
    kind: str


def digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def file_digest(path: Path) -> str:
    return digest(path.read_bytes())


def path_of(root: str | Path) -> Path:
    return Path(root) / NAME


def is_sealed(root: str | Path) -> bool:
    """Whether the store at ``root`` is committed evidence (it has a manifest)."""
    return path_of(root).is_file()


def record_names(root: str | Path) -> list[str]:
    """The record files of the store at ``root``, sorted (hidden temporary files left out)."""
    return sorted(p.name for p in Path(root).glob("*.json") if not p.name.startswith(".") and p.is_file())


def parse(text: str) -> dict[str, str]:
    """The entries of a manifest's text, file name → digest; a line not in the format is a
    ValueError naming its number."""
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _LINE.fullmatch(line)
        if match is None or Path(match[2]).name != match[2]:
            raise ValueError(f"line {number} is not '<sha256>  <file name>': {line[:80]!r}")
        if match[2] in entries:
            raise ValueError(f"line {number} lists {match[2]} a second time")
        entries[match[2]] = match[1]
    return entries


def render(entries: Mapping[str, str]) -> str:
    """A manifest's text for ``entries`` (file name → digest), one line each, sorted by name."""
    assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in entries.values()), "digests are SHA-256 hex"
    return "".join(f"{entries[name]}  {name}\n" for name in sorted(entries))


def differences(entries: Mapping[str, str], present: Mapping[str, str]) -> list[Difference]:
    """How the record files ``present`` (name → digest) differ from the manifest's ``entries``,
    sorted by file name."""
    found = [Difference(name, "absent") for name in entries if name not in present]
    found += [Difference(name, "unlisted" if name not in entries else "changed")
              for name, sha in present.items() if entries.get(name) != sha]
    return sorted(found)


def with_entry(entries: Mapping[str, str], name: str, sha: str) -> dict[str, str]:
    """``entries`` with ``name`` listed under ``sha`` (added, or its digest replaced)."""
    assert Path(name).name == name and name.endswith(".json"), f"{name!r} is not a record file name"
    return {**entries, name: sha}


def read(root: str | Path) -> dict[str, str]:
    """The entries of the manifest of the store at ``root``; a damaged manifest is one line."""
    path = path_of(root)
    try:
        return parse(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise EvidenceError(f"the manifest {path} is damaged ({exc}): restore it (git checkout -- {path})") from None


def write(root: str | Path, entries: Mapping[str, str]) -> None:
    """Write the manifest of the store at ``root`` whole (a temporary file, then renamed)."""
    paths.atomic_write_bytes(path_of(root), render(entries).encode())


@contextlib.contextmanager
def locked(root: str | Path) -> Iterator[None]:
    """Hold the store's manifest lock (``.grid/manifest.lock``): one writer of the manifest at a
    time, across processes (grid workers put records at once)."""
    lock = Path(root) / ".grid" / "manifest.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        try:
            import fcntl
        except ImportError:  # no flock (Windows): one writer is assumed
            yield
            return
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
