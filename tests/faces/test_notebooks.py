"""Every notebook runs end to end under papermill in the smoke profile, and is committed clean."""

from __future__ import annotations

import json

import pytest

from stamplib.experiments import course
from stamplib.notebook_runner import check_parameters, discover, notebook_parameters

NOTEBOOKS = discover()


def test_there_are_notebooks():
    assert any(nb.stem == "00_walkthrough" for nb in NOTEBOOKS)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean_with_one_typed_parameters_cell(nb, caplog):
    cells = json.loads(nb.read_text())["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    assert not any(c.get("outputs") or c.get("execution_count") for c in cells if c["cell_type"] == "code")
    params = notebook_parameters(nb)
    assert "Unable to parse" not in caplog.text  # every parameter line must be documented by papermill
    code_lines = [ln for ln in "".join(tagged[0]["source"]).splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(params) == len(code_lines)
    assert {"profile", "device", "data_root"} <= set(params)
    assert all(p["inferred_type_name"] != "None" for p in params.values())
    with pytest.raises(ValueError, match="unknown parameter"):
        check_parameters(nb, {"epcohs": 3})


#: Notebooks whose every cell tests/teaching/test_sections.py already runs with these parameters (and checks
#: each section shows something): their papermill run here repeats it, so it runs with -m slow.
RUN_BY_THE_SECTION_TEST = {"00_walkthrough", *(e.notebook for e in course.LESSONS)}


@pytest.mark.parametrize("nb", [pytest.param(nb, marks=pytest.mark.slow) if nb.stem in RUN_BY_THE_SECTION_TEST
                                else nb for nb in NOTEBOOKS], ids=lambda p: p.stem)
def test_notebook_runs_in_smoke_profile(nb, tmp_path):
    import papermill

    params: dict[str, object] = {"profile": "smoke"}
    if "solutions" in notebook_parameters(nb):  # the course's exercises: reference solutions, whole notebook
        params["solutions"] = True
    if "metrics" in notebook_parameters(nb):  # the method tables show any metric on request
        params["metrics"] = "h,fpr95,aupr_out,oscr"
    papermill.execute_notebook(
        str(nb), str(tmp_path / nb.name), parameters=params,
        kernel_name="python3", cwd=str(nb.parent), progress_bar=False, execution_timeout=600,
    )
    if "metrics" in params:
        # the table itself, not its <name>_ranking.md beside it (the digits benchmark's rank agreement)
        table = next(p for p in (tmp_path / "figures").glob(f"{nb.stem}*.md")
                     if not p.stem.endswith("_ranking")).read_text()
        header = table.splitlines()[0]
        assert all(f"{m} ours" in header for m in ("H", "FPR95", "AUPR-Out", "OSCR")) and "ACC ours" not in header
