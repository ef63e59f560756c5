"""Notebooks rendered several at once (run_all.sh after the grid) report like one at a time: in
the notebooks' order, each outcome with its notebook, a failure with its cell."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from stamplib import notebook_runner


def _notebook(path: Path, body: str) -> Path:
    parameters = nbformat.v4.new_code_cell('profile = "quick"  # which profile\ndevice = "cpu"  # where')
    parameters.metadata["tags"] = ["parameters"]
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook = nbformat.v4.new_notebook(cells=[parameters, nbformat.v4.new_code_cell(body)],
                                        metadata={"kernelspec": kernel})
    nbformat.write(notebook, path)
    return path


def test_notebooks_rendered_in_two_processes_report_in_order(tmp_path, monkeypatch, capsys) -> None:
    source = tmp_path / "notebooks"
    source.mkdir()
    chosen = [
        _notebook(source / "01_slow.ipynb", "import time\ntime.sleep(2)\nprint(profile, 'one')"),
        _notebook(source / "02_fails.ipynb", "raise RuntimeError('the second notebook breaks')"),
        _notebook(source / "03_fast.ipynb", "print(profile, 'three')"),
    ]
    monkeypatch.setattr(notebook_runner, "discover", lambda only=(): chosen)
    built = tmp_path / "built"
    assert notebook_runner.run_notebooks("smoke", build_dir=built, jobs=2) == 1
    out = capsys.readouterr().out
    summary = out[out.index("summary"):].splitlines()[1:4]
    assert [line.split()[:2] for line in summary] == [["ok", "01_slow"], ["FAILED", "02_fails"], ["ok", "03_fast"]]
    assert "cell 3: RuntimeError: the second notebook breaks" in summary[1]  # after papermill's injected one
    assert "2 passed, 1 failed" in out
    assert "smoke one" in (built / "01_slow.ipynb").read_text()  # the parameters reached the kernel


def test_jobs_must_be_at_least_one(tmp_path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        notebook_runner.run_notebooks("smoke", build_dir=tmp_path, jobs=0)
