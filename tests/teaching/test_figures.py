"""Every figure of the course can be read where it is saved: its text is at least 8 pt at the size
``report.save_figure`` writes it (the figure's own size: ``bbox_inches="tight"`` crops, it does not
scale), and no legend or annotation covers a data point (a point of a line, a scatter point, the
top of a bar). :func:`figure_problems` is applied to the figure functions on made-up frames here
and to every figure the notebooks draw on real records (``test_sections``)."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.collections import PathCollection
from matplotlib.contour import ContourSet
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from tests.teaching.test_palette import _figures

matplotlib.use("agg")
#: The smallest text a saved figure may hold, in points.
SMALLEST_POINTS = 8.0


def _data_points(figure: plt.Figure) -> np.ndarray:
    """Display coordinates of every data point drawn inside its axis: the vertices of lines in
    data coordinates, scatter points, the middle of each bar's top."""
    found = []
    for ax in figure.axes:
        data, shown = [], []
        for line in ax.lines:
            if line.get_transform() is ax.transData and line.get_visible():
                data.append(np.column_stack([np.asarray(line.get_xdata(), dtype=float),
                                             np.asarray(line.get_ydata(), dtype=float)]))
        for patch in ax.patches:
            if isinstance(patch, Rectangle) and patch.get_visible() and patch.get_height():
                data.append(np.array([[patch.get_x() + patch.get_width() / 2, patch.get_y() + patch.get_height()]]))
        for xy in data:
            xy = xy[np.isfinite(xy).all(axis=1)]
            if len(xy):
                shown.append(ax.transData.transform(xy))
        for collection in ax.collections:
            if isinstance(collection, PathCollection) and not isinstance(collection, ContourSet) \
                    and collection.get_visible() and len(collection.get_offsets()):
                offsets = np.asarray(collection.get_offsets(), dtype=float)
                offsets = offsets[np.isfinite(offsets).all(axis=1)]
                shown.append(collection.get_offset_transform().transform(offsets))
        box = ax.get_window_extent()
        for p in shown:  # a point outside its axis is clipped: not drawn
            found.append(p[(p[:, 0] >= box.x0) & (p[:, 0] <= box.x1) & (p[:, 1] >= box.y0) & (p[:, 1] <= box.y1)])
    return np.concatenate(found) if found else np.empty((0, 2))


def figure_problems(figure: plt.Figure) -> list[str]:
    """Text under :data:`SMALLEST_POINTS`, and every legend or annotation that covers a data point."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    problems = []
    for text in figure.findobj(Text):
        if text.get_visible() and text.get_text().strip() and text.get_fontsize() < SMALLEST_POINTS - 1e-9:
            problems.append(f"{text.get_text()[:40]!r} is {text.get_fontsize():.1f} pt, under {SMALLEST_POINTS:g} pt")
    points = _data_points(figure)
    covers: list[tuple[str, object]] = [(f"the legend {i}", legend) for i, legend in
                                        enumerate([ax.get_legend() for ax in figure.axes if ax.get_legend()]
                                                  + list(figure.legends))]
    covers += [(f"the note {t.get_text()[:30]!r}", t) for ax in figure.axes for t in ax.texts
               if t.get_visible() and t.get_text().strip()]
    for name, artist in covers:
        box = artist.get_window_extent(renderer)
        under = ((points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0) & (points[:, 1] < box.y1))
        if under.any():
            problems.append(f"{name} covers {int(under.sum())} data point(s)")
    return problems


def test_the_course_figures_have_text_of_8_pt_or_more_and_nothing_over_their_points() -> None:
    figures = _figures()
    try:
        problems = {name: figure_problems(fig) for name, fig in figures.items()}
        assert not {k: v for k, v in problems.items() if v}
    finally:
        plt.close("all")


def test_small_text_and_a_legend_over_a_point_are_caught() -> None:
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [2, 1, 2], marker="o", label="a line")
    ax.scatter([0.05], [1.95], label="a point under the legend")
    ax.legend(loc="upper left")
    ax.set_xlabel("small", fontsize=6)
    problems = figure_problems(fig)
    plt.close(fig)
    assert any("'small' is 6.0 pt" in p for p in problems), problems
    assert any("legend 0 covers" in p for p in problems), problems
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [2, 1, 2], marker="o")
    ax.text(1.0, 1.0, "a note on the point", ha="center", va="center")
    assert any("note 'a note on the point' covers" in p for p in figure_problems(fig))
    plt.close(fig)


def _path_table() -> pd.DataFrame:
    from stamplib.teaching import piece_by_piece

    rows = []
    for i, step in enumerate(piece_by_piece.STEPS):
        paper = piece_by_piece.NOT_IN_TABLE5 if not step.table5_row else 60.0 + 2 * i
        rows.append({"step": step.name, "Table 5 row": step.table5_row or "—", "ACC": 50.0, "AUROC": 60.0,
                     "H": 40.0 + 3 * i, "H gaussian noise": 35.0 + 4 * i, "H contrast": 20.0 + i,
                     "H lowest seed": 38.0 + 3 * i, "H highest seed": 43.0 + 3 * i,
                     "paper ACC": paper, "paper AUROC": paper, "paper H": paper})
    return pd.DataFrame(rows)


def test_lesson_16s_path_draws_the_papers_h_on_an_axis_of_its_own_with_a_legend_of_9_pt_or_more() -> None:
    """The paper's Table 5 H is another benchmark's: it has its own axis, titled with that
    benchmark, never a line among ours; every legend entry is at least 9 pt."""
    from stamplib.teaching import piece_by_piece

    fig = piece_by_piece.plot_path(_path_table())
    try:
        ours, theirs = fig.axes
        assert [line.get_label() for line in theirs.lines] == ["H, paper's Table 5"]
        assert not [line for line in ours.lines if "paper" in line.get_label()]
        assert "CIFAR100-C + SVHN-C" in theirs.get_title() and "built-in CIFAR-10" in ours.get_title()
        assert list(theirs.lines[0].get_ydata()) == [62.0, 64.0, 66.0, 68.0, 70.0]  # Tent is no row of Table 5
        sizes = [t.get_fontsize() for ax in fig.axes for t in ax.get_legend().get_texts()]
        assert sizes and min(sizes) >= 9
        assert not figure_problems(fig)
    finally:
        plt.close(fig)
