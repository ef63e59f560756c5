"""The committed evidence is guarded (issue 72): on a scratch checkout holding a few committed
records of each store and their manifest entries, an edited, a forged-consistent and a truncated
record are each refused by every command that builds pages or figures from them, with exit 2 and
one line naming the file, before anything is written; no file moves and `git status` stays clean."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from stamplib import cli, paths
from stamplib.evaluation import manifest, store
from stamplib.evaluation.record import Record
from stamplib.evaluation.store import ResultsStore

REPO = Path(__file__).resolve().parents[2]
BUILTIN, REFERENCE = "results/builtin_benchmark", "results/reference"
#: What claims render writes into, beside the stores: each must stay byte for byte.
PAGES = ("README.md", "docs/claims.md", "docs/builtin_benchmark.md", "docs/reference_run.md")


def _scratch(root: Path, records: int = 3) -> Path:
    """A checkout with the first ``records`` records of each committed store (their outputs files
    where the store keeps them) and the committed manifest's lines for exactly those."""
    for folder in (BUILTIN, REFERENCE):
        source, copy = REPO / folder, root / folder
        copy.mkdir(parents=True)
        for extra in ("README.md", store.OUTPUTS_NOT_KEPT):
            if (source / extra).is_file():
                shutil.copyfile(source / extra, copy / extra)
        entries = dict(list(manifest.read(source).items())[:records])
        for name in entries:
            shutil.copyfile(source / name, copy / name)
            outputs = json.loads((source / name).read_text()).get("outputs")
            if outputs and (source / outputs).is_file():
                shutil.copyfile(source / outputs, copy / outputs)
        manifest.write(copy, entries)
        ResultsStore(copy).verify()  # the scratch copy itself passes: only the tampering below is refused
    for page in (*PAGES, ".gitignore"):
        (root / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / page, root / page)
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout


def _forge(stored: dict) -> None:
    """ACC 99 in every row and in the mean: consistent, so only the manifest can tell."""
    for row in stored["per_corruption"].values():
        row["acc"] = 99.0
    stored["mean"]["acc"] = 99.0


def _edit(stored: dict) -> None:
    stored["mean"]["h"] = stored["mean"]["h"] + 20


def _tamper(path: Path, how: str) -> str:
    """Tamper with the record at ``path`` (``how``: edited, forged, truncated); the words the
    refusal must say."""
    if how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        return "is damaged or truncated"
    stored = json.loads(path.read_text())
    (_edit if how == "edited" else _forge)(stored)
    if how == "forged":
        assert store.record_problem(Record.from_json(stored), path.parent, False) is None, "the forgery is consistent"
    path.write_text(json.dumps(stored, indent=1, sort_keys=True))
    return "was edited: the mean h is" if how == "edited" else "was edited: its numbers are not the ones computed"


@pytest.mark.parametrize("folder, how, command", [
    (BUILTIN, "edited", ["claims", "render"]),
    (BUILTIN, "forged", ["claims", "render"]),
    (BUILTIN, "truncated", ["claims", "render"]),
    (REFERENCE, "forged", ["claims", "render"]),
    (BUILTIN, "forged", ["benchmark", "render", "--results", BUILTIN]),
    (REFERENCE, "edited", ["benchmark", "render"]),
    (REFERENCE, "truncated", ["reference", "render"]),
])
def test_a_tampered_committed_record_is_refused_in_one_line_and_nothing_moves(tmp_path, monkeypatch, capsys,
                                                                               folder, how, command):
    root = _scratch(tmp_path)
    git = shutil.which("git") is not None
    if git:
        _git(root, "init", "-q")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "scratch")
    target = sorted((root / folder).glob("*.json"))[1]
    words = _tamper(target, how)
    before = _files(root)
    monkeypatch.setattr(paths, "_CHECKOUT", root)
    monkeypatch.chdir(root)
    capsys.readouterr()

    assert cli.main(command) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: committed evidence refused: {folder}/{target.name} {words}"), err
    assert f"git checkout -- {folder}/{target.name}" in err
    assert _files(root) == before, "a file was written, moved or deleted"
    assert not (root / folder / ".grid" / "stale").exists()
    if git:
        assert _git(root, "status", "--porcelain") == f" M {folder}/{target.name}\n"  # only the tampering
