"""The flags the command lines share (stamplib/flags.py): declared once, the same choices in
every command, NAME=VALUE read one way, checked at the edge before anything is computed; and
the Python entry points, edges too, build the same default context as the command line."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import stamplib
from stamplib import cli, flags, paths
from stamplib.data import downloads

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "stamplib"


def _boom(*args: object, **kwargs: object) -> None:
    raise AssertionError("work started before the bad input was refused")


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _with(flag: str) -> dict[str, argparse.Action]:
    return {name: p._option_string_actions[flag] for name, p in _commands().items() if flag in p._option_string_actions}


# -- declared once, the same everywhere ------------------------------------------------------------


def test_no_module_but_flags_declares_a_shared_flag() -> None:
    names = "--data-root|--device|--results|--profile|--set|--param|--stream"
    shared = re.compile(rf"""add_argument\(\s*["']({names})["']""")
    found = [f"{path.relative_to(REPO)}: {m.group(1)}" for path in sorted(PACKAGE.rglob("*.py"))
             for m in shared.finditer(path.read_text())]
    assert found and all(line.startswith("stamplib/flags.py") for line in found), found


def test_every_command_with_a_device_reads_cuda_n_and_refuses_the_rest_alike() -> None:
    devices = _with("--device")
    assert set(devices) == {"run", "notebooks", "train-source", "claims", "grid", "tune", "reference"}
    for command, action in devices.items():
        assert action.default == "cpu" and action.choices is None, command
        assert [action.type(d) for d in ("cpu", "cuda", "cuda:1", "cuda:12")] == ["cpu", "cuda", "cuda:1", "cuda:12"]
        for bad in ("gpu", "cuda:", "cuda:x", "cpu:0", "CUDA"):
            with pytest.raises(argparse.ArgumentTypeError, match=f"device must be cpu, cuda or cuda:N, got '{bad}'"):
                action.type(bad)


@pytest.mark.parametrize("command", [["run", "--method", "tent"], ["grid", "--all"], ["notebooks"],
                                     ["tune", "tent"], ["train-source", "--dataset", "digits"],
                                     ["claims", "compute", "--benchmark", "builtin", "--design", "networks"],
                                     ["claims", "compute", "--benchmark", "reference", "--cells", "core"]])
def test_cuda_n_parses_in_every_command(command: list[str]) -> None:
    assert cli.build_parser().parse_args([*command, "--device", "cuda:1"]).device == "cuda:1"


def test_a_notebook_takes_the_device_the_command_line_takes() -> None:
    from stamplib.experiments.parameters import NotebookParameters

    assert NotebookParameters.parse(profile="smoke", device="cuda:1", compute_missing=False).device == "cuda:1"
    with pytest.raises(ValueError, match="device must be cpu, cuda or cuda:N, got 'gpu'"):
        NotebookParameters.parse(profile="smoke", device="gpu")


def test_every_name_value_flag_reads_its_values_one_way() -> None:
    given = ["seeds=0,1,2", "methods=source,stamp", "compute_missing=False", "lr=0.001", "corruptions=all",
             "ratios=0.05,1/3", "sam=false"]
    expected = {"seeds": (0, 1, 2), "methods": "source,stamp", "compute_missing": False, "lr": 0.001,
                "corruptions": "all", "ratios": "0.05,1/3", "sam": "false"}
    parser = cli.build_parser()
    for argv, flag in ((["grid", "--all"], "param"), (["notebooks"], "param"), (["run", "--method", "x"], "set"),
                       (["run", "--method", "x"], "stream")):
        args = parser.parse_args([*argv, *(part for item in given for part in (f"--{flag}", item))])
        assert flags.pairs(getattr(args, flag)) == expected, (argv, flag)


def test_grid_and_notebooks_hand_the_same_parameters_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from stamplib import notebook_runner
    from stamplib.experiments import registry

    handed: list[dict[str, Any]] = []

    def stop(chosen: object, params: dict[str, Any], **kwargs: object) -> None:
        handed.append(dict(params))
        raise ValueError("stop here")

    monkeypatch.setenv("STAMPLIB_RESULTS", str(tmp_path))
    monkeypatch.setattr(registry, "check_parameter_names", stop)
    monkeypatch.setattr(notebook_runner, "run_notebooks", lambda **kw: handed.append(kw["extra"]) or 0)
    params = ["--param", "seeds=0,1", "--param", "compute_missing=False"]
    assert cli.main(["grid", "--notebook", "02", *params]) == 2
    assert cli.main(["notebooks", "--only", "02", *params]) == 0
    assert handed == [{"seeds": (0, 1), "compute_missing": False}] * 2


# -- checked at the edge -----------------------------------------------------------------------------


@pytest.mark.parametrize("item", ["lr=1e400", "lr=inf", "lr=-Infinity", "lr=nan", "lr=(1e-3, 1e400)",
                                  "lr=" + "9" * 400])
@pytest.mark.parametrize("flag", ["--set", "--param", "--stream"])
def test_a_number_that_is_not_finite_is_refused_by_the_parser(item: str, flag: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="is not a finite number: give a finite value"):
        flags.read_pair(item)
    command = {"--set": ["run", "--method", "stamp"], "--param": ["grid", "--all"],
               "--stream": ["run", "--method", "stamp"]}[flag]
    with pytest.raises(flags.UsageError, match=f"argument {flag}: .* is not a finite number"):
        cli.build_parser().parse_args([*command, flag, item])


def test_finite_numbers_and_text_pass() -> None:
    assert [flags.read_pair(t) for t in ("lr=1e-3", "capacity=64", "name=infinite", "x=(1, 2.5)", "flag=True")] == [
        ("lr", 1e-3), ("capacity", 64), ("name", "infinite"), ("x", (1, 2.5)), ("flag", True)]


def test_a_tuning_grid_that_is_not_finite_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from stamplib.experiments import tune

    monkeypatch.setattr(tune, "compute", _boom)
    assert cli.main(["tune", "stamp", "--grid", "lr=0.01,1e400", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: argument --grid: lr=1e400 is not a finite number") and err.count("\n") == 1


@pytest.mark.parametrize("command", [["run", "--method", "tent", "--profile", "smoke"],
                                     ["grid", "--notebook", "02", "--profile", "smoke"],
                                     ["tune", "tent", "--profile", "smoke"],
                                     ["claims", "compute", "--benchmark", "builtin", "--design", "streams",
                                      "--replicates", "0"],
                                     ["claims", "compute", "--benchmark", "reference", "--cells", "core"]])
def test_a_results_folder_that_cannot_be_written_is_refused_before_anything_is_computed(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stamplib.experiments import grid, reference, tune

    for module, name in ((stamplib, "run"), (grid, "run_grid"), (tune, "compute"), (reference, "compute"),
                         (reference, "cells_of")):
        monkeypatch.setattr(module, name, _boom)
    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(tmp_path))
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    assert cli.main([*command, "--results", str(blocked / "results")]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: cannot write to the results folder {blocked / 'results'} (Not a directory): give "
                   "--results a folder you can write to\n")


def test_the_results_folder_of_a_real_process_at_proc(tmp_path: Path) -> None:
    """As the issue typed it: one line, exit code 2, no traceback, no cell computed."""
    proc = subprocess.run([sys.executable, "-m", "stamplib", "run", "--method", "tent", "--results", "/proc/forbidden"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: cannot write to the results folder /proc/forbidden (")
    assert proc.stderr.count("\n") == 1


def test_a_dry_run_writes_nothing_and_needs_no_writable_folder(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    assert cli.main(["grid", "--notebook", "02", "--profile", "smoke", "--dry-run", "--device", "cuda:3",
                     "--results", str(blocked / "results")]) == 0
    assert "would compute" in capsys.readouterr().out


def test_writable_makes_the_folder_and_leaves_nothing_in_it(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "results"
    assert flags.writable(folder) == folder and folder.is_dir() and not list(folder.iterdir())


@pytest.mark.parametrize("argv", [["run"], ["run", "--method", "tent", "--bogus"], ["grid", "--all", "--profile",
                                                                                    "foo"],
                                  ["notebooks", "--device", "tpu"], ["nonsense"], ["claims", "judge", "--profile",
                                                                                   "smoke"]])
def test_a_bad_command_line_is_one_line_and_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "--help)" in err


def test_the_data_commands_share_the_data_root_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert downloads.main(["--list", "--data-root", str(tmp_path)]) == 0
    assert str(tmp_path) in capsys.readouterr().out


# -- run_all.sh --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "line"), [
    (["--profile", "foo"], "run_all.sh: --profile must be smoke, quick or full, got 'foo'"),
    (["--profile"], "run_all.sh: --profile needs a value"),
    (["--profile", "--site"], "run_all.sh: --profile needs a value"),
    (["--device", "tpu"], "run_all.sh: --device must be cpu, cuda or cuda:N, got 'tpu'"),
    (["--jobs", "many"], "run_all.sh: --jobs must be a whole number, got 'many'"),
    (["--executor", "slurm"], "run_all.sh: --executor must be local, submitit or submitit-local, got 'slurm'"),
    (["--data-root", "/nonexistent"], "run_all.sh: --data-root /nonexistent is not a folder"),
    (["--bogus"], "run_all.sh: unknown option --bogus"),
])
def test_run_all_stops_on_a_bad_option_with_one_line(argv: list[str], line: str) -> None:
    proc = subprocess.run(["bash", "run_all.sh", *argv], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"{line} (see ./run_all.sh --help)\n"


def test_run_all_takes_the_profiles_of_the_shared_flags() -> None:
    assert f'^({"|".join(flags.PROFILES)})$' in (REPO / "run_all.sh").read_text()


# -- the Python entry points build the default context the command line builds ----------------------


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[paths.RunContext]:
    """Every context RunContext.build returns, in order."""
    built: list[paths.RunContext] = []
    original = paths.RunContext.build.__func__

    def build(cls: type[paths.RunContext], *args: Any, **kwargs: Any) -> paths.RunContext:
        built.append(original(cls, *args, **kwargs))
        return built[-1]

    monkeypatch.setattr(paths.RunContext, "build", classmethod(build))
    return built


def test_run_without_a_context_builds_the_default_one(builds: list[paths.RunContext],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from stamplib.evaluation import runner

    received = []
    monkeypatch.setattr(runner, "run", lambda spec, context, **kw: received.append((context, kw)))
    spec = stamplib.RunSpec(method="source", corruptions=("none",), profile="smoke")
    stamplib.run(spec)
    stamplib.run(spec, builds[0], force=True)
    assert len(builds) == 1 and (builds[0].results, builds[0].device) == (paths.results_dir(), "cpu")
    assert received == [(builds[0], {"force": False, "progress": False}), (builds[0], {"force": True,
                                                                                       "progress": False})]


def test_explore_without_a_context_builds_the_default_one(
    builds: list[paths.RunContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    from stamplib import explorer

    received = []

    def stop(spec: object, device: str, **kwargs: Any) -> None:
        received.append((device, kwargs["data_root"]))
        raise RuntimeError("stop before the run")

    monkeypatch.setattr(explorer, "build_method", stop)
    with pytest.raises(RuntimeError, match="stop before the run"):
        stamplib.explore("stamp", profile="smoke")
    [context] = builds
    assert received == [(context.device, context.data_root)]


def test_the_command_line_builds_its_context_with_the_same_builder(builds: list[paths.RunContext]) -> None:
    assert cli.main(["doctor"]) == 0
    [context] = builds
    assert context.command == "python -m stamplib doctor"


def test_explore_stamp_works_in_a_fresh_process(tmp_path: Path) -> None:
    """A fresh kernel's first line, with no context: STAMP over the smoke profile's stream."""
    code = "import stamplib; e = stamplib.explore('stamp', profile='smoke'); print(e.num_batches, e.title)"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[1:3] == ["stamp", "on"]
