"""Bring your own method (issue 18 item 5): the template, copied into a package of the user's,
runs through the CLI by its import path and passes the method contract, which ``check-method``
checks from a wheel installed outside the checkout; bad paths are refused in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from stamplib import methods, paths
from stamplib.experiments import parameters

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "templates" / "my_method.py"
NAME = "my_tta.confident_tent:ConfidentTent"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    pkg = tmp_path / "my_tta"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(TEMPLATE, pkg / "confident_tent.py")
    return tmp_path


def _cli(args: list[str], package: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package), str(REPO)]),
           "STAMPLIB_HOME": str(paths.home()), "STAMPLIB_RESULTS": str(tmp_path / "results"),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "stamplib", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=1800)


def test_the_template_runs_from_the_cli(package: Path, tmp_path: Path, digits_model) -> None:
    run = _cli(["run", "--method", NAME, "--profile", "smoke"], package, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    (record_file,) = (tmp_path / "results").glob("*.json")
    record = json.loads(record_file.read_text())
    assert record["spec"]["method"] == NAME and 0 <= record["mean"]["acc"] <= 100


def _installed_wheel(tmp_path: Path) -> Path:
    """The python of a fresh venv into which pip installed a wheel of stamplib, built offline
    from a copy of the package alone; the venv borrows this interpreter's dependencies (torch
    and the rest) through a .pth file rather than installing them again."""
    source = tmp_path / "source"
    source.mkdir()
    shutil.copytree(REPO / "stamplib", source / "stamplib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w",
                    str(tmp_path / "dist"), str(source)], check=True, timeout=600)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    python = venv / "bin" / "python"
    (wheel,) = (tmp_path / "dist").glob("stamplib-*.whl")
    subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True,
                   timeout=600)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "dependencies.pth").write_text(str(Path(torch.__file__).parents[1]) + "\n")
    return python


def test_check_method_works_from_a_wheel_installed_outside_the_checkout(package: Path, tmp_path: Path) -> None:
    python = _installed_wheel(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(package), "STAMPLIB_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    where = subprocess.run(
        [python, "-c", "import importlib.util, stamplib.paths as p; "
                       "print(p.PACKAGE_DIR, p.repo_root(), importlib.util.find_spec('tests'))"],
        env=env, cwd=package, capture_output=True, text=True, check=True).stdout.split()
    assert where[0].startswith(str(tmp_path / "venv")) and where[1:] == ["None", "None"], where

    check = subprocess.run([python, "-m", "stamplib", "check-method", NAME], env=env, cwd=package,
                           capture_output=True, text=True, timeout=1800)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert "passed" in check.stdout and "failed" not in check.stdout


def test_an_outside_method_is_a_name_like_any_other(package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(package))
    cls = methods.method_class(NAME)
    assert cls.name == NAME and NAME in methods.available()
    assert parameters.parse_methods(f"tent,{NAME}") == ("tent", NAME)
    out = methods.create(NAME, _tiny(), 4).step(_batch())
    assert out.probs.shape == (8, 4)


def test_outside_methods_that_cannot_load_are_refused_in_one_line(package: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(package))
    with pytest.raises(ValueError, match="cannot load method 'my_tta.nothing:Here'.*package.module:Class"):
        methods.method_class("my_tta.nothing:Here")
    with pytest.raises(ValueError, match="is not a TTAMethod subclass"):
        methods.method_class("my_tta.confident_tent:ConfidentTentConfig")
    with pytest.raises(ValueError, match="unknown method 'tnet'.*package.module:Class"):
        methods.method_class("tnet")


def _tiny():
    from tests.support import tiny_net

    return tiny_net(4)


def _batch():
    import torch

    return torch.rand(8, 3, 16, 16, generator=torch.Generator().manual_seed(0))
