"""The command line: every command's happy path, and bad input as one line and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import stamplib
from stamplib import cli, models
from stamplib.cli import main
from stamplib.data import downloads
from stamplib.experiments import registry
from tests.data.files import write_cifar_c

REPO = Path(__file__).resolve().parents[2]


def _boom(*args: object, **kwargs: object) -> None:
    raise AssertionError("heavy work started before the bad input was refused")


def test_cli_run_and_doctor(tmp_path):
    env = {**os.environ, "STAMPLIB_RESULTS": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "stamplib", "run", "--method", "source", "--corruptions", "none",
         "--profile", "smoke"], capture_output=True, text=True, env=env, check=True,
    ).stdout
    assert "mean" in out and len(list(tmp_path.glob("*.json"))) == 1
    bad = subprocess.run([sys.executable, "-m", "stamplib", "run", "--method", "stampp"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "available" in bad.stderr
    doctor = subprocess.run([sys.executable, "-m", "stamplib", "doctor"], capture_output=True, text=True,
                            env=env, check=True).stdout
    assert "digits" in doctor and "methods:" in doctor


def test_cli_run_under_the_realistic_protocol(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--method", "tent", "--profile", "smoke", "--relative-speed", "2", "--results", str(tmp_path)]
    assert main(argv) == 0
    assert "realistic protocol: C(g) = 2 (fixed), adapted on 1 of 2 batches" in capsys.readouterr().out



@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--method", "tent", "--dataset", "mnist"], "unknown dataset 'mnist'; choose one of"),
        (["--method", "tent", "--outlier-set", "cifar"], "unknown outlier set 'cifar'; choose one of"),
        (["--method", "tent", "--corruptions", "gaussian_noise,fogg"], "unknown corruption(s) 'fogg'; choose from"),
        (["--method", "tent", "--severity", "6"], "severity must be an integer from 1 to 5"),
        (["--method", "tent", "--outlier-ratio", "1.0"], "must be in [0, 1)"),
        (["--method", "tent", "--seed", "-1"], "seed must be a non-negative integer"),
        (["--method", "tent", "--set", "lr"], "expected NAME=VALUE, got 'lr'"),
        (["--method", "tent", "--set", "learning_rate=0.1"], "unknown hyperparameter(s) ['learning_rate']"),
        (["--method", "tent", "--relative-speed", "-3"], "relative_speed is C(g) of the realistic protocol"),
        (["--method", "stamp", "--set", "lr=1e400"], "argument --set: lr=1e400 is not a finite number"),
        (["--method", "stamp", "--set", "lr=nan"], "argument --set: lr=nan is not a finite number"),
        (["--method", "stamp", "--set", "alpha=(0.1, 1e400)"], "alpha=(0.1, 1e400) is not a finite number"),
        (["--method", "stamp", "--set", "capacity=" + "9" * 400], "is not a finite number"),
        (["--method", "tent", "--stream", "dirichlet=-inf"], "argument --stream: dirichlet=-inf is not a finite"),
        (["--method", "tent", "--set", "lr=0.1", "--set", "lr=0.2"], "lr given twice (0.1 and 0.2): give it once"),
        (["--method", "tent", "--device", "gpu"], "argument --device: device must be cpu, cuda or cuda:N, got 'gpu'"),
        (["--method", "tent", "--profile", "foo"], "argument --profile: invalid choice: 'foo'"),
        (["--method", "tent", "--results", "/proc/forbidden"], "cannot write to the results folder /proc/forbidden"),
        # Typed overrides: each value against its field's type, then the config's own checks.
        (["--method", "stamp", "--set", "lr=abc"], "hyperparameter 'lr' of 'stamp' takes a number, got 'abc'"),
        (["--method", "stamp", "--set", "lr=-1"], "lr=-1.0 out of range for 'stamp': lr and alpha must be positive"),
        (["--method", "stamp", "--set", "num_views=0"], "num_views, capacity and period must be at least 1"),
        (["--method", "stamp", "--set", "capacity=2.5"], "'capacity' of 'stamp' takes an integer, got 2.5"),
        (["--method", "stamp", "--set", "sam=maybe"], "'sam' of 'stamp' takes true or false, got 'maybe'"),
        (["--method", "stamp", "--set", "weighting=mean"], "takes one of adaptive, static, eata, none, got 'mean'"),
    ],
)
def test_cli_run_bad_input_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], match: str
) -> None:
    monkeypatch.setattr(models, "source_model", _boom)
    assert cli.main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and match in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_download_failure_is_one_line_but_bugs_keep_their_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def offline(*args: object, **kwargs: object) -> None:
        raise downloads.DownloadError("could not download http://x/y.tar: offline. To continue later, rerun")

    monkeypatch.setattr(stamplib, "run", offline)
    assert cli.main(["run", "--method", "tent"]) == 2
    assert capsys.readouterr().err == "error: could not download http://x/y.tar: offline. To continue later, rerun\n"

    def bug(*args: object, **kwargs: object) -> None:
        raise RuntimeError("CUDA error: an illegal memory access")

    monkeypatch.setattr(stamplib, "run", bug)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        cli.main(["run", "--method", "tent"])


def test_cli_bad_name_in_a_real_process_has_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "STAMPLIB_RESULTS": str(tmp_path), "OMP_NUM_THREADS": "1"}
    bad = subprocess.run([sys.executable, "-m", "stamplib", "run", "--method", "tent", "--corruptions", "fogg"],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert bad.returncode == 2
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: unknown corruption") and "contrast" in lines[0]
    assert not list(tmp_path.iterdir())


def test_cli_deterministic_flag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, digits_model: torch.nn.Module,
                                capsys: pytest.CaptureFixture[str]) -> None:
    from stamplib import determinism

    calls = []
    monkeypatch.setattr(determinism, "set_deterministic", lambda *a, **k: calls.append(True))
    argv = ["run", "--method", "source", "--corruptions", "none", "--profile", "smoke", "--results", str(tmp_path)]
    assert cli.main(argv) == 0 and calls == []
    assert cli.main([*argv, "--force", "--deterministic"]) == 0 and calls == [True]



def test_dry_run_counts_every_notebook_of_the_full_profile(tmp_path, capsys):
    assert main(["grid", "--all", "--profile", "full", "--dry-run", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    distinct = {}
    for nb in registry.EXPERIMENTS:
        specs = registry.plan(nb, profile="full").specs
        distinct.update((s.key(), s) for s in specs)
        row = next(line.split() for line in out.splitlines() if line.startswith(nb))
        assert row[1:] == [str(len(specs)), "0", "0", str(len(specs)), "0"], row
    total = next(line.split() for line in out.splitlines() if line.startswith("distinct cells"))
    assert int(total[2]) == len(distinct) == len(registry.cells(list(registry.EXPERIMENTS), profile="full"))
    assert "would compute" in out and not tmp_path.joinpath(".grid").exists()  # a dry run writes nothing


def test_cli_grid_computes_the_missing_cells_of_a_notebook(tmp_path, capsys, digits_model):
    argv = ["grid", "--notebook", "02", "--profile", "smoke", "--param", "methods=source,bn_stats",
            "--results", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "done 2, missing 0" in out
    assert main([*argv, "--dry-run"]) == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("02_"))
    assert row[1:] == ["2", "2", "0", "0", "0"]
    assert main([*argv, "--param", "method=tent"]) == 2  # a misspelt parameter is refused
    assert "no chosen notebook takes it" in capsys.readouterr().err



def test_cli_names_the_missing_files_of_a_partial_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(tmp_path))
    write_cifar_c(tmp_path, per=10, corruptions=("gaussian_noise",))
    monkeypatch.setattr(models, "source_model", _boom)
    assert cli.main(["run", "--method", "source", "--dataset", "cifar10_c", "--corruptions", "fog"]) == 2
    assert "fog.npy" in capsys.readouterr().err


def test_cli_methods_lists_a_datasets_hyperparameters(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["methods", "--dataset", "cifar10_jpeg_8_2"]) == 0
    out = capsys.readouterr().out
    assert "TentConfig(lr=0.0001)" in out  # the cifar10_c_8_2 hyperparameter set of the registry entry
    assert cli.main(["methods", "--dataset", "mnist"]) == 2
    assert "unknown dataset 'mnist'" in capsys.readouterr().err


# -- the context checks what it carries, once, at the edge (issue 40) ---------------------------------------


@pytest.fixture
def a_stored_record(tmp_path: Path, digits_model: torch.nn.Module) -> list[str]:
    """The flags of a smoke cell whose record is in the store: without --force it would be
    returned without looking at the device or the data."""
    argv = ["run", "--method", "stamp", "--profile", "smoke", "--dataset", "digits", "--corruptions", "none",
            "--results", str(tmp_path / "results")]
    assert cli.main(argv) == 0
    return argv


@pytest.mark.parametrize("force", [["--force"], []])
def test_a_device_torch_does_not_have_is_one_line_and_exit_2(
    a_stored_record: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], force: list[str]
) -> None:
    capsys.readouterr()
    monkeypatch.setattr(stamplib, "run", _boom)
    assert cli.main([*a_stored_record, "--device", "tpu", *force]) == 2
    assert capsys.readouterr().err == ("error: argument --device: device must be cpu, cuda or cuda:N, got 'tpu' "
                                       "(see python -m stamplib run --help)\n")


@pytest.mark.parametrize("force", [["--force"], []])
def test_cuda_on_a_machine_without_a_gpu_is_one_line_and_exit_2(
    a_stored_record: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], force: list[str]
) -> None:
    capsys.readouterr()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # this machine, whatever runs the test
    monkeypatch.setattr(stamplib, "run", _boom)
    assert cli.main([*a_stored_record, "--device", "cuda", *force]) == 2
    assert capsys.readouterr().err == "error: device 'cuda' but torch sees no GPU on this machine; use --device cpu\n"


@pytest.mark.parametrize("force", [["--force"], []])
def test_a_data_root_that_is_no_folder_is_one_line_and_exit_2(
    a_stored_record: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], force: list[str]
) -> None:
    capsys.readouterr()
    monkeypatch.setattr(stamplib, "run", _boom)
    assert cli.main([*a_stored_record, "--data-root", "/nonexistent", *force]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: data root /nonexistent is not a folder: give --data-root the folder")
    assert err.count("\n") == 1


def test_the_three_cases_are_one_line_in_a_real_process(tmp_path: Path) -> None:
    """As a new user types them: no traceback from torch, exit code 2."""
    env = {**os.environ, "STAMPLIB_RESULTS": str(tmp_path), "OMP_NUM_THREADS": "1"}
    cases = [["--device", "tpu"], ["--data-root", "/nonexistent"]]
    if not torch.cuda.is_available():
        cases.append(["--device", "cuda"])
    for flags in cases:
        proc = subprocess.run([sys.executable, "-m", "stamplib", "run", "--method", "stamp", "--profile", "smoke",
                               "--force", *flags], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (flags, proc.stderr)


def test_the_stream_flags_make_one_stream_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stamplib.data import StreamSpec
    from stamplib.evaluation import runner

    seen = []
    monkeypatch.setattr(stamplib, "run", lambda spec, context, **kw: seen.append(spec))
    monkeypatch.setattr(runner, "summary_lines", lambda record: [])  # no record: the spec is what is checked
    base = ["run", "--method", "tent", "--profile", "smoke", "--results", str(tmp_path)]
    assert cli.main([*base, "--corruptions", "fog,snow", "--mixed-domains", "--batch-size", "16"]) == 0
    assert cli.main([*base, "--relative-speed", "3", "--stream", "dirichlet=0.1"]) == 0
    assert cli.main([*base, "--stream", "schedule=continual", "--stream", "outlier_burst=8"]) == 0
    assert [s.stream for s in seen] == [StreamSpec(schedule="mixed", batch_size=16),
                                        StreamSpec(realistic=True, relative_speed=3, dirichlet=0.1),
                                        StreamSpec(schedule="continual", outlier_burst=8)]
    assert cli.main([*base, "--batch-size", "8", "--stream", "batch_size=4"]) == 2
    assert cli.main([*base, "--continual", "--gradual"]) == 2
    assert cli.main([*base, "--corruptions", "fog,snow", "--mixed-domains", "--stream", "outlier_burst=8"]) == 2


def test_a_record_computed_from_the_command_line_names_the_command(tmp_path: Path, digits_model) -> None:
    argv = ["run", "--method", "source", "--profile", "smoke", "--corruptions", "none", "--results", str(tmp_path),
            "--json"]
    assert cli.main(argv) == 0
    [record] = [p for p in tmp_path.glob("*.json")]
    assert f'"command": "python -m stamplib {" ".join(argv)}"' in record.read_text()


def test_an_old_flag_still_works_with_one_line_naming_the_new(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(models, "source_model", _boom)
    assert cli.main(["run", "--method", "tent", "--ratio", "1.0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "note: `--ratio` is now `--outlier-ratio`; the old spelling goes in the next release"
    assert err[1].startswith("error: outlier_ratio") and len(err) == 2
