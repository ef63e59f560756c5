"""One seaborn theme for every notebook, and figure files that do not churn: saving the same
numbers twice gives byte-identical PNG and SVG files (fixed metadata, fixed SVG hash salt)."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

from stamplib import paths

# A Jupyter kernel names its inline backend in MPLBACKEND; forcing agg there would hide every
# figure in JupyterLab and in the executed notebooks. Elsewhere (scripts, tests, workers) agg
# keeps a machine with a display from opening windows.
if not paths.environment("MPLBACKEND") and "ipykernel" not in sys.modules:
    matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402


def set_theme() -> None:
    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind")
    plt.rcParams["figure.dpi"] = 100


def save_figure(fig: plt.Figure, name: str, directory: str | Path, close: bool = True) -> list[Path]:
    """Write ``<directory>/<name>.png`` and ``.svg`` (a notebook's ``context.figures``), each whole
    through a temporary name, and only where its bytes change: a file that would not change is left
    as it is (a tracked figure is not rewritten by a command that draws the same numbers)."""
    import io

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    png, svg = out / f"{name}.png", out / f"{name}.svg"
    with plt.rc_context({"svg.hashsalt": name}):
        for path, metadata in ((png, {"Software": None}), (svg, {"Date": None})):
            buffer = io.BytesIO()
            fig.savefig(buffer, format=path.suffix[1:], metadata=metadata, bbox_inches="tight")
            if not path.is_file() or path.read_bytes() != buffer.getvalue():
                paths.atomic_write_bytes(path, buffer.getvalue())
    if close:
        plt.close(fig)
    return [png, svg]
