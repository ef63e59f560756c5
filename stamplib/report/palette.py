"""One colour per method, the same in every figure: STAMP in the headline's red, each other
method in a colour far from red and pink, so that no two methods a reader must tell apart share
a hue (notebook 13's 14 lines, notebook 12's markers, the rank slopes of notebooks 02 and 04,
notebook 10's traces, the README's first figure).
"""

from __future__ import annotations

from collections.abc import Iterable

from stamplib.report.paper import METHOD_LABELS

#: STAMP's colour in every figure (matplotlib's tab:red).
STAMP = "#d62728"
#: A variant of STAMP shown beside it (lesson 17's STAMP without self-weights): STAMP's light red
#: (tab20's), so that it reads as STAMP's and still tells apart from it.
STAMP_VARIANT = "#ff9896"
#: The README's first figure colours its bars by group: STAMP, the paper's other methods, newer ones.
PAPER_METHODS_BAR = "#1f77b4"
NEWER_METHODS_BAR = "#7f7f7f"

#: Each registered method's colour: tab20's (and tab20b's) colours without the reds, pinks and
#: browns (red is STAMP's alone), the paper's methods in dark shades, the newer ones in light.
METHOD_COLOURS = {
    "stamp": STAMP,
    "source": "#7f7f7f",  # grey
    "bn_stats": "#1f77b4",  # blue
    "tent": "#ff7f0e",  # orange
    "eata": "#2ca02c",  # green
    "sar": "#9467bd",  # purple
    "cotta": "#8c6d31",  # dark gold (tab20b; tab10's brown is too near red)
    "rotta": "#bcbd22",  # olive
    "sotta": "#17becf",  # cyan
    "owttt": "#393b79",  # navy
    "unient": "#aec7e8",  # light blue
    "unient_plus": "#98df8a",  # light green
    "ostta": "#c5b0d5",  # light purple
    "tent_come": "#ffbb78",  # light orange
}
#: For methods registered from outside the package, in the order a figure meets them.
SPARE_COLOURS = ("#e7cb94", "#c7c7c7", "#dbdb8d", "#9edae5", "#6b6ecf", "#637939", "#b5cf6b")

_BY_LABEL = {METHOD_LABELS[m]: m for m in METHOD_COLOURS if m in METHOD_LABELS}


def method_colour(method: str) -> str | None:
    """The colour of a registered method, by registry name or label (``"STAMP"``); None for
    another method (:func:`method_colours` gives those one of the spare colours)."""
    return METHOD_COLOURS.get(method) or METHOD_COLOURS.get(_BY_LABEL.get(method, ""))


def method_colours(methods: Iterable[str]) -> dict[str, str]:
    """A colour for each of ``methods`` (registry names or labels): its own, or a spare colour
    in the order the others come (cycling when there are more than seven)."""
    out, spare = {}, 0
    for method in dict.fromkeys(methods):
        colour = method_colour(method)
        if colour is None:
            colour, spare = SPARE_COLOURS[spare % len(SPARE_COLOURS)], spare + 1
        out[method] = colour
    return out
