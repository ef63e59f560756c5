"""One colour per method, the same in every figure: STAMP in the headline's red, each other
method in a colour far from red and pink, so that no two methods a reader must tell apart share
a hue (notebook 13's 14 lines, notebook 12's markers, the rank slopes of notebooks 02 and 04,
notebook 10's traces, the README's first figure).
"""

from __future__ import annotations

import zlib
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
#: For every other method (one added since, an outside one): each takes one of these by its name
#: (:func:`method_colour`), the same in every figure and every process.
SPARE_COLOURS = ("#e7cb94", "#c7c7c7", "#dbdb8d", "#9edae5", "#6b6ecf", "#637939", "#b5cf6b")

_BY_LABEL = {METHOD_LABELS[m]: m for m in METHOD_COLOURS if m in METHOD_LABELS}


def _spare_colour(method: str) -> str:
    # crc32, not hash(): the same colour in every process (hash() of a str is salted per process).
    return SPARE_COLOURS[zlib.crc32(method.encode()) % len(SPARE_COLOURS)]


def method_colour(method: str) -> str:
    """The colour of a method, by registry name or label (``"STAMP"``): its own, or for a method
    without one a spare colour chosen by its name, so that a new method needs no entry here."""
    own = METHOD_COLOURS.get(method) or METHOD_COLOURS.get(_BY_LABEL.get(method, ""))
    return own or _spare_colour(method)


def method_colours(methods: Iterable[str]) -> dict[str, str]:
    """A colour for each of ``methods`` (registry names or labels): :func:`method_colour`'s, except
    that a method without a colour of its own whose spare is taken in this figure takes the next
    free spare (cycling when there are more than seven)."""
    chosen = list(dict.fromkeys(methods))
    out = {m: METHOD_COLOURS.get(m) or METHOD_COLOURS.get(_BY_LABEL.get(m, "")) for m in chosen}
    for method in [m for m in chosen if out[m] is None]:
        start = SPARE_COLOURS.index(_spare_colour(method))
        free = [c for i in range(len(SPARE_COLOURS)) if (c := SPARE_COLOURS[(start + i) % len(SPARE_COLOURS)])
                not in out.values()]
        out[method] = free[0] if free else SPARE_COLOURS[start]
    return out
