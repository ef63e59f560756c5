"""Committed evidence changes only through its own door (issue 83): a command that is not meant to
write into a committed store refuses to, in one line, unless its command line says so; the commands
whose purpose it is say so in a line; tracked figures are drawn by ``claims render`` alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stamplib
from stamplib import cli
from stamplib.evaluation import manifest
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore

REPO = Path(__file__).resolve().parents[2]


def _sealed_store(root: Path) -> Path:
    """An empty store with a manifest: committed evidence as far as a command can tell."""
    root.mkdir(parents=True)
    manifest.write(root, {})
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", [
    ["run", "--method", "source", "--dataset", "digits", "--profile", "smoke"],
    ["grid", "--notebook", "02", "--profile", "smoke"],
    ["tune", "tent", "--dataset", "digits", "--profile", "smoke", "--grid", "lr=0.001"],
])
def test_a_command_does_not_write_into_a_committed_store_unless_told(tmp_path: Path, monkeypatch, capsys,
                                                                     command: list[str]) -> None:
    store = _sealed_store(tmp_path / "results" / "builtin_benchmark")
    before = _files(store)

    def computed(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a cell was computed")

    monkeypatch.setattr(stamplib, "run", computed)
    from stamplib.experiments import grid, tune

    monkeypatch.setattr(grid, "run_grid", computed)
    monkeypatch.setattr(tune, "compute", computed)
    assert cli.main([*command, "--results", str(store)]) == 2
    err = _one_error(capsys)
    assert f"{store} is committed evidence" in err and "--into-committed" in err
    assert _files(store) == before


def test_run_into_a_committed_store_when_told_says_so_and_lists_the_record(tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    from stamplib.evaluation import runner

    store = _sealed_store(tmp_path / "store")
    spec = RunSpec(method="source", dataset="digits", outliers="noise", profile="smoke")

    def run(spec: RunSpec, context: Any, **kwargs: Any) -> Record:
        return ResultsStore(context.results).put(Record.from_json({"key": spec.key(), "spec": spec.to_dict(),
                                                                  "mean": {}}))

    monkeypatch.setattr(stamplib, "run", run)
    monkeypatch.setattr(runner, "summary_lines", lambda record: [])
    assert cli.main(["run", "--method", "source", "--dataset", "digits", "--profile", "smoke", "--results",
                     str(store), "--into-committed"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"note: writing into the committed evidence store {store}")
    assert list(manifest.read(store)) == [ResultsStore(store).path(spec).name]


def test_claims_compute_says_it_writes_into_its_committed_store(tmp_path: Path, monkeypatch, capsys) -> None:
    from stamplib import paths
    from stamplib.experiments import grid

    _sealed_store(tmp_path / "results" / "builtin_benchmark")
    monkeypatch.setattr(paths, "_CHECKOUT", tmp_path)
    monkeypatch.delenv("STAMPLIB_RESULTS")
    monkeypatch.setattr(grid, "run_grid", lambda cells, context, options, **kw: grid.GridReport())
    assert cli.main(["claims", "compute", "--benchmark", "builtin", "--design", "streams", "--replicates", "0"]) == 0
    assert "note: writing into the committed evidence store " in capsys.readouterr().err
