"""Figures and tables for the notebooks: one theme, byte-stable files, paper layouts."""

from stamplib.report.figures import save_figure, set_theme
from stamplib.report.tables import results_frame, save_table, to_markdown

__all__ = ["results_frame", "save_figure", "save_table", "set_theme", "to_markdown"]
