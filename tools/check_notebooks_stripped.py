"""Check that git would commit every notebook without outputs: what ``git add`` would store (the
working copy through the checkout's clean filter, nbstripout, where ``tools/ensure_venv.sh``
installed it), not the working copy itself, which may hold the outputs of a JupyterLab session.

    python tools/check_notebooks_stripped.py [NOTEBOOK ...]   (default: notebooks/*.ipynb)

Exits 1 naming each notebook git would commit with outputs, and how to strip it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path


def committed_text(root: Path, notebook: Path) -> bytes:
    """What ``git add notebook`` would store: the file through its clean filter (``hash-object
    --path`` applies the same filters as ``git add``; the blob is then read back)."""
    relative = notebook.resolve().relative_to(root.resolve()).as_posix()
    blob = subprocess.run(["git", "hash-object", "-w", f"--path={relative}", relative], cwd=root,
                          capture_output=True, text=True, check=True).stdout.strip()
    return subprocess.run(["git", "cat-file", "blob", blob], cwd=root, capture_output=True, check=True).stdout


def unstripped(root: Path, notebooks: list[Path]) -> list[Path]:
    """The notebooks whose committed text nbstripout would still change."""
    with tempfile.TemporaryDirectory() as scratch:
        copies = {}
        for i, notebook in enumerate(notebooks):
            copies[notebook] = Path(scratch) / f"{i}-{notebook.name}"
            copies[notebook].write_bytes(committed_text(root, notebook))
        # one nbstripout for all: it strips the copies it would change, so compare them after
        subprocess.run([sys.executable, "-m", "nbstripout", *map(str, copies.values())], check=True)
        return [nb for nb, copy in copies.items() if copy.read_bytes() != committed_text(root, nb)]


def main(names: list[str]) -> int:
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                               check=True).stdout.strip())
    notebooks = [Path(n) for n in names] or sorted((root / "notebooks").glob("*.ipynb"))
    bad = unstripped(root, notebooks)
    for notebook in bad:
        print(f"{notebook}: git would commit it with outputs; run tools/ensure_venv.sh (it installs the nbstripout "
              f"filter) or strip it: nbstripout {notebook}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
