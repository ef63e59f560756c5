"""Tables and figures: records → frames (:mod:`.frames`), the paper's numbers and paper-vs-ours
tables (:mod:`.paper`, :mod:`.reproduce`), table files (:mod:`.tables`), one figure theme
(:mod:`.figures`) and the walkthrough's plots (:mod:`.walkthrough`)."""

from stamplib.evaluation.metrics import METRIC_LABELS
from stamplib.report import reproduce, walkthrough
from stamplib.report.figures import save_figure, set_theme
from stamplib.report.frames import is_collapsed, over_seeds, plan_frame, results_frame
from stamplib.report.paper import (
    DATASET_LABELS,
    OUTLIER_LABELS,
    TABLE4_METHOD_ORDER,
    compare,
    format_paper_vs_ours,
    method_label,
    paper_numbers,
    paper_value,
)
from stamplib.report.tables import save_table, to_markdown

__all__ = [
    "DATASET_LABELS",
    "METRIC_LABELS",
    "OUTLIER_LABELS",
    "TABLE4_METHOD_ORDER",
    "compare",
    "format_paper_vs_ours",
    "is_collapsed",
    "method_label",
    "over_seeds",
    "paper_numbers",
    "paper_value",
    "plan_frame",
    "reproduce",
    "results_frame",
    "save_figure",
    "save_table",
    "set_theme",
    "to_markdown",
    "walkthrough",
]
