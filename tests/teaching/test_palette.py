"""One palette: each method keeps one colour in every figure of the overview and the
lessons — the colour of :mod:`stamplib.report.palette` — and no legend shows a registry name
(``bn_stats``) where the method has a paper name (``BN Stats``). Tent was green in notebook 00 and
orange in lessons 14 and 15. :func:`legend_problems` is also applied to every figure the notebooks
draw on real records (``test_sections``)."""

from __future__ import annotations

import colorsys
import re
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgb

from stamplib import methods
from stamplib.experiments import course, plans
from stamplib.report import palette, walkthrough
from stamplib.report.paper import METHOD_LABELS, method_label
from stamplib.teaching import adapting, breaking, outliers

matplotlib.use("agg")
#: Registry names whose paper name differs: these must never reach a legend as they are.
RAW_NAMES = {name for name in methods.TABLE_ORDER if method_label(name) != name}
LABELS = {method_label(name): name for name in methods.TABLE_ORDER}


def _handle_colour(handle: object) -> tuple[float, float, float] | None:
    if isinstance(handle, matplotlib.lines.Line2D):
        markers_only = handle.get_linestyle() in ("None", "", " ")
        return to_rgb(handle.get_markerfacecolor() if markers_only else handle.get_color())
    if isinstance(handle, matplotlib.patches.Patch):
        return to_rgb(handle.get_facecolor())
    if isinstance(handle, matplotlib.collections.Collection) and len(handle.get_facecolor()):
        return to_rgb(handle.get_facecolor()[0])
    return None


def _method_of(text: str) -> str | None:
    """The method a legend entry names: its paper name alone or followed by ``,``, ``:`` or ``(``."""
    for label in sorted(LABELS, key=len, reverse=True):
        if text == label or re.match(rf"{re.escape(label)}\s*[,:(]", text):
            return label
    return None


def legend_problems(figure: plt.Figure) -> list[str]:
    """Each legend entry of ``figure`` that shows a raw registry name, or names a method in a
    colour other than its palette colour (a STAMP variant: STAMP's or :data:`palette.STAMP_VARIANT`)."""
    problems = []
    legends = [ax.get_legend() for ax in figure.axes if ax.get_legend()] + list(figure.legends)
    for legend in legends:
        for text, handle in zip(legend.get_texts(), legend.legend_handles):
            words = text.get_text()
            if set(re.split(r"[\s,:()]+", words)) & RAW_NAMES:
                problems.append(f"the legend shows a registry name: {words!r}")
            label = _method_of(words)
            colour = _handle_colour(handle)
            if label is None or colour is None:
                continue
            allowed = {palette.method_colour(label)}
            if label == "STAMP" and words != "STAMP":
                allowed.add(palette.STAMP_VARIANT)
            if not any(np.allclose(colour, to_rgb(c), atol=2e-3) for c in allowed):
                problems.append(f"{words!r} is drawn in {matplotlib.colors.to_hex(colour)}, not {sorted(allowed)}")
    return problems


def test_every_method_has_its_own_colour_and_only_stamp_is_red() -> None:
    colours = {m: palette.method_colour(m) for m in methods.TABLE_ORDER}
    assert None not in colours.values() and len(set(colours.values())) == len(colours)
    assert palette.STAMP_VARIANT not in colours.values()
    for method, colour in colours.items():
        hue, _, saturation = colorsys.rgb_to_hls(*to_rgb(colour))
        reddish = saturation > 0.3 and (hue < 0.04 or hue > 0.9)
        assert reddish == (method == "stamp"), method
    assert palette.method_colour("BN Stats") == palette.method_colour("bn_stats")


# ------------------------------------------------------------------- the figures on made-up frames

SHOWN = ("source", "bn_stats", "tent", "eata", "stamp")
CORRUPTIONS = ("gaussian_noise", "defocus_blur", "contrast")


def _per_corruption() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [{"method": m, "Method": method_label(m), "corruption": c, "acc": rng.uniform(20, 90),
             "auroc": rng.uniform(40, 90), "h": rng.uniform(30, 80)} for m in SHOWN for c in (*CORRUPTIONS, "mean")]
    return pd.DataFrame(rows)


def _figures() -> dict[str, plt.Figure]:
    frame = _per_corruption()
    means = frame[frame["corruption"] == "mean"].assign(stream="paper's stream", collapsed=False)
    long_rows = [{"Method": method_label(m), "stream": s, "position": i + 1, "corruption": c, "acc": 50.0,
                  "top_class_share": 0.2, "batch": i, "score_known": 1.0, "score_outliers": 1.5}
                 for m in ("bn_stats", "tent") for s in (course.LONG_STREAM, course.LONG_STREAM_CLOSED)
                 for i, c in enumerate(CORRUPTIONS)]
    filters = pd.DataFrame([{"Method": method_label(m), "corruption": c, "batch": b, "passed": 10, "known": 50,
                             "precision": 0.9, "recall": 0.2} for m in ("eata", "sar", "stamp") for c in CORRUPTIONS
                            for b in range(3)])
    runs = pd.DataFrame([{"run": r, "corruption": c, "ACC": 50.0, "AUROC": 60.0, "H": 55.0}
                         for r in ("STAMP", "STAMP, weighting=none", "BN Stats", "Tent") for c in (*CORRUPTIONS,
                                                                                                   "mean")])
    harder = pd.DataFrame([{"method": method_label(m), "axis": axis, "stream": stream, "H": 50.0}
                           for m in course.STRESS_METHODS for axis, streams in
                           ((plans.BATCH_AXIS, ("16", "64")), (plans.LABEL_AXIS, ("none",
                                                                                  "sorted"))) for stream in streams])
    long_frame = pd.DataFrame(long_rows)
    return {
        "00 comparison": walkthrough.plot_h_per_corruption(frame, "H"),
        "14 comparison": adapting.plot_comparison(frame, "acc"),
        "14 long stream": adapting.plot_long_stream(long_frame, (course.LONG_STREAM, course.LONG_STREAM_CLOSED)),
        "15 h plane": outliers.plot_h_plane(means),
        "15 long-stream "
        "scores": outliers.plot_long_stream_scores(long_frame[long_frame["stream"] == course.LONG_STREAM]),
        "15 filters": outliers.plot_filters(filters),
        "17 accuracy": breaking.plot_per_corruption(runs),
        "17 harder streams": breaking.plot_harder_streams(harder),
    }


def test_the_course_figures_take_method_colours_from_the_palette_and_show_paper_names() -> None:
    figures = _figures()
    try:
        problems = {name: legend_problems(fig) for name, fig in figures.items()}
        assert not {k: v for k, v in problems.items() if v}
        labelled = {name: [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
                    for name, fig in figures.items()}
        assert all(any(_method_of(t) for t in texts) for texts in labelled.values()), labelled  # the check ran
    finally:
        plt.close("all")


def test_a_raw_name_or_a_foreign_colour_in_a_legend_is_caught() -> None:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], color="tab:green", label="Tent")
    ax.bar([0], [1], color=palette.method_colour("tent"), label="bn_stats")
    ax.legend()
    assert len(legend_problems(fig)) == 2
    plt.close(fig)


def test_no_figure_function_picks_method_colours_on_its_own() -> None:
    """A seaborn call split by method takes the palette's colours (``palette=``), and the course
    never names a colour for a method (a method's colour comes from :mod:`stamplib.report.palette`)."""
    root = Path(palette.__file__).resolve().parents[1]
    for path in [*(root / "teaching").glob("*.py"), *(root / "report").glob("*.py")]:
        source = path.read_text()
        for call in re.finditer(r"sns\.\w+\((?:[^()]|\([^()]*\))*\)", source):
            if re.search(r"hue=\"[Mm]ethod\"", call.group(0)):
                assert "palette=" in call.group(0), f"{path.name}: {call.group(0)[:80]}"
    teaching = "".join(p.read_text() for p in (root / "teaching").glob("*.py"))
    assert not re.search(r"\"tab:(red|pink|orange|green|blue|purple)\"", teaching)
    assert METHOD_LABELS["bn_stats"] == "BN Stats"


@pytest.mark.parametrize("text, method", [("Tent", "Tent"), ("Tent, long stream", "Tent"), ("STAMP (H 63.7)", "STAMP"),
                                          ("BN Stats: outliers", "BN Stats"), ("one batch", None)])
def test_a_legend_entry_is_read_as_the_method_it_names(text: str, method: str | None) -> None:
    assert _method_of(text) == method
