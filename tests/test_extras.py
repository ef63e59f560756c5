"""Optional dependencies (issue 26, item 6): the core installs alone and runs a cell; each face
that needs an extra stops with one line naming the ``pip install`` to run; pyproject.toml's
core list is what the package imports, and ``dev`` pulls in every extra the README's two
commands use."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import matplotlib
import numpy as np
import pytest

import stamplib
from stamplib import cli, explorer, models, notebook_runner, site
from stamplib.evaluation.spec import RunSpec
from stamplib.experiments import grid
from stamplib.extras import MissingExtra, require, require_installed
from tests.support import context_for

REPO = Path(__file__).resolve().parents[1]
PACKAGE = Path(stamplib.__file__).resolve().parent

#: What ``pip install stamplib`` must bring, by distribution name.
CORE = {"torch", "torchvision", "numpy", "scipy", "pillow", "scikit-learn", "pandas", "matplotlib",
        "seaborn", "tqdm"}
#: Every module an extra provides that the package asks for (the blocked ones below).
EXTRA_MODULES = {"submitit": "cluster", "papermill": "notebooks", "ipykernel": "notebooks",
                 "ipywidgets": "notebooks", "nbformat": "notebooks", "nbclient": "notebooks",
                 "jupyter_client.manager": "notebooks", "zmq": "notebooks", "traitlets.config": "notebooks",
                 "sphinx": "site", "myst_nb": "site", "sphinx_book_theme": "site"}
#: Import names that differ from their distribution's name.
DISTRIBUTIONS = {"sklearn": "scikit-learn", "PIL": "pillow", "zmq": "pyzmq", "jupyter_client.manager": "jupyter-client",
                 "traitlets.config": "traitlets"}


def _boom(*args: object, **kwargs: object) -> None:
    raise AssertionError("work started before the missing extra was reported")


def _assert_one_line(err: BaseException | str, extra: str) -> None:
    text = str(err)
    assert "\n" not in text.strip() and f"pip install 'stamplib[{extra}]'" in text, text


def _tiny_explorer() -> explorer.StreamExplorer:
    """An eight-image, one-batch explorer: enough for the views, no method run."""
    labels = np.array([0, 1, 0, 1, -1, 0, -1, -1])
    return explorer.StreamExplorer(
        title="tiny", num_classes=2, batch_size=8, images=np.zeros((8, 4, 4, 3), np.uint8),
        labels=labels, predictions=np.maximum(labels, 0), scores=np.linspace(0.0, 1.0, 8),
        masks=[labels >= 0], memory_counts=[[3, 2]], lrs=[0.01],
        running={k: np.array([50.0]) for k in ("acc", "auroc", "h")},
    )


# -- the helper -------------------------------------------------------------------------------------------
def test_require_names_the_extra_and_leaves_other_import_errors_alone(monkeypatch) -> None:
    assert require("json", "site") is json
    require_installed("json", "site")
    monkeypatch.setitem(sys.modules, "submitit", None)
    for check in (require, require_installed):
        with pytest.raises(MissingExtra, match=re.escape("the grid needs submitit")) as caught:
            check("submitit", "cluster", "the grid")
        _assert_one_line(caught.value, "cluster")
        assert isinstance(caught.value, ModuleNotFoundError) and caught.value.name == "submitit"
    # A package that is installed but lacks one of its own dependencies is not a missing extra.
    broken = ModuleNotFoundError("No module named 'zmq'", name="zmq")

    def import_a_broken_package(name: str) -> None:
        raise broken

    monkeypatch.setattr("importlib.import_module", import_a_broken_package)
    with pytest.raises(ModuleNotFoundError) as caught:
        require("ipykernel", "notebooks")
    assert caught.value is broken


# -- each face --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("executor", ["submitit", "submitit-local"])
def test_the_submitit_executors_without_the_cluster_extra(tmp_path, monkeypatch, executor) -> None:
    monkeypatch.setitem(sys.modules, "submitit", None)
    monkeypatch.setattr(models, "source_model", _boom)
    spec = RunSpec(method="source", corruptions=("gaussian_noise",), profile="smoke")
    with pytest.raises(MissingExtra, match="the submitit executors needs submitit") as caught:
        grid.run_grid([spec], context_for(tmp_path), grid.ExecutorOptions(executor), progress=False)
    _assert_one_line(caught.value, "cluster")
    with pytest.raises(MissingExtra, match=re.escape("stamplib[cluster]")):
        grid.CellGroup([spec.to_dict()], context_for(tmp_path), None, None).checkpoint()


@pytest.mark.parametrize("module", ["sphinx", "myst_nb", "sphinx_book_theme"])
def test_the_site_without_the_site_extra(tmp_path, monkeypatch, capsys, module) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setattr(site, "collect_pages", _boom)
    with pytest.raises(MissingExtra, match=f"building the site needs {module}") as caught:
        site.build_site("quick", tmp_path / "figures", out=tmp_path / "site", executed=tmp_path)
    _assert_one_line(caught.value, "site")
    assert cli.main(["site", "--out", str(tmp_path / "site")]) == 2
    _assert_one_line(capsys.readouterr().err, "site")
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("module", ["papermill", "ipykernel"])
def test_the_notebook_runner_without_the_notebooks_extra(tmp_path, monkeypatch, capsys, module) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setattr(notebook_runner, "discover", _boom)
    with pytest.raises(MissingExtra, match=f"running the notebooks needs {module}") as caught:
        notebook_runner.run_notebooks("smoke", build_dir=tmp_path)
    _assert_one_line(caught.value, "notebooks")
    assert cli.main(["notebooks", "--profile", "smoke", "--only", "00"]) == 2
    _assert_one_line(capsys.readouterr().err, "notebooks")


def test_the_explorer_without_ipywidgets(monkeypatch) -> None:
    """The slider names the extra; show() in a live kernel warns and draws the static summary."""
    matplotlib.use("Agg")
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    tiny = _tiny_explorer()
    with pytest.raises(MissingExtra, match="the explorer's slider needs ipywidgets") as caught:
        tiny.widget()
    _assert_one_line(caught.value, "notebooks")
    monkeypatch.setattr(explorer, "_in_a_live_kernel", lambda: True)
    with pytest.warns(UserWarning, match=re.escape("pip install 'stamplib[notebooks]'")):
        figure = explorer.show(tiny)
    assert isinstance(figure, matplotlib.figure.Figure) and "static summary" in figure._suptitle.get_text()


# -- the core alone ---------------------------------------------------------------------------------------
#: Imported first in the subprocess (as sitecustomize): every module of every extra is refused,
#: as if none of them were installed.
BLOCKER = """
import sys

BLOCKED = {blocked!r}


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the test)", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""

CORE_RUN = """
import json
import sys

import stamplib
from stamplib import RunSpec, cli, explorer, notebook_runner, paths, site  # noqa: F401 - the faces import
from stamplib.experiments import grid
from stamplib.extras import MissingExtra

spec = RunSpec(method="source", corruptions=("gaussian_noise",), profile="smoke")
context = paths.RunContext.build(results=sys.argv[1])
record = stamplib.run(spec, context)
local = grid.run_grid([RunSpec(method="bn_stats", corruptions=("gaussian_noise",), profile="smoke")], context,
                      progress=False)
try:
    grid.run_grid([spec], context, grid.ExecutorOptions("submitit-local"), progress=False)
    refused = ""
except MissingExtra as err:
    refused = str(err)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in set({blocked!r}))
print(json.dumps({{"acc": record.mean.acc, "local_ok": local.ok, "refused": refused, "loaded": loaded}}))
"""


@pytest.fixture
def without_extras(tmp_path) -> dict[str, str]:
    """The environment of a process in which no extra is installed."""
    folder = tmp_path / "blocker"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BLOCKER.format(blocked=sorted(EXTRA_MODULES)))
    path = os.pathsep.join(filter(None, [str(folder), str(REPO), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path}


def test_the_core_runs_a_cell_with_every_extra_missing(tmp_path, without_extras, digits_model) -> None:
    check = subprocess.run([sys.executable, "-c", "import submitit"], env=without_extras,
                           capture_output=True, text=True)
    assert check.returncode == 1 and "blocked by the test" in check.stderr  # the blocker works
    script = textwrap.dedent(CORE_RUN.format(blocked=sorted(EXTRA_MODULES)))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "grid")], env=without_extras,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert 0 <= out["acc"] <= 100 and out["local_ok"] and out["loaded"] == []
    _assert_one_line(out["refused"], "cluster")


def test_the_command_line_names_the_extra_when_it_is_missing(tmp_path, without_extras) -> None:
    done = subprocess.run([sys.executable, "-m", "stamplib", "site", "--out", str(tmp_path / "site")],
                          env=without_extras, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stderr.startswith("error: building the site needs sphinx")
    _assert_one_line(done.stderr, "site")


# -- pyproject.toml ---------------------------------------------------------------------------------------
def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the text checks elsewhere cover 3.10
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _requirement(line: str) -> tuple[str, set[str], str]:
    """``name[extra,…]==version`` → (normalised name, extras, version specifier)."""
    match = re.fullmatch(r"([A-Za-z0-9._-]+)(?:\[([^\]]*)\])?\s*(.*)", line.strip())
    assert match, line
    name, extras, version = match.groups()
    return re.sub(r"[-_.]+", "-", name).lower(), {e.strip() for e in (extras or "").split(",") if e.strip()}, version


def _third_party_imports() -> dict[str, list[str]]:
    """Every distribution the package's import statements name, with the modules naming it."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - {"stamplib", "__future__"}:
                found.setdefault(DISTRIBUTIONS.get(top, top), []).append(str(path.relative_to(PACKAGE)))
    return found


def test_the_core_is_what_the_package_imports() -> None:
    core = {_requirement(line)[0] for line in _pyproject()["dependencies"]}
    assert core == CORE
    imported = _third_party_imports()
    # IPython only tells explorer.show whether a kernel runs it (an ImportError means none does).
    assert imported.pop("IPython") == ["explorer.py"]
    assert set(imported) == CORE, {d: imported[d] for d in set(imported) - CORE}


def test_every_extra_is_pinned_and_dev_installs_what_the_two_commands_need() -> None:
    project = _pyproject()
    extras = project["optional-dependencies"]
    assert set(extras) == {"notebooks", "site", "cluster", "browser", "dev"}
    for line in project["dependencies"] + [line for lines in extras.values() for line in lines]:
        name, _, version = _requirement(line)
        assert name == "stamplib" or version.startswith("=="), f"{line}: pin it (a fresh machine gets what CI tested)"
    dev = [_requirement(line) for line in extras["dev"]]
    assert ("stamplib", {"notebooks", "site", "cluster"}, "") in dev
    assert {"pytest", "pytest-xdist", "ruff", "nbstripout"} <= {name for name, _, _ in dev}
    for module, extra in EXTRA_MODULES.items():
        name = _requirement(DISTRIBUTIONS.get(module, module))[0]
        assert name in {_requirement(line)[0] for line in extras[extra]}, (module, extra)
    # The extras hold no core dependency twice, and the browser extra stays separate from dev.
    assert not CORE & {_requirement(line)[0] for lines in extras.values() for line in lines}
    assert "browser" not in {e for _, wanted, _ in dev for e in wanted}


def test_every_require_in_the_package_names_a_known_extra_and_module() -> None:
    """The calls of require / require_installed: the extra exists and ``EXTRA_MODULES`` (what the
    tests above block) knows the module under that extra."""
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("require", "require_installed")):
                module, extra = (arg.value for arg in node.args[:2])
                calls.append((path.name, module, extra))
    assert {(module, extra) for _, module, extra in calls} == set(EXTRA_MODULES.items()), calls
