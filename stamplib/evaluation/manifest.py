"""The manifest of a committed evidence store: every file it guards and its SHA-256.

A results store whose root holds :data:`NAME` is *sealed*: it is committed evidence
(``results/builtin_benchmark``, ``results/reference``), and what it serves must be exactly what
was computed. The manifest is one line per guarded file, sorted by name, in the format of
``sha256sum`` (so ``cd results/reference && sha256sum -c MANIFEST.sha256`` checks it without
stamplib)::

    <64 hex digits>  <record file name>
    <64 hex digits>  networks/<checkpoint>.json
    <64 hex digits>  other_cpus/<record file name>

The guarded files (:func:`guarded_names`) are the record files in the store's root and the JSON
files of its :data:`SUBFOLDERS` (the network diagnostics, ``stamplib.evidence.networks``, and the
records of its cells from another CPU kind): every file a page reads its numbers from.

Only three things write it: :meth:`~stamplib.evaluation.store.ResultsStore.put` (each record the
store's commands compute gets its entry in the same step), :meth:`~stamplib.evaluation.store.ResultsStore.put_file`
(a network diagnostic, likewise) and ``tools/seal_evidence.py`` (a maintainer's bootstrap for
files present but unlisted). A sealed store refuses
(:class:`EvidenceError`) a record file that differs from its entry, one the manifest does not
list, and an entry whose file is absent; it never moves a committed file aside.

A store is also known to be committed from git (:func:`git_view`): where git tracks its files, a
missing manifest is refused rather than taken for a store of one's own, and a manifest that
differs from the committed one is named as the damaged file rather than the records it no longer
matches.

The functions on text and mappings are pure; :func:`read`, :func:`write` and :func:`locked` touch
the store's folder (atomic writes, one writer at a time), :func:`git_view` asks git.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from stamplib import paths

#: The manifest's file name in a store's root.
NAME = "MANIFEST.sha256"
#: The folder of a store that keeps records of its own cells computed on another CPU kind (what
#: drives a verdict re-judges STAMP's claims with them, ``stamplib.evidence.judge``).
OTHER_CPUS = "other_cpus"
#: The folders of a store whose JSON files the manifest guards beside the records: the network
#: diagnostics (``stamplib.evidence.networks.FOLDER``) and the other CPU kinds' records.
SUBFOLDERS = ("networks", OTHER_CPUS)
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


def guarded_names(root: str | Path) -> list[str]:
    """Every file of the store at ``root`` that its manifest guards: the record files and the JSON
    files of :data:`SUBFOLDERS` (as ``networks/<name>.json``), sorted."""
    found = record_names(root)
    for folder in SUBFOLDERS:
        found += [f"{folder}/{name}" for name in record_names(Path(root) / folder)]
    return sorted(found)


def is_guarded_name(name: str) -> bool:
    """Whether ``name`` is how a manifest names a guarded file: ``<file>.json`` in the store's
    root, or ``<folder>/<file>.json`` in one of :data:`SUBFOLDERS`."""
    folder, _, file = name.rpartition("/")
    return (folder in ("", *SUBFOLDERS) and file.endswith(".json") and not file.startswith(".")
            and Path(file).name == file)


def parse(text: str) -> dict[str, str]:
    """The entries of a manifest's text, file name → digest; a line not in the format is a
    ValueError naming its number."""
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _LINE.fullmatch(line)
        if match is None or not is_guarded_name(match[2]):
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
    assert is_guarded_name(name), f"{name!r} is not the name of a file a manifest guards"
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


# ------------------------------------------------------------------------------- what git knows


def _work_tree(root: Path) -> Path | None:
    """The git work tree holding ``root`` (a ``.git`` in it or a parent), else None: most stores
    (a test's, a user's) are in none, and are answered without starting git."""
    for folder in (root, *root.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _git(root: Path, *args: str) -> list[str] | None:
    """The NUL-separated lines git prints for ``args`` run in ``root``; None where git cannot
    answer (no git, no commit yet, not a work tree)."""
    if shutil.which("git") is None or not root.is_dir():
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return [name for name in done.stdout.decode(errors="replace").split("\0") if name]


_COMMITTED: dict[tuple[str, int, int], frozenset[str]] = {}


def _git_dir(tree: Path) -> Path:
    """The git folder of the work tree ``tree``: ``.git`` itself, or where a ``.git`` file points
    (``gitdir: …``, as ``git worktree add`` and submodules write it)."""
    dot = tree / ".git"
    if dot.is_file():
        text = dot.read_text(errors="replace").strip()
        if text.startswith("gitdir:"):
            return (tree / text.removeprefix("gitdir:").strip()).resolve()
    return dot


def committed_names(root: str | Path) -> frozenset[str]:
    """The files of the store at ``root`` that git's last commit holds, by their names in the
    store (``MANIFEST.sha256``, record files, ``networks/<name>.json``); empty where git knows
    nothing of the store. Remembered until the next commit or ``git add`` (by the index's and
    HEAD's modification times), since every lookup of a store without a manifest asks it."""
    root = Path(root).resolve()
    tree = _work_tree(root)
    if tree is None:
        return frozenset()
    marks = []
    for name in ("index", "HEAD"):
        try:
            marks.append((_git_dir(tree) / name).stat().st_mtime_ns)
        except OSError:  # no index yet, or an unusual layout: ask git every time
            marks.append(-1)
    key = (str(root), *marks)
    if marks[0] >= 0 and key in _COMMITTED:
        return _COMMITTED[key]
    lines = _git(root, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", ".")
    names = frozenset(n for n in lines or () if n == NAME or is_guarded_name(n))
    if marks[0] >= 0:
        _COMMITTED[key] = names
    return names


def changed_names(root: str | Path) -> frozenset[str]:
    """The files of the store at ``root`` whose working copy differs from git's last commit
    (edited, replaced or deleted), by their names in the store; empty where git knows nothing of
    the store."""
    root = Path(root).resolve()
    if _work_tree(root) is None:
        return frozenset()
    lines = _git(root, "diff", "-z", "--name-only", "--relative", "HEAD", "--", ".")
    return frozenset(n for n in lines or () if n == NAME or is_guarded_name(n))
