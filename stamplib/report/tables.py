"""Result tables: records → a tidy DataFrame → CSV, Markdown and LaTeX files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from stamplib import paths


def results_frame(records: Iterable[dict[str, Any]], per_corruption: bool = False) -> pd.DataFrame:
    """One row per record (mean over corruptions), or per (record, corruption)."""
    rows = []
    for r in records:
        spec = r["spec"]
        base = {"method": spec["method"], "dataset": spec["dataset"], "outliers": spec["outliers"],
                "seed": spec["seed"]}
        if per_corruption:
            for corruption, m in r["per_corruption"].items():
                rows.append({**base, "corruption": corruption, "ACC": m["acc"], "AUROC": m["auroc"],
                             "H": m["h"], "collapsed": m["collapsed"]})
        else:
            rows.append({**base, "ACC": r["mean"]["acc"], "AUROC": r["mean"]["auroc"], "H": r["mean"]["h"],
                         "collapsed": ",".join(r["collapsed"])})
    return pd.DataFrame(rows)


def to_markdown(df: pd.DataFrame, digits: int = 1) -> str:
    def fmt(v: Any) -> str:
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + " --- |" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def save_table(df: pd.DataFrame, name: str, directory: str | Path | None = None, digits: int = 1) -> list[Path]:
    """Write ``<name>.csv``, ``.md`` and ``.tex`` (default: the figures folder)."""
    out = Path(directory) if directory else paths.figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    written = [out / f"{name}.csv", out / f"{name}.md", out / f"{name}.tex"]
    paths.atomic_write_bytes(written[0], df.to_csv(index=False, float_format=f"%.{digits + 2}f").encode())
    paths.atomic_write_bytes(written[1], to_markdown(df, digits).encode())
    paths.atomic_write_bytes(written[2], df.to_latex(index=False, float_format=f"%.{digits}f").encode())
    return written
