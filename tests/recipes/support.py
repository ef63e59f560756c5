"""Applying a recipe of docs/architecture.md to a scratch copy of the package: its snippets,
each marked ``# <kind> recipe: <what> (<file>, <where>)``, inserted where they say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import stamplib
from tests.methods.test_method_recipe import package_copy as scratch_package  # noqa: F401 - shared

PACKAGE = Path(stamplib.__file__).resolve().parent
REPO = PACKAGE.parent
PAGE = REPO / "docs" / "architecture.md"


def snippets(kind: str) -> dict[str, tuple[str, str]]:
    """The page's code blocks of ``kind``'s recipe: what → (file, code)."""
    blocks = re.findall(rf"```python\n# {kind} recipe: ([^(\n]+?) \((stamplib/[^,)]+)[^)]*\)\n(.*?)```",
                        PAGE.read_text(), re.S)
    return {what: (file, code) for what, file, code in blocks}


def apply(kind: str, copy: Path, anchors: Mapping[str, str | None]) -> list[str]:
    """Insert each snippet of ``kind`` after its anchor line in the file it names (``None``: at
    the end); the package-relative files touched."""
    found = snippets(kind)
    assert set(found) == set(anchors), f"{PAGE.name}'s {kind} recipe has {sorted(found)}"
    touched = []
    for what, anchor in anchors.items():
        file, code = found[what]
        path = copy.parent / file
        text = path.read_text()
        if anchor is None:
            text = text.rstrip("\n") + "\n\n\n" + code
        else:
            assert text.count(anchor) == 1, f"{file} no longer has the line the recipe's {what} follows: {anchor!r}"
            text = text.replace(anchor, anchor + code)
        path.write_text(text)
        touched.append(path.relative_to(copy).as_posix())
    return sorted(set(touched))


def changed_files(copy: Path) -> list[str]:
    """The package-relative files of ``copy`` whose bytes differ from the package's."""
    changed = []
    for path in sorted(copy.rglob("*.py")):
        original = PACKAGE / path.relative_to(copy)
        if not original.is_file() or original.read_bytes() != path.read_bytes():
            changed.append(path.relative_to(copy).as_posix())
    return changed


def run_cli(copy: Path, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(copy.parent), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "stamplib", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd or copy.parent, timeout=600)
