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
#: The figures git tracks, which claims render alone draws (the README's and docs/claims.md's).
TRACKED_FIGURES = ("claims", "builtin_benchmark", "reference_run", "builtin_benchmark_trace")


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
    spec = RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke")

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


def _checkout_with_figures(root: Path, monkeypatch) -> dict[str, bytes]:
    """A scratch checkout whose figures/ holds the committed figures; the tracked ones' bytes."""
    from stamplib import paths

    (root / "figures").mkdir(parents=True)
    tracked = {}
    for name in TRACKED_FIGURES:
        tracked[name] = (REPO / "figures" / f"{name}.png").read_bytes()
        (root / "figures" / f"{name}.png").write_bytes(tracked[name])
    monkeypatch.setattr(paths, "_CHECKOUT", root)
    monkeypatch.delenv("STAMPLIB_FIGURES")
    monkeypatch.chdir(root)
    return tracked


def test_benchmark_render_of_an_empty_store_leaves_the_readmes_figure_alone(tmp_path: Path, monkeypatch,
                                                                            capsys) -> None:
    tracked = _checkout_with_figures(tmp_path, monkeypatch)
    (tmp_path / "results").mkdir()
    assert cli.main(["benchmark", "render", "--results", str(tmp_path / "results")]) == 0
    out, err = capsys.readouterr()
    assert f"wrote {tmp_path / 'build' / 'figures' / 'builtin_benchmark.png'}" in out
    assert "holds no quick-profile record" in err and err.count("\n") == 1
    assert {n: (tmp_path / "figures" / f"{n}.png").read_bytes() for n in tracked} == tracked
    assert (tmp_path / "build" / "figures" / "builtin_benchmark.png").is_file()


def test_reference_render_leaves_the_readmes_figure_alone(tmp_path: Path, monkeypatch, capsys) -> None:
    """The reference run's own figure lacked the built-in benchmark's dots, and overwrote the README's."""
    import shutil

    from stamplib import notebook_runner

    tracked = _checkout_with_figures(tmp_path, monkeypatch)
    source, copy = REPO / "results" / "reference", tmp_path / "results" / "reference"
    copy.mkdir(parents=True)
    names = manifest.record_names(source)[:2]
    for name in names:
        shutil.copyfile(source / name, copy / name)
        shutil.copyfile(source / name.replace(".json", ".outputs.npz"), copy / name.replace(".json", ".outputs.npz"))
    manifest.write(copy, {name: manifest.file_digest(copy / name) for name in names})
    monkeypatch.setattr(notebook_runner, "run_notebooks", lambda **kwargs: 0)
    assert cli.main(["reference", "render"]) == 0
    assert (tmp_path / "build" / "figures" / "reference_run.png").is_file()
    assert {n: (tmp_path / "figures" / f"{n}.png").read_bytes() for n in tracked} == tracked


def test_the_tracked_figures_are_the_ones_claims_render_draws() -> None:
    import subprocess

    from stamplib.evidence import pages

    assert set(pages.tracked_figures()) == set(TRACKED_FIGURES)
    listed = subprocess.run(["git", "ls-files", "figures"], cwd=REPO, capture_output=True, text=True).stdout.split()
    if listed:  # in a git checkout: every tracked figure is one of them
        assert {Path(p).stem for p in listed if p.endswith(".png")} == set(TRACKED_FIGURES)


@pytest.mark.parametrize("action", ["diagnose", "compute"])
def test_an_absent_source_network_is_refused_before_any_work(tmp_path: Path, monkeypatch, capsys, home,
                                                              action: str) -> None:
    """Network 1 of the reference run is not on this machine: one line naming it, its SHA-256 and the
    command that trains it, before a cell or a diagnostic is computed (not 136 s of work, two rewritten
    diagnostics and advice about Google Drive and ImageNet)."""
    import shutil

    from stamplib.evidence import networks
    from stamplib.experiments import grid

    monkeypatch.setenv("STAMPLIB_CHECKPOINT_PATH", "")  # no shared/models: only the empty home is searched
    store = tmp_path / "store"
    (store / "networks").mkdir(parents=True)
    shutil.copyfile(REPO / "results/reference/networks/ResNet18_10_jpeg_seed1.json",
                    store / "networks" / "ResNet18_10_jpeg_seed1.json")
    sha = json_field(store / "networks" / "ResNet18_10_jpeg_seed1.json", "sha256")

    def work(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("work was done before the absent network was refused")

    monkeypatch.setattr(networks, "diagnose", work)
    monkeypatch.setattr(grid, "run_grid", work)
    before = _files(store)
    assert cli.main(["claims", action, "--benchmark", "reference", "--design", "networks", "--replicates", "1",
                     "--results", str(store), "--data-root", str(tmp_path)]) == 2
    err = _one_error(capsys)
    assert "ResNet18_10_jpeg_seed1" in err and sha in err
    assert "python -m stamplib train-source --dataset cifar10_jpeg --seed 1" in err
    assert "Google Drive" not in err and "ImageNet" not in err and len(err) < 400, err
    assert _files(store) == before


def json_field(path: Path, name: str) -> Any:
    import json

    return json.loads(path.read_text())[name]


def test_claims_compute_methods_computes_only_those_in_the_order_named(tmp_path: Path, monkeypatch) -> None:
    from stamplib import paths
    from stamplib.experiments import grid

    _sealed_store(tmp_path / "results" / "builtin_benchmark")
    monkeypatch.setattr(paths, "_CHECKOUT", tmp_path)
    monkeypatch.delenv("STAMPLIB_RESULTS")
    seen: list = []
    monkeypatch.setattr(grid, "run_grid", lambda cells, context, options, **kw: seen.extend(cells) or grid.GridReport())
    assert cli.main(["claims", "compute", "--benchmark", "builtin", "--design", "streams", "--replicates", "0",
                     "--methods", "tent,source"]) == 0
    methods = [s.method for s in seen]
    assert methods and set(methods) == {"tent", "source"}
    assert methods == sorted(methods, key=["tent", "source"].index)  # every Tent cell before any Source cell
