"""The GPU runbook (docs/gpu_runbook.md): ./run_all.sh --help points to it, and its grid
commands are ones the command line accepts, planning the cells the runbook counts."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from stamplib import cli

REPO = Path(__file__).resolve().parents[1]
RUNBOOK = REPO / "docs" / "gpu_runbook.md"
PREFIX = ".venv/bin/python -m stamplib "


def test_run_all_help_prints_its_whole_header_and_points_to_the_runbook() -> None:
    script = (REPO / "run_all.sh").read_text().splitlines()
    header = script[1 : next(i for i, line in enumerate(script) if not line.startswith("#"))]
    shown = subprocess.run(["bash", "run_all.sh", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and shown.stdout.splitlines() == header
    assert "docs/gpu_runbook.md" in shown.stdout and RUNBOOK.is_file()


@pytest.mark.parametrize("line", [ln for ln in RUNBOOK.read_text().splitlines() if ln.startswith(PREFIX + "grid ")])
def test_the_runbooks_grid_commands_plan_the_cells_it_counts(
        line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(tmp_path / "data"))  # the command sets it for its cells
    argv = shlex.split(line.removeprefix(PREFIX))
    assert cli.main([*argv, "--dry-run", "--results", str(tmp_path / "results")]) == 0
    cells = {"02": 56, "03": 28}[argv[argv.index("--notebook") + 1]]  # 14 methods × 4 or 2 outlier sets
    assert f"would {'submit' if 'submitit' in argv else 'compute'} {cells} cells" in capsys.readouterr().out


def _gpu_report():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_report", REPO / "benchmarks" / "gpu_report.py")
    gpu_report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_report)
    return gpu_report


def _block(text: str, begin: str, end: str) -> str:
    return text[text.index(begin) + len(begin) + 1 : text.index(end) - 1]


def test_the_runbooks_throughput_tables_are_the_committed_measurements() -> None:
    """Sections 6.1 and 6.1b are benchmarks/gpu_report.py's renderings of the committed reports
    that each block names."""
    import re

    gpu_report = _gpu_report()
    text = RUNBOOK.read_text()
    block = _block(text, gpu_report.BEGIN, gpu_report.END)
    (folder,) = re.findall(r"Raw reports: `(results/gpu_throughput/[^`]+)/`", block)
    assert block == gpu_report.render(REPO / folder), f"run benchmarks/gpu_report.py {folder} --write"
    pairs = _block(text, gpu_report.PAIRS_BEGIN, gpu_report.PAIRS_END)
    folders = re.findall(r"`(results/gpu_throughput/[^`]+)/`", pairs.split("Raw reports:")[1].splitlines()[0])
    assert len(folders) >= 1
    assert pairs == gpu_report.render_pairs([REPO / f for f in folders]), \
        f"run benchmarks/gpu_report.py --pairs {' '.join(folders)} --write"
