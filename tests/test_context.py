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
    built = paths.RunContext.build(device="cuda")
    assert built.data_root == tmp_path / "env-data" and built.results == tmp_path / "env-results"
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


def test_the_data_root_is_passed_down_not_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, digits_model
) -> None:
    """run(spec, data_root=...) hands that folder to every stream it builds, whatever the
    environment names; a data set read from it names it when a file is missing."""
    from stamplib import RunSpec, run
    from stamplib.evaluation import assembly, runner
    from stamplib.evaluation.store import ResultsStore

    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(tmp_path / "elsewhere"))
    seen = []
    build = runner.build_stream
    monkeypatch.setattr(runner, "build_stream", lambda spec, corruption, severity=None, data_root=None: (
        seen.append(data_root), build(spec, corruption, severity=severity, data_root=data_root))[1])
    run(RunSpec(method="source", profile="smoke"), context_for(tmp_path / "results"), data_root=tmp_path / "given")
    assert seen == [tmp_path / "given"]
    spec = RunSpec(method="source", dataset="cifar10", outliers="none", corruptions=("none",), profile="smoke")
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "given")):
        assembly.build_stream(spec, data_root=tmp_path / "given")
