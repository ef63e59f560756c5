"""A record's provenance says whether the code differed from its commit; what the computation
writes into a committed store (its manifest, its kept corruptions) is not a change of the code."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stamplib import paths
from stamplib.evaluation import provenance


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "stamplib").mkdir()
    (tmp_path / "stamplib" / "method.py").write_text("LR = 0.001\n")
    (tmp_path / "results" / "reference").mkdir(parents=True)
    (tmp_path / "results" / "reference" / "MANIFEST.sha256").write_text("")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "start")
    monkeypatch.setattr(paths, "repo_root", lambda: tmp_path)
    provenance.git_state.cache_clear()
    yield tmp_path
    provenance.git_state.cache_clear()


def test_a_store_written_by_the_computation_leaves_the_checkout_clean(checkout: Path) -> None:
    (checkout / "results" / "reference" / "MANIFEST.sha256").write_text("abc  x.json\n")
    state = provenance.git_state()
    assert state["dirty"] is False and len(state["commit"]) == 40


def test_changed_code_makes_the_checkout_dirty(checkout: Path) -> None:
    (checkout / "stamplib" / "method.py").write_text("LR = 0.01\n")
    assert provenance.git_state()["dirty"] is True
