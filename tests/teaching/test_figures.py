"""Every figure of the course can be read where it is saved: its text is at least 8 pt at the size
``report.save_figure`` writes it (the figure's own size: ``bbox_inches="tight"`` crops, it does not
scale), no legend or annotation covers a data point (a point of a line, a scatter point, the
top of a bar), and no two texts run into each other (neighbouring axes' labels, a label and the
suptitle: issue 83). :func:`figure_problems` is applied to the figure functions on made-up frames here
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


def _drawn_texts(figure: plt.Figure) -> list[Text]:
    """Every piece of text the figure draws: titles, the suptitle, axis labels, the tick labels of
    the ticks drawn (an axis keeps spare ticks outside its limits), legend texts, notes."""
    found: list[Text] = []
    for ax in figure.axes:
        found += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        for axis in (ax.xaxis, ax.yaxis):
            found.append(axis.label)
            for tick in axis._update_ticks():
                found += [label for label in (tick.label1, tick.label2) if label.get_visible()]
        if ax.get_legend() is not None:
            found += [ax.get_legend().get_title(), *ax.get_legend().get_texts()]
    for legend in figure.legends:
        found += [legend.get_title(), *legend.get_texts()]
    found += [t for t in (figure._suptitle, figure._supxlabel, figure._supylabel) if t is not None]
    found += list(figure.texts)
    return [t for t in dict.fromkeys(found) if t.get_visible() and t.get_text().strip()]


def _text_corners(text: Text, renderer: object, slack: float) -> np.ndarray:
    """The four corners (display pixels) of the rectangle a text's glyphs fill, rotated with it,
    shrunk by ``slack`` on each side: its sides are those of the same text upright, its centre that of
    the upright box matplotlib gives around the rotated text."""
    box = text.get_window_extent(renderer)
    rotation = text.get_rotation()
    text.set_rotation(0)
    upright = text.get_window_extent(renderer)
    text.set_rotation(rotation)
    theta = np.deg2rad(rotation)
    w, h = max(upright.width - 2 * slack, 0.0), max(upright.height - 2 * slack, 0.0)
    centre = np.array([(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2])
    along, across = np.array([np.cos(theta), np.sin(theta)]), np.array([-np.sin(theta), np.cos(theta)])
    return np.array([centre + sx * w / 2 * along + sy * h / 2 * across for sx, sy in ((-1, -1), (1, -1), (1, 1),
                                                                                      (-1, 1))])


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two convex quadrilaterals overlap (no side of either separates them)."""
    for quad in (a, b):
        for i in range(4):
            edge = quad[(i + 1) % 4] - quad[i]
            normal = np.array([-edge[1], edge[0]])
            if not normal.any():
                continue
            pa, pb = a @ normal, b @ normal
            if pa.max() <= pb.min() or pb.max() <= pa.min():
                return False
    return True


def overlapping_texts(figure: plt.Figure, slack: float = 1.0) -> list[str]:
    """Each pair of texts whose glyph rectangles (rotated as drawn) overlap by more than ``slack``
    pixels: tick labels run together, a label runs into a title."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    shapes = [(t, _text_corners(t, renderer, slack)) for t in _drawn_texts(figure)]
    return [f"{a.get_text()[:30]!r} runs into {b.get_text()[:30]!r}"
            for i, (a, quad_a) in enumerate(shapes) for b, quad_b in shapes[i + 1:] if _overlap(quad_a, quad_b)]


def figure_problems(figure: plt.Figure) -> list[str]:
    """Text under :data:`SMALLEST_POINTS`, every legend or annotation that covers a data point, and
    every two texts that run into each other."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    problems = overlapping_texts(figure)
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


def _long_stream_frame() -> pd.DataFrame:
    """Lesson 14's long stream as the quick profile runs it: all fifteen corruptions in turn."""
    from stamplib.data.corruptions import CORRUPTIONS
    from stamplib.experiments import course

    return pd.DataFrame([{"Method": method, "stream": stream, "position": i + 1, "corruption": c, "acc": 50.0 + i,
                          "top_class_share": 0.1 + 0.02 * i} for method in ("BN Stats", "Tent")
                         for stream in (course.LONG_STREAM, course.LONG_STREAM_CLOSED) for i,
                         c in enumerate(CORRUPTIONS)])


def test_lesson_14s_long_stream_keeps_its_labels_apart_on_all_fifteen_corruptions() -> None:
    """Its right panel's y-label, centred on an axis that the fifteen rotated names shorten, ran up
    into the suptitle (issue 83)."""
    from stamplib.experiments import course
    from stamplib.teaching import adapting

    fig = adapting.plot_long_stream(_long_stream_frame(), (course.LONG_STREAM, course.LONG_STREAM_CLOSED))
    try:
        assert overlapping_texts(fig) == []
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:  # a y-label longer than its axis is high spills towards the titles above it
            label, frame = ax.yaxis.label.get_window_extent(renderer), ax.get_window_extent(renderer)
            assert label.height <= frame.height, (ax.yaxis.label.get_text(), label.height, frame.height)
    finally:
        plt.close(fig)


def test_text_that_runs_together_is_caught() -> None:
    """The check above can fail: two neighbouring x-labels, and a long y-label under a suptitle."""
    fig, axes = plt.subplots(1, 2, figsize=(4, 2))
    axes[0].set_xlabel("a long label of the left panel")
    axes[1].set_xlabel("a long label of the right one")
    assert any("runs into" in p for p in overlapping_texts(fig))
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(6, 1.6))  # the right panel's y-label sits under the centred suptitle
    axes[1].set_ylabel("a y-label far longer than its axis is high")
    fig.suptitle("a suptitle across the middle of the figure")
    assert any("suptitle" in p for p in overlapping_texts(fig)), overlapping_texts(fig)
    plt.close(fig)


def test_lesson_15s_roc_panels_name_their_method() -> None:
    """The three ROC panels were all titled "ROC, gaussian noise" (issue 83)."""
    import numpy as np

    from stamplib.evaluation.outputs import StreamOutputs
    from stamplib.evaluation.record import Mean, Record, Row
    from stamplib.experiments import course, registry
    from stamplib.teaching import outliers

    plan = registry.plan(course.OUTLIERS.notebook, profile="smoke")
    records, outputs = {}, {}
    rng = np.random.default_rng(0)
    for cell in plan.cells:
        rows = {c: Row({"acc": 50.0, "auroc": 60.0, "h": 54.5}, n_id=48, n_outliers=12) for c in cell.spec.corruptions}
        records[cell.spec.key()] = Record(key=cell.spec.key(), spec=cell.spec, per_corruption=rows, mean=Mean.of(rows))
        label = np.where(np.arange(60) < 12, -1, 1).astype(np.int16)
        outputs[cell.spec.key()] = {c: StreamOutputs(prediction=np.ones(60, np.int16),
                                                     ood_score=rng.random(60, np.float32),
                                                     label=label, index=np.arange(60, dtype=np.int32))
                                    for c in cell.spec.corruptions}
    original = outliers.stream_outputs
    outliers.stream_outputs = lambda record, results: outputs[record.key]
    try:
        fig = outliers.plot_scores(plan, records, "unused")
    finally:
        outliers.stream_outputs = original
    try:
        titles = [ax.get_title() for ax in fig.axes if ": ROC," in ax.get_title()]
        assert titles == [f"{m}: ROC, gaussian noise" for m in ("BN Stats", "Tent", "STAMP")], titles
        assert not overlapping_texts(fig)
    finally:
        plt.close(fig)
