"""One name and one check per parameter: every flag of ``run`` and every notebook parameter walks
to the spec field it sets (``RunSpec``, ``StreamSpec``) under that field's name (a notebook's list
under its plural), and a cell's values are checked by the spec alone above the data layer."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
from pathlib import Path

import pytest

from stamplib import cli
from stamplib.data import SCHEDULE_FLAGS, StreamSpec
from stamplib.evaluation.spec import RunSpec
from stamplib.experiments import registry
from stamplib.experiments.parameters import NotebookParameters

REPO = Path(__file__).resolve().parents[2]
SPEC_FIELDS = {f.name for f in dataclasses.fields(RunSpec)}
STREAM_FIELDS = StreamSpec.key_names() | set(SCHEDULE_FLAGS.values())
#: Flags of run that say how to compute and where, not what: no spec field.
EDGE_FLAGS = {"help", "set", "stream", "data_root", "results", "device", "force", "into_committed", "json",
              "deterministic"}
#: A notebook list takes the plural of its field's name.
PLURALS = {"methods": "method", "datasets": "dataset", "seeds": "seed", "networks": "network",
           "outlier_ratios": "outlier_ratio"}
#: Notebook parameters that say how to compute and show (a lesson: with its solutions), not which cell.
EDGE_PARAMETERS = {"profile", "data_root", "scale", "device", "compute_missing", "metrics", "solutions"}
#: One item of a list field, as a lesson that shows one of a cell's corruptions names it.
SINGULARS = {"corruption": "corruptions"}
#: The one second name left: the notebooks' list of outlier sets, whose field is ``outliers``.
SECOND_NAMES = {"outlier_sets": "outliers"}


def _run_parser() -> argparse.ArgumentParser:
    [sub] = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices["run"]


def test_every_run_flag_is_the_spec_field_of_its_name() -> None:
    for action in _run_parser()._actions:
        assert action.dest in SPEC_FIELDS | STREAM_FIELDS | EDGE_FLAGS, action.option_strings
        if action.help == argparse.SUPPRESS:  # an old spelling: it sets the new flag's field, and says so
            assert isinstance(action, cli.common.OldSpelling), action.option_strings
            continue
        if action.dest not in ("help", "stream"):
            assert f"--{action.dest.replace('_', '-')}" in action.option_strings, action.option_strings


def test_run_hands_each_flag_to_its_field(monkeypatch: pytest.MonkeyPatch) -> None:
    from stamplib.experiments import grid

    made = []

    def capture(spec: RunSpec, *args: object, **kwargs: object) -> None:
        made.append(spec)
        raise ValueError("captured")

    monkeypatch.setattr(grid, "run_claimed", capture)
    argv = ["run", "--method", "tent", "--network", "1", "--outlier-ratio", "0.1", "--severity", "3", "--seed", "2",
            "--corruptions", "fog,contrast", "--profile", "smoke", "--batch-size", "16"]
    assert cli.main(argv) == 2
    [spec] = made
    assert (spec.network, spec.outlier_ratio, spec.severity, spec.seed, spec.corruptions, spec.profile) == (
        1, 0.1, 3, 2, ("fog", "contrast"), "smoke")
    assert spec.stream.batch_size == 16


def _parameter_names(notebook: Path) -> set[str]:
    cells = json.loads(notebook.read_text())["cells"]
    source = next(("".join(c["source"]) for c in cells if "parameters" in c["metadata"].get("tags", [])), "")
    return {node.target.id for node in ast.parse(source).body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


def test_every_notebook_parameter_walks_to_its_field_by_one_name() -> None:
    fields = {f.name for f in dataclasses.fields(NotebookParameters)}
    for name in fields - EDGE_PARAMETERS:
        field = PLURALS.get(name, SECOND_NAMES.get(name, name))
        assert field in SPEC_FIELDS, f"NotebookParameters.{name} names no RunSpec field"
    walked = set()
    planned = registry.registered()  # the notebooks whose cells a plan makes (01, 11 compute their own)
    for notebook in sorted(p for p in (REPO / "notebooks").glob("*.ipynb") if p.stem in planned):
        own = planned[notebook.stem].own
        for name in _parameter_names(notebook):
            assert name in fields | set(own) | EDGE_PARAMETERS | set(SINGULARS), f"{notebook.name}: {name}"
            walked.add(name)
    # the three settings' tables take the source networks, and notebook 08 its outlier ratios by their plural
    assert {"networks", "seeds", "outlier_ratio", "outlier_ratios"} <= walked
    assert {n for n in walked if n in SECOND_NAMES} == set(SECOND_NAMES)


def test_the_old_spelling_of_a_notebook_list_still_plans_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    old = registry.plan("08_table6_outlier_ratio", profile="smoke", ratios="0.05,1/3")
    new = registry.plan("08_table6_outlier_ratio", profile="smoke", outlier_ratios="0.05,1/3")
    assert [s.key() for s in old.specs] == [s.key() for s in new.specs]
    assert "`ratios` is now `outlier_ratios`" in capsys.readouterr().err


def test_a_list_parameter_given_by_its_singular_is_refused_naming_the_plural() -> None:
    with pytest.raises(ValueError, match=r"a list takes the plural: networks="):
        registry.check_parameter_names(["02_table1_cifar_outlier_aware"], ["network"])
    with pytest.raises(ValueError) as refused:
        registry.check_parameter_names(["02_table1_cifar_outlier_aware"], ["netwrok"])
    assert "plural" not in str(refused.value)


def test_a_cells_values_are_checked_by_the_spec_alone_above_the_data_layer() -> None:
    """Severity and outlier ratio are checked by the spec of one corruption's stream
    (``data.CorruptionStreamSpec``), which RunSpec makes for each of its corruptions, and the
    network by RunSpec; the notebook parameters, the command line and the layers below the specs
    hand them over unchecked (the data layer's own functions that a caller uses without a spec,
    the corruption generator among them, keep theirs)."""
    checks = ("check_severity", "check_outlier_ratio", "check_network")
    found = []
    for path in sorted((REPO / "stamplib").rglob("*.py")):
        if path.name == "validation.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in checks:
                    found.append(f"{path.relative_to(REPO)}: {name}")
    by_the_specs = ["stamplib/data/streams.py: check_outlier_ratio", "stamplib/data/streams.py: check_severity",
                    "stamplib/evaluation/spec.py: check_network"]
    # the corruption generator and the released-set reader, and the gradual schedule's peak: callable alone
    standalone = ["stamplib/data/corruptions.py: check_severity", "stamplib/data/loaders.py: check_severity",
                  "stamplib/data/streams.py: check_severity"]
    assert sorted(found) == sorted(by_the_specs + standalone), found
    with pytest.raises(ValueError, match="must be in"):
        registry.plan("02_table1_cifar_outlier_aware", profile="smoke", outlier_ratio="1.5")
    with pytest.raises(ValueError, match="severity must be an integer"):
        RunSpec(method="source", corruptions=("fog", "contrast"), severity=6)
