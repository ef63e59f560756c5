"""A notebook's shared parameters: parsed once into NotebookParameters, where every check and
its message live (the plans built from them: test_plans.py)."""

from __future__ import annotations

import pytest

from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation import metrics
from stamplib.experiments import registry
from stamplib.experiments.parameters import NotebookParameters


def test_text_from_a_parameters_cell_or_the_command_line_becomes_typed_values():
    params = NotebookParameters.parse(profile="smoke", methods="tent, stamp", seeds="0,2", severity="3",
                                      outlier_ratio="0.1", corruptions="all", metrics="h,oscr")
    assert params.methods == ("tent", "stamp") and params.seeds == (0, 2)
    assert params.severity == 3 and params.outlier_ratio == 0.1 and params.corruptions == CORRUPTIONS
    assert params.metrics == ("h", "oscr") and params.scale == "builtin"
    default = NotebookParameters.parse(profile="full")
    assert default.methods == () and default.corruptions == CORRUPTIONS and default.scale == "paper"
    assert default.metrics == metrics.PAPER_METRICS and default.device == "cpu" and default.compute_missing


def test_a_notebook_namespace_gives_its_parameters_and_nothing_else():
    namespace = {"profile": "smoke", "data_root": "/data", "severity": 4, "weightings": "static",
                 "metrics": metrics, "In": [], "registry": registry}  # evaluation.metrics imported by 00
    params = NotebookParameters.from_notebook(namespace)
    assert (params.profile, params.data_root, params.severity, params.scale) == ("smoke", "/data", 4, "real")
    assert params.metrics == metrics.PAPER_METRICS


def test_compute_missing_is_a_flag():
    with pytest.raises(ValueError, match="compute_missing must be True or False, got 'no'"):
        NotebookParameters.parse(compute_missing="no")


def test_parsed_parameters_plan_what_the_keywords_plan():
    params = NotebookParameters.parse(profile="smoke", seeds="0,1")
    parsed = registry.plan("07_fig_weight_strategies", params, weightings="static,eata")
    keywords = registry.plan("07_fig_weight_strategies", profile="smoke", seeds="0,1", weightings="static,eata")
    assert parsed == keywords and len(parsed.cells) == 4
    with pytest.raises(TypeError, match=r"\['seeds'\] are in the parsed parameters already"):
        registry.plan("07_fig_weight_strategies", params, seeds="0")


def test_several_notebooks_parse_their_parameters_once(monkeypatch):
    calls = []
    parse = NotebookParameters.parse.__func__
    monkeypatch.setattr(NotebookParameters, "parse",
                        classmethod(lambda cls, **kw: calls.append(kw) or parse(cls, **kw)))
    registry.cells(["02", "06", "07", "10"], profile="smoke", severity="4")
    assert len(calls) == 1


def test_a_notebook_that_only_reads_records_needs_no_data_root(tmp_path):
    """The reference run renders its committed records on a fresh clone without shared/data:
    its notebooks get the default data root, which does not exist there, and compute nothing."""
    missing = str(tmp_path / "no_data_here")
    reading = NotebookParameters.parse(profile="quick", data_root=missing, compute_missing=False)
    assert str(reading.run_context().data_root) == missing
    computing = NotebookParameters.parse(profile="quick", data_root=missing)
    with pytest.raises(ValueError, match="is not a folder"):
        computing.run_context()
