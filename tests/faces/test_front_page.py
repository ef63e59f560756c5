"""The README is a front page: at most 10 KB; its first screen says what the project is, shows
the built-in figure, the two commands, a Python example that runs, and links to the paper and to
the authors' code; its counts are the code's; a LICENSE matches pyproject.toml."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from stamplib import methods
from stamplib.evidence import ledger

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
PAPER = "https://arxiv.org/abs/2407.15773"
AUTHORS_CODE = "https://github.com/yuyongcan/STAMP"


def _python_example() -> str:
    (code,) = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    return code


def test_the_readme_is_at_most_ten_kilobytes() -> None:
    assert len(README.encode()) <= 10_240, len(README.encode())


def test_the_first_screen_shows_the_figure_the_commands_the_example_and_the_links() -> None:
    first = "\n".join(README.splitlines()[:40])
    assert f"]({PAPER})" in first and f"]({AUTHORS_CODE})" in first
    assert "![" in first and "figures/builtin_benchmark.png" in first
    assert "./run_all.sh" in first and "./run_tests.sh" in first
    assert "```python" in first and "stamplib.run(" in first and "RunSpec(" in first
    assert 5 <= len(_python_example().strip().splitlines()) <= 10


def test_the_python_example_runs_and_prints_the_h_score(tmp_path: Path) -> None:
    env = {**os.environ, "STAMPLIB_RESULTS": str(tmp_path / "results"), "STAMPLIB_HOME": str(tmp_path / "home"),
           "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _python_example()], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.fullmatch(r"H \d+\.\d  ACC \d+\.\d  AUROC \d+\.\d\n", done.stdout), done.stdout
    assert len(list((tmp_path / "results").glob("*.json"))) == 1


def test_the_counts_in_prose_are_the_codes() -> None:
    others = len(methods.available()) - 1
    assert f"STAMP and {others} other test-time adaptation" in README.replace("\n", " ")
    assert f"all {len(methods.TABLE_ORDER)} methods" in README
    notebooks = sorted(p.name[:2] for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert f"| {notebooks[0]}–{notebooks[-1]}, committed without outputs" in README
    assert [int(n) for n in notebooks] == list(range(len(notebooks)))  # "00–17" means every number between
    summary = README[README.index("verdicts:begin"):README.index("verdicts:end")]
    assert f"{len(ledger.LEDGER)} claims in the ledger" in summary  # generated: tests/evidence/test_pages.py


def test_the_license_file_matches_pyproject() -> None:
    license_text = (REPO / "LICENSE").read_text()
    declared = re.search(r'^license = \{ text = "([^"]+)" \}$', (REPO / "pyproject.toml").read_text(), flags=re.M)
    assert declared and declared.group(1) == "MIT" and license_text.startswith("MIT License")
    assert "[LICENSE](LICENSE)" in README and "@inproceedings{yu2024stamp," in README


def test_the_counts_in_the_guides_are_the_codes() -> None:
    """"14 methods" is every registered method, "ten methods" the paper's, "44 cells" the
    reference run's core: a method or a cell added without the prose fails here."""
    from stamplib.experiments import reference

    words = {"ten": 10, "thirteen": 13, "fourteen": 14}
    expected = {"methods": {len(methods.available()), len(methods.PAPER_ORDER)}, "cells": None}
    wrong = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for count, noun in re.findall(r"\b(\d+|ten|fourteen)\s+(methods|cells)\b", page.read_text()):
            n = words.get(count) or int(count)
            if noun == "methods" and n in (10, 14) and n not in expected["methods"]:
                wrong.append(f"{page.name}: {count} {noun}")
            if noun == "cells" and n == 44 and n != len(reference.specs()):
                wrong.append(f"{page.name}: {count} {noun}")
    assert len(methods.available()) == 14 and len(methods.PAPER_ORDER) == 10 and len(reference.specs()) == 44, (
        "the number of methods or reference cells changed: update the guides' counts, then these numbers")
    assert not wrong, wrong
