"""Figures and tables for the notebooks: one theme, byte-stable files, paper layouts."""

from stamplib.report.figures import save_figure, set_theme
from stamplib.report.paper import (
    DATASET_LABELS,
    OUTLIER_LABELS,
    PAPER_METHOD_ORDER,
    TABLE4_METHOD_ORDER,
    compare,
    format_paper_vs_ours,
    method_label,
    paper_numbers,
    paper_value,
)
from stamplib.report.tables import results_frame, save_table, to_markdown

__all__ = [
    "DATASET_LABELS",
    "OUTLIER_LABELS",
    "PAPER_METHOD_ORDER",
    "TABLE4_METHOD_ORDER",
    "compare",
    "format_paper_vs_ours",
    "method_label",
    "paper_numbers",
    "paper_value",
    "results_frame",
    "save_figure",
    "save_table",
    "set_theme",
    "to_markdown",
]
