"""The run context (issue 36 item 3): configuration travels in a RunContext built at the edges;
only stamplib/paths.py, where the context is built, reads or writes stamplib's environment."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import stamplib
from stamplib import paths
from tests.support import context_for

PACKAGE = Path(stamplib.__file__).resolve().parent
BUILDER = PACKAGE / "paths.py"


def _environ_uses(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every write to os.environ in ``path`` (assignment, del, update, pop,
    setdefault, putenv) and every read (get, [], in)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        is_environ = (isinstance(node, ast.Attribute) and node.attr == "environ"
                      and isinstance(node.value, ast.Name) and node.value.id == "os")
        if is_environ:
            found.append((node.lineno, "os.environ"))
        if isinstance(node, ast.Attribute) and node.attr in ("putenv", "getenv", "unsetenv") and \
                isinstance(node.value, ast.Name) and node.value.id == "os":
            found.append((node.lineno, f"os.{node.attr}"))
    return found


def test_only_the_context_builder_touches_the_environment() -> None:
    offenders = {str(p.relative_to(PACKAGE)): uses for p in PACKAGE.rglob("*.py")
                 if p != BUILDER and (uses := _environ_uses(p))}
    assert not offenders, f"os.environ outside stamplib/paths.py (read it with paths.environment): {offenders}"
    assert _environ_uses(BUILDER)  # the scan does find it where it is


def test_the_scan_finds_a_write(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("import os\nos.environ['STAMPLIB_DATA_ROOT'] = '/x'\nos.putenv('A', 'b')\n")
    assert [line for line, _ in _environ_uses(module)] == [2, 3]


def test_a_context_is_built_from_arguments_then_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(tmp_path / "env-data"))
    monkeypatch.setenv("STAMPLIB_RESULTS", str(tmp_path / "env-results"))
    built = paths.RunContext.build()
    assert built.data_root == tmp_path / "env-data" and built.results == tmp_path / "env-results"
    (tmp_path / "data").mkdir()
    given = paths.RunContext.build(tmp_path / "data", results=tmp_path / "results")
    assert given.data_root == tmp_path / "data" and given.device == "cpu"
    with given.exported():  # for child processes (notebook kernels), then restored
        assert os.environ["STAMPLIB_DATA_ROOT"] == str(tmp_path / "data")
        assert paths.RunContext.build() == given
    assert paths.environment("STAMPLIB_DATA_ROOT") == str(tmp_path / "env-data")
    with pytest.raises(KeyError, match="not one of stamplib's environment variables"):
        paths.environment("STAMPLIB_DATAROOT")
    with pytest.raises(KeyError, match="not stamplib's environment variables"), paths.exported(HOME="/"):
        pass


def test_the_context_checks_what_it_carries_once_where_it_is_built(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="device must be cpu, cuda or cuda:N, got 'tpu'"):
        paths.RunContext.build(device="tpu")
    with pytest.raises(ValueError, match=f"data root {tmp_path / 'nowhere'} is not a folder"):
        paths.RunContext.build(tmp_path / "nowhere")
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(ValueError, match="torch sees no GPU on this machine; use --device cpu"):
        paths.RunContext.build(device="cuda:0")
    # A command's own default data root stands in for <home>/data, not for the environment's.
    monkeypatch.delenv("STAMPLIB_DATA_ROOT", raising=False)
    assert paths.RunContext.build(default_data_root=tmp_path / "shared").data_root == tmp_path / "shared"
    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(tmp_path / "env"))
    assert paths.RunContext.build(default_data_root=tmp_path / "shared").data_root == tmp_path / "env"


def test_the_data_root_is_passed_down_not_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, digits_model
) -> None:
    """run(spec, context) hands the context's data root to every stream it builds, whatever the
    environment names; a data set read from it names it when a file is missing."""
    from stamplib import RunSpec, run
    from stamplib.evaluation import assembly, runner

    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(tmp_path / "elsewhere"))
    seen = []
    build = runner.build_stream
    monkeypatch.setattr(runner, "build_stream", lambda spec, corruption, severity=None, data_root=None: (
        seen.append(data_root), build(spec, corruption, severity=severity, data_root=data_root))[1])
    run(RunSpec(method="source", profile="smoke"), context_for(tmp_path / "results", data_root=tmp_path / "given"))
    assert seen == [tmp_path / "given"]
    spec = RunSpec(method="source", dataset="cifar10", outlier_set="none", corruptions=("none",), profile="smoke")
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "given")):
        assembly.build_stream(spec, data_root=tmp_path / "given")


def test_below_the_edges_no_function_falls_back_to_a_default_place(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """Without a data root, a data set that ships with the package still streams, and one read
    from files is one clear error, never the default folder the environment names."""
    from stamplib import data
    from stamplib.data import loaders

    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(tmp_path))
    assert data.build_stream(data.CorruptionStreamSpec(
        "digits", "noise", "gaussian_noise", max_id=16)).labels.numel() == 20
    for read in (lambda: data.build_stream(data.CorruptionStreamSpec("cifar10", "none", "none")),
                 lambda: data.source_train("cifar10", None, limit=4),
                 lambda: data.check_available("cifar10_c", ("fog",)),
                 lambda: loaders.load_cifar("cifar10", "test", None)):
        with pytest.raises(paths.NoDataRoot, match="read from a data root, and none was given: pass --data-root"):
            read()
    # The source names no default at all: the context's builder is the only place that has one.
    offenders = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                       if p != BUILDER and ("data_root(None)" in p.read_text() or "paths.data_root(" in p.read_text()))
    assert not offenders, offenders


def test_a_read_only_folder_caches_its_images_under_the_given_data_root(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    """The decoded copy of an image folder whose parent cannot be written goes under the data
    root the caller passed (it went under the default one, whatever was given)."""
    from stamplib.data import loaders

    folder = tmp_path / "readonly" / "images"
    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(tmp_path / "elsewhere"))
    monkeypatch.setattr(loaders.os, "access", lambda path, mode: Path(path) != folder.parent)
    cached = loaders._cache_path(folder, "-r32", ".npz", tmp_path / "given")
    assert cached is not None and cached.parent == tmp_path / "given" / "cache"
    assert loaders._cache_path(folder, "-r32", ".npz", None) is None  # no data root: no copy, no default
    assert loaders._cache_path(tmp_path / "images", "", ".npz", None) == tmp_path / "images.stamplib.npz"


def test_the_record_names_the_command_the_context_carries(tmp_path: Path, digits_model) -> None:
    """The command line's command reaches a record in the run context (grid workers get the
    context as an argument), not through the environment."""
    from stamplib import RunSpec, run

    spec = RunSpec(method="source", corruptions=("none",), profile="smoke")
    record = run(spec, context_for(tmp_path / "a", command="python -m stamplib run --method source"))
    assert record.provenance.command == "python -m stamplib run --method source"
    own = run(spec, context_for(tmp_path / "b")).provenance.command
    assert own.split()[0].startswith("python") and "stamplib run" not in own
    assert "STAMPLIB_GRID_FAULT" not in paths.ENVIRONMENT  # the grid's fault injection is an argument
