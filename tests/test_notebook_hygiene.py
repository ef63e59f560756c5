"""Notebooks are committed without outputs: the nbstripout git filter (tools/ensure_venv.sh and
.gitattributes) strips what git stores, and the hygiene check (run_tests.sh:
tools/check_notebooks_stripped.py) looks at what git would commit, not at the working copy."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import load_script

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "11_explore_a_stream.ipynb"


def _tool():
    return load_script("tools/check_notebooks_stripped.py")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def _run_in_jupyterlab(path: Path) -> None:
    """What a JupyterLab session leaves in the working copy: outputs and execution counts."""
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
    cell["execution_count"] = 1
    cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["batch 1 of 12\n"]}]
    path.write_text(json.dumps(nb, indent=1))


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    root = tmp_path / "checkout"
    (root / "notebooks").mkdir(parents=True)
    shutil.copyfile(REPO / ".gitattributes", root / ".gitattributes")
    shutil.copyfile(NOTEBOOK, root / "notebooks" / NOTEBOOK.name)
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "stripped")
    return root


def test_without_the_filter_a_notebook_with_outputs_is_caught(checkout):
    notebook = checkout / "notebooks" / NOTEBOOK.name
    assert _tool().unstripped(checkout, [notebook]) == []
    _run_in_jupyterlab(notebook)
    assert _tool().unstripped(checkout, [notebook]) == [notebook]


def test_with_the_filter_git_commits_the_notebook_stripped(checkout):
    # the configuration tools/ensure_venv.sh writes, with this interpreter
    _git(checkout, "config", "filter.nbstripout.clean", f'"{sys.executable}" -m nbstripout')
    _git(checkout, "config", "filter.nbstripout.smudge", "cat")
    notebook = checkout / "notebooks" / NOTEBOOK.name
    _run_in_jupyterlab(notebook)
    assert '"batch 1 of 12' in notebook.read_text()
    assert _tool().unstripped(checkout, [notebook]) == []  # the working copy has outputs; git would not commit them
    _git(checkout, "add", "notebooks")
    stored = json.loads(_git(checkout, "show", f":notebooks/{NOTEBOOK.name}"))
    assert all(c.get("outputs", []) == [] for c in stored["cells"])
    assert _git(checkout, "status", "--porcelain") == ""  # nothing to commit: the outputs are not content


def test_the_setup_installs_the_filter_and_the_attributes_name_it():
    assert "*.ipynb filter=nbstripout" in (REPO / ".gitattributes").read_text()
    setup = (REPO / "tools" / "ensure_venv.sh").read_text()
    assert "git -C \"$root\" config filter.nbstripout.clean" in setup
    assert "python tools/check_notebooks_stripped.py" in (REPO / "run_tests.sh").read_text()
