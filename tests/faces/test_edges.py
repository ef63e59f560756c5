"""Clean edges: ``--help`` at once and without torch, Ctrl-C and a closed pipe
without a traceback, a folder named like a record skipped, a huge seed and a text file given as
an .npz refused in one line that says what is wrong, and progress in a notebook that does not
look like an error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import stamplib
from stamplib import cli, explorer, models, notebook_runner, validation
from stamplib.data import loaders, lookup, streams
from stamplib.evaluation.store import ResultsStore
from tests.faces.test_notebook_runner import _notebook

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
HEAVY = ("torch", "numpy", "pandas", "sklearn", "matplotlib")


def _imported(stderr: str) -> set[str]:
    """The top-level modules ``python -X importtime`` reports on ``stderr``."""
    return {line.split("|")[-1].strip().split(".")[0] for line in stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_the_top_level_help_is_written_for_users_and_imports_no_torch() -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "stamplib", "--help"], capture_output=True,
                          text=True, env=ENV, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not _imported(done.stderr) & set(HEAVY), sorted(_imported(done.stderr) & set(HEAVY))
    assert "stamplib" in _imported(done.stderr)  # the check reads the import report it thinks it reads
    help_text = done.stdout
    assert "``" not in help_text and ":meth:" not in help_text  # no internal docstring
    for name in cli.COMMANDS:  # one line each, what it does
        assert len([ln for ln in help_text.splitlines() if ln.startswith(f"  {name} ")]) == 1, name
    assert "examples:" in help_text and "python -m stamplib run --method stamp" in help_text


def test_the_listing_names_every_command_once() -> None:
    commands = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert list(commands.choices) == [*cli.COMMANDS, *cli.MAINTAINER_COMMANDS]
    assert all(len(line) <= 54 for line in cli.COMMANDS.values())  # one line beside the name in 80 columns


def test_every_commands_help_works_without_importing_torch() -> None:
    probe = """
import contextlib, io, json, sys
from stamplib import cli
helps = {}
for argv in [[name] for name in cli.COMMANDS] + [["course", "release"], ["course", "grade"]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli.main([*argv, "--help"])
        except SystemExit as exit:
            helps[" ".join(argv)] = (exit.code, out.getvalue())
print(json.dumps({"helps": helps, "heavy": [m for m in sys.argv[1:] if m in sys.modules]}))
"""
    done = subprocess.run([sys.executable, "-c", probe, *HEAVY], capture_output=True, text=True, env=ENV, cwd=REPO,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["heavy"] == []
    assert len(found["helps"]) == len(cli.COMMANDS) + 2
    for argv, (code, text) in found["helps"].items():
        assert code == 0 and text.startswith(f"usage: python -m stamplib {argv} "), (argv, text[:200])
    assert "compute one RunSpec and store its record" in found["helps"]["run"][1]  # what the command does


def test_import_stamplib_stays_light_and_loads_the_rest_on_first_use() -> None:
    probe = ("import sys, stamplib; light = 'torch' not in sys.modules; spec = stamplib.RunSpec; "
             "print(light, spec.__module__, 'torch' in sys.modules, stamplib.data.__name__)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=ENV, cwd=REPO,
                          timeout=120)
    assert done.stdout.split() == ["True", "stamplib.evaluation.spec", "True", "stamplib.data"], done.stderr[-2000:]
    with pytest.raises(AttributeError, match="no attribute 'nothing_of_that_name'"):
        stamplib.nothing_of_that_name  # noqa: B018


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(stamplib, "run", interrupted)
    assert cli.main(["run", "--method", "tent", "--results", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted: ") and "run the same command again" in lines[0]


@pytest.mark.slow
def test_ctrl_c_during_a_real_run(tmp_path: Path) -> None:
    """SIGINT once the cell is computing: one line, exit 130, nothing half-written."""
    proc = subprocess.Popen([sys.executable, "-m", "stamplib", "run", "--method", "stamp", "--profile", "smoke",
                             "--force", "--results", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=ENV, cwd=REPO)
    seen, deadline = b"", time.monotonic() + 240
    while b"%|" not in seen and time.monotonic() < deadline and proc.poll() is None:  # the bar: computing
        seen += os.read(proc.stderr.fileno(), 4096)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    text = (seen + err).decode()
    assert proc.returncode == 130, text[-2000:]
    lines = [ln for ln in text.replace("\r", "\n").splitlines() if ln.strip() and "%|" not in ln]
    assert lines == ["interrupted: 0 of 1 cells done; its finished corruptions are kept; run the same command again "
                     "to go on"], lines
    # Lock files stay by design (unlinking a flock file races its next taker); they are empty.
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and "partial" not in p.parts
                and not (p.suffix == ".lock" and p.stat().st_size == 0)]


def test_a_closed_pipe_is_silent() -> None:
    """The reader has gone (``python -m stamplib methods | head -1``): no BrokenPipeError, not even
    at the interpreter's last flush, and the exit of a program that SIGPIPE ended. A command
    that prints much and imports nothing heavy stands in for ``methods`` (test below, slow)."""
    probe = """
import sys
from stamplib import cli

def many_lines(args):
    print("\\n".join(map(str, range(100_000))))
    return 0

def parser(sub):
    sub.add_parser("methods", help="many lines").set_defaults(func=many_lines)

cli.PARSERS = tuple(parser if add is cli.setup.methods_parser else add for add in cli.PARSERS)
sys.exit(cli.main(["methods"]))
"""
    proc = subprocess.Popen([sys.executable, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=ENV, cwd=REPO)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == "", err


def test_a_closed_pipe_in_process_is_exit_141(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    def closed(*args: object, **kwargs: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(stamplib, "run", closed)
    assert cli.main(["run", "--method", "tent"]) == 141
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_methods_into_a_closed_pipe_is_silent() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "stamplib", "methods"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV, cwd=REPO)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=240) == 141 and "Error" not in err, err


def test_a_folder_named_like_a_record_is_skipped_with_a_warning(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.json").mkdir()
    with pytest.warns(UserWarning, match=r"x\.json is not a file, so not a record: skipped"):
        assert ResultsStore(tmp_path).records() == []
    assert (tmp_path / "x.json").is_dir()  # skipped, not moved
    with pytest.warns(UserWarning, match="not a record"):
        assert cli.main(["claims", "judge", "--results", str(tmp_path), "--benchmark", "builtin"]) == 0
    assert "pending" in capsys.readouterr().out


@pytest.mark.parametrize("seed", ["99999999999999999999", str(2**63), "-1", "1.5"])
def test_a_seed_out_of_range_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                         seed: str) -> None:
    monkeypatch.setattr(models, "source_model", lambda *a, **k: pytest.fail("computing began"))
    assert cli.main(["run", "--method", "tent", "--seed", seed]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: argument --seed: seed must be a non-negative integer up to 2**63 - 1")
    assert err.count("\n") == 1 and "Overflow" not in err


def test_the_largest_seed_seeds_every_generator_it_reaches() -> None:
    """The range is the code's: the largest seed, with the offsets the streams add to it, still
    seeds torch's generators (2**63 would too, but not 2**64), and a RunSpec takes it."""
    largest = validation.MAX_SEED
    assert stamplib.RunSpec.make("tent", seed=largest).seed == largest
    with pytest.raises(ValueError, match="up to 2"):
        stamplib.RunSpec.make("tent", seed=largest + 1)
    order = streams.stream_order(torch.arange(10) % 3, 4, largest)
    assert sorted(order.tolist()) == list(range(14))
    torch.Generator().manual_seed(largest + streams._INTERLEAVE_SEED)
    np.random.default_rng([largest, 0, 5, 0])
    with pytest.raises((ValueError, RuntimeError)):
        torch.Generator().manual_seed(2**64)  # the bound that a larger range would meet


@pytest.mark.parametrize(("content", "said"), [
    (b"images,labels\n1,2\n", "it looks like text"),
    (b"", "it is empty"),
    (b"\x93NUMPY\x01\x00", "it is a single .npy array"),
    (bytes(range(256)) * 2, "it is binary, not a zip archive"),
])
def test_a_file_that_is_no_npz_says_what_it_is(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "data.npz"
    path.write_bytes(content)
    for load in (lambda: lookup.dataset(f"npz:{path}"), lambda: loaders.load_npz(path)):
        with pytest.raises(loaders.DatasetFormatError) as caught:
            load()
        assert f"{path} is not an .npz archive ({said})" in str(caught.value)
        assert "pickle" not in str(caught.value)


class _Kernel:
    kernel = object()  # what a Jupyter kernel's shell has and a terminal's IPython has not


def test_the_explorers_progress_goes_to_stdout_in_a_kernel(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert explorer.progress_file() is sys.stderr  # a script: its stdout stays its own
    ipython = types.SimpleNamespace(get_ipython=lambda: _Kernel())
    monkeypatch.setattr(explorer, "_ipython", lambda: ipython)
    assert explorer.progress_file() is sys.stdout  # JupyterLab draws stderr in a pink box
    stamplib.explore("tent", profile="smoke", max_id=64, reuse=False)
    out, err = capsys.readouterr()
    assert "exploring tent" in out and "batches" in out
    assert "exploring" not in err and "batches" not in err


def test_the_notebook_runner_starts_kernels_without_the_tcp_warning(tmp_path: Path,
                                                                    capfd: pytest.CaptureFixture[str]) -> None:
    nb = _notebook(tmp_path / "01_tiny.ipynb", "print(profile, 'ran')")
    run = notebook_runner.execute(nb, tmp_path / "built", {"profile": "smoke"}, progress=False)
    assert run.error is None and "smoke ran" in run.output.read_text()
    err = capfd.readouterr().err
    assert "without encryption" not in err, err  # ipykernel's warning at every plain-TCP start
