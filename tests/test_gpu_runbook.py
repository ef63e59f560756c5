"""The GPU runbook (docs/gpu_runbook.md): ./run_all.sh --help points to it, its grid
commands are ones the command line accepts, planning the cells the runbook counts, and the
before/after reports it points to still render."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from stamplib import cli
from tests.support import load_script

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
    return load_script("benchmarks/gpu_report.py")


def test_the_before_and_after_reports_still_render() -> None:
    """The runbook points to benchmarks/gpu_report.py for the committed before/after folders
    (its table of expected rates is stamplib.report.guides', checked in tests/test_docs.py)."""
    import json

    gpu_report = _gpu_report()
    measured = REPO / "results" / "gpu_throughput"
    single = gpu_report.render(measured / "2026-11-26-h200")
    assert "before **1.87 h**, after **1.62 h**" in single and "| stamp | 935 | 991 |" in single
    paired = json.loads((measured / "2026-11-27-h200-issue51" / "findings.json").read_text())["folders"]
    pairs = gpu_report.render_pairs([REPO / folder for folder in paired])
    assert "| **Table 1, CIFAR-10 half (h)** | 1.72 | 1.58 |" in pairs and "| owttt | 1,633 | 2,552 | fails |" in pairs
    text = RUNBOOK.read_text()
    assert "benchmarks/gpu_report.py" in text and "findings.json" in text


def test_a_report_written_after_the_rename_renders_as_the_committed_ones() -> None:
    """A throughput row names its hyperparameter set ``hyperparameter_set``; the committed reports,
    written before the rename, call it ``setting``: the runbook's table reads both alike."""
    import json

    from stamplib.report import guides

    measured = REPO / "results" / "gpu_throughput"
    committed = [(name, json.loads((measured / name).read_text())) for name in guides.GPU_REPORTS]
    assert all("setting" in row and "hyperparameter_set" not in row for _, r in committed for row in r["rows"])
    renamed = [(name, {**report, "rows": [{("hyperparameter_set" if k == "setting" else k): v for k, v in row.items()}
                                          for row in report["rows"]]}) for name, report in committed]
    assert guides.gpu_table(renamed) == guides.gpu_table(committed)
    assert "| STAMP | 717 | 126 | 769 | 1,527 |" in guides.gpu_table(renamed)  # every column found its rows
