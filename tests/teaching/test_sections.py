"""Every section of the overview and the lessons shows something: each notebook's code
runs in this process on a results store that holds its cells (the smoke profile's, computed here
once), and no cell may print that records are missing, draw an axis with no data on it (or a legend
against the palette: ``test_palette``), or end on an empty table. Lesson 17's harder streams were empty on every run
while the records sat in
the store, and nothing looked."""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import nbformat
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.contour import ContourSet

from stamplib.experiments import course
from stamplib.notebook_runner import notebooks_dir
from tests.teaching.test_figures import figure_problems
from tests.teaching.test_palette import legend_problems

NOTEBOOKS = ["00_walkthrough", *(e.notebook for e in course.LESSONS)]
#: What a section says when it has nothing to show (every "compute the cells first" message).
NOTHING_SHOWN = re.compile(r"no records|records? (is|are) missing|compute the cells first|missing: compute",
                           re.IGNORECASE)


@pytest.fixture(scope="module")
def shared_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One results store for the module: each notebook computes its smoke cells once, and the
    lessons share the cells they have in common, as under ./run_all.sh."""
    return tmp_path_factory.mktemp("results")


def drawn(ax: Axes) -> bool:
    """Whether ``ax`` shows data: a line in data coordinates with a finite point, a bar, a
    scatter or filled area, an image. Reference lines (axhline, axvline) and contour grids are
    the frame, not data."""
    for line in ax.lines:
        if line.get_transform() is ax.transData and pd.notna(pd.Series(line.get_ydata(), dtype=float)).any():
            return True
    for collection in ax.collections:
        if isinstance(collection, ContourSet):
            continue
        if len(collection.get_offsets()) or any(len(p.vertices) for p in collection.get_paths()):
            return True
    finite_bars = [p for p in ax.patches if hasattr(p, "get_height") and pd.notna(p.get_height()) and p.get_height()]
    return bool(finite_bars or ax.images)


def empty_axes(figure: plt.Figure) -> list[str]:
    """The titles (or positions) of the figure's visible axes that show no data."""
    return [ax.get_title() or f"axis {i}" for i, ax in enumerate(figure.axes)
            if ax.get_visible() and ax.axison and ax.get_label() != "<colorbar>" and not drawn(ax)]


def run_cells(notebook: str, parameters: dict[str, Any]) -> list[tuple[int, str, list[str], Any]]:
    """Execute the notebook's code cells here, papermill's way (its parameters after the tagged
    cell). Per cell: its index, what it printed or displayed, the empty axes of the figures it
    left open, and the value of its last expression (a notebook shows that table)."""
    nb = nbformat.read(notebooks_dir() / f"{notebook}.ipynb", as_version=4)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    shown: list[str] = []
    out = []
    import IPython.display

    def display(*objects: Any, **_: Any) -> None:
        shown.extend(getattr(o, "data", None) or str(o) for o in objects)

    original = IPython.display.display
    IPython.display.display = display
    try:
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            tree = ast.parse(cell.source)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(tree, f"{notebook}[{index}]", "exec"), namespace)  # noqa: S102 - the notebook's cell
                value = eval(compile(ast.Expression(last.value), f"{notebook}[{index}]", "eval"),  # noqa: S307
                             namespace) if last is not None else None
                if "parameters" in cell.metadata.get("tags", []):
                    namespace.update(parameters)
            empty = [f"{plt.figure(n).get_suptitle() or n}: {title}" for n in plt.get_fignums()
                     for title in empty_axes(plt.figure(n))]
            empty += [f"legend: {problem}" for n in plt.get_fignums() for problem in legend_problems(plt.figure(n))]
            empty += [f"figure: {plt.figure(n).get_suptitle() or n}: {problem}" for n in plt.get_fignums()
                      for problem in figure_problems(plt.figure(n))]
            plt.close("all")
            out.append((index, printed.getvalue() + "\n".join(shown), empty, value))
            shown.clear()
    finally:
        IPython.display.display = original
    return out


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_section_shows_something(notebook: str, shared_results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAMPLIB_RESULTS", str(shared_results))
    monkeypatch.setenv("STAMPLIB_HEADLESS", "1")
    matplotlib.use("agg")
    parameters: dict[str, Any] = {"profile": "smoke"}
    if notebook != "00_walkthrough":
        parameters["solutions"] = True
    problems = []
    for index, text, empty, value in run_cells(notebook, parameters):
        if NOTHING_SHOWN.search(text):
            problems.append(f"cell {index} says: {NOTHING_SHOWN.search(text).group(0)!r} in {text[-300:]!r}")
        problems += [f"cell {index} draws " + (f"a wrong {e}" if e.startswith("legend") else
                                               f"a hard-to-read {e}" if e.startswith("figure") else
                                               f"an empty axis: {e}") for e in empty]
        if isinstance(value, pd.DataFrame) and (value.empty or value.select_dtypes("number").isna().all().all()):
            problems.append(f"cell {index} shows an empty table")
    assert not problems, "\n".join(problems)


def test_an_empty_axis_and_a_missing_record_are_caught() -> None:
    """The test above can fail: an axis with only a reference line is empty, one with a bar is not."""
    fig, (empty, full) = plt.subplots(1, 2)
    empty.axhline(10.0)
    empty.set_title("nothing")
    full.bar([0], [3.0])
    assert empty_axes(fig) == ["nothing"]
    plt.close(fig)
    assert NOTHING_SHOWN.search("No records of the harder streams yet: compute the cells first.")
    assert NOTHING_SHOWN.search("The long-stream records are missing: compute the cells first.")
