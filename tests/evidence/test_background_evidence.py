"""tools/background_evidence.sh harvest: a machine reset between sessions keeps only what is
committed, so the finished corruptions of an unfinished cell are committed as they appear, a write
under way never is, and those of a finished cell go when the clone's store drops them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL = "tools/background_evidence.sh"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout


def _harvest(root: Path, work: Path) -> str:
    env = {"PATH": "/usr/bin:/bin", "WORK": str(work), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(root)}
    return subprocess.run(["bash", TOOL, "harvest"], cwd=root, env=env, check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("flock") is None, reason="needs git and flock")
def test_harvest_commits_kept_corruptions_and_not_a_write_under_way(tmp_path: Path) -> None:
    root, work = tmp_path / "checkout", tmp_path / "compute"
    (root / "tools").mkdir(parents=True)
    shutil.copy(REPO / TOOL, root / TOOL)
    shutil.copy(REPO / ".gitignore", root / ".gitignore")
    (root / "results" / "reference").mkdir(parents=True)
    (root / "results" / "reference" / "MANIFEST.sha256").write_text("")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "start")
    kept = work / "clone" / "results" / "reference" / ".grid" / "partial" / "cell_key"
    kept.mkdir(parents=True)
    (work / "clone" / "results" / "reference" / "MANIFEST.sha256").write_text("")
    (kept / "gaussian_noise.json").write_text("{}")
    (kept / "gaussian_noise.outputs.npz").write_bytes(b"npz")
    (kept / ".tmp-7-shot_noise.json").write_text("{")  # shot noise being written
    (work / "clone" / "results" / "reference" / "half_written.json").write_text("{")  # not in its manifest

    _harvest(root, work)
    subject = _git(root, "log", "-1", "--format=%s")
    assert subject.startswith("Kept corruptions of results/reference's unfinished cells: 1 ")
    files = _git(root, "ls-files", "results").split()
    assert "results/reference/.grid/partial/cell_key/gaussian_noise.json" in files
    assert "results/reference/.grid/partial/cell_key/gaussian_noise.outputs.npz" in files
    assert not any(".tmp-" in f or "half_written" in f for f in files)
    assert _git(root, "status", "--porcelain") == ""

    assert "nothing new" in _harvest(root, work)  # nothing changed: no empty commit

    shutil.rmtree(kept)  # the cell's record was written: its store dropped the kept corruptions
    _harvest(root, work)
    assert not [f for f in _git(root, "ls-files", "results").split() if "/.grid/" in f]
    assert int(_git(root, "rev-list", "--count", "HEAD")) == 3
