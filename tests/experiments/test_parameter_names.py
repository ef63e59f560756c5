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
from stamplib.evaluation.record import Mean, Record, Row
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import registry, tune
from stamplib.experiments.parameters import NotebookParameters

REPO = Path(__file__).resolve().parents[2]
SPEC_FIELDS = {f.name for f in dataclasses.fields(RunSpec)}
STREAM_FIELDS = StreamSpec.key_names() | set(SCHEDULE_FLAGS.values())
#: Flags of run that say how to compute and where, not what: no spec field.
EDGE_FLAGS = {"help", "set", "stream", "data_root", "results", "device", "force", "into_committed", "json",
              "deterministic"}
#: A notebook list takes the plural of its field's name.
PLURALS = {"methods": "method", "datasets": "dataset", "outlier_sets": "outlier_set", "seeds": "seed",
           "networks": "network", "outlier_ratios": "outlier_ratio"}
#: Notebook parameters that say how to compute and show (a lesson: with its solutions), not which cell.
EDGE_PARAMETERS = {"profile", "data_root", "scale", "device", "compute_missing", "metrics", "solutions"}
#: One item of a list field, as a lesson that shows one of a cell's corruptions names it.
SINGULARS = {"corruption": "corruptions"}


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
        # by its name, or a list by the plural of its field's name (outlier_sets → outlier_set): no other
        field = PLURALS.get(name, name)
        assert field in SPEC_FIELDS, f"NotebookParameters.{name} names no RunSpec field"
        assert field == name or name == f"{field}s", f"NotebookParameters.{name}: a list takes its field's plural"
    walked = set()
    planned = registry.registered()  # the notebooks whose cells a plan makes (01 and 11 compute their own)
    for notebook in sorted(p for p in (REPO / "notebooks").glob("*.ipynb") if p.stem in planned):
        own = planned[notebook.stem].own
        for name in _parameter_names(notebook):
            assert name in fields | set(own) | EDGE_PARAMETERS | set(SINGULARS), f"{notebook.name}: {name}"
            walked.add(name)
    # the three settings' tables take the source networks, notebook 08 its outlier ratios and every
    # table its outlier sets by their plural; the walkthrough its one outlier set by the field's name
    assert {"networks", "seeds", "outlier_ratio", "outlier_ratios", "outlier_sets", "outlier_set"} <= walked
    # the notebooks that compute their own cells (11, the explorer) name a field as the spec does
    explorer = _parameter_names(REPO / "notebooks/11_explore_a_stream.ipynb")
    assert {"method", "dataset", "outlier_set", "outlier_ratio", "severity", "seed"} <= explorer
    assert explorer <= SPEC_FIELDS | EDGE_PARAMETERS | set(SINGULARS) | {"max_id", "hyperparameters"}, explorer


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


def test_the_old_setting_flag_of_tune_sets_the_hyperparameter_set_with_a_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    made = []

    def capture(method: str, **fields: object) -> None:
        made.append(fields["hyperparameter_set"])
        raise ValueError("captured")

    monkeypatch.setattr(tune, "make_job", capture)
    for flag in ("--hyperparameter-set", "--setting"):
        assert cli.main(["tune", "tent", flag, "imagenet_c", "--profile", "smoke", "--results", str(tmp_path)]) == 2
    assert made == ["imagenet_c", "imagenet_c"]
    err = capsys.readouterr().err.splitlines()
    notes = [line for line in err if line.startswith("note:")]
    assert notes == ["note: `--setting` is now `--hyperparameter-set`; the old spelling goes in the next release"]


#: A committed tuning table: its cells' keys were computed before the rename, from spec dicts that
#: named the hyperparameter set explicitly under the old name, "setting".
TUNED_BEFORE_THE_RENAME = REPO / "results/tuning_real_images/tune__stamp__cifar10_jpeg__noise__cifar10_c__quick.csv"


def test_a_record_written_before_the_rename_loads_and_keeps_its_key(tmp_path: Path) -> None:
    header, first = TUNED_BEFORE_THE_RENAME.read_text().splitlines()[:2]
    row = dict(zip(header.split(","), first.split(",")))
    old = {"method": "stamp", "dataset": "cifar10_jpeg", "outliers": "noise", "corruptions": ["gaussian_noise"],
           "severity": 5, "outlier_ratio": 0.2, "seed": 0, "profile": "quick", "setting": "cifar10_c",
           "overrides": {"lr": float(row["lr"]), "alpha": float(row["alpha"])}}
    spec = RunSpec.from_dict(old)
    assert spec.hyperparameter_set == "cifar10_c" and spec.key() == row["key"]
    # the record file as the store wrote it before the rename: its spec names "setting"
    rows = {"gaussian_noise": Row({"acc": 80.0, "auroc": 70.0, "h": 74.7}, n_id=16, n_outliers=4)}
    ResultsStore(tmp_path).put(Record(key=spec.key(), spec=spec, per_corruption=rows, mean=Mean.of(rows)))
    path = ResultsStore(tmp_path).path(spec)
    written = json.loads(path.read_text())
    assert written["spec"]["hyperparameter_set"] == "cifar10_c" and "setting" not in written["spec"]
    written["spec"]["setting"] = written["spec"].pop("hyperparameter_set")
    path.write_text(json.dumps(written, indent=1, sort_keys=True))
    served = ResultsStore(tmp_path).get(spec)
    assert served is not None and served.key == row["key"] and served.spec == spec
    assert path.is_file() and not (tmp_path / ".grid" / "stale").exists()  # served, not set aside
    with pytest.raises(ValueError, match="names 'hyperparameter_set' twice"):
        RunSpec.from_dict({**old, "hyperparameter_set": "cifar10_c"})


def test_a_named_hyperparameter_set_keeps_the_key_it_had_as_a_setting() -> None:
    spec = RunSpec(method="tent", dataset="digits", outlier_set="noise", corruptions=("gaussian_noise", "contrast"),
                   profile="smoke", hyperparameter_set="imagenet_c", overrides=(("lr", 0.01),))
    fields = spec.to_dict()
    assert fields["hyperparameter_set"] == "imagenet_c" and "setting" not in fields
    old = {("setting" if name == "hyperparameter_set" else name): value for name, value in fields.items()}
    # afdd9fd681a664f5: this cell's key as the code before the rename computed it
    assert RunSpec.from_dict(old).key() == spec.key() == "afdd9fd681a664f5"
    assert "hyperparameter_set" not in spec.with_(hyperparameter_set="").to_dict()
    assert spec.with_(hyperparameter_set="").key() != spec.key()


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


def test_the_old_outliers_flag_of_run_and_tune_sets_the_outlier_set_with_a_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from stamplib.experiments import grid

    made: list[str] = []

    def capture_spec(spec: RunSpec, *args: object, **kwargs: object) -> None:
        made.append(spec.outlier_set)
        raise ValueError("captured")

    def capture_job(method: str, **fields: object) -> None:
        made.append(str(fields["outlier_set"]))
        raise ValueError("captured")

    monkeypatch.setattr(grid, "run_claimed", capture_spec)
    monkeypatch.setattr(tune, "make_job", capture_job)
    for flag in ("--outlier-set", "--outliers"):
        assert cli.main(["run", "--method", "tent", "--dataset", "digits", flag, "digits_heldout",
                         "--profile", "smoke", "--results", str(tmp_path)]) == 2
        assert cli.main(["tune", "tent", "--dataset", "digits", flag, "none", "--profile", "smoke",
                         "--results", str(tmp_path)]) == 2
    assert made == ["digits_heldout", "none"] * 2
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == ["note: `--outliers` is now `--outlier-set`; the old spelling goes in the next release"] * 2


def test_the_old_outliers_parameter_of_the_walkthrough_still_plans_with_a_note(
        capsys: pytest.CaptureFixture[str]) -> None:
    old = registry.plan("00_walkthrough", profile="smoke", outliers="digits_heldout")
    new = registry.plan("00_walkthrough", profile="smoke", outlier_set="digits_heldout")
    assert [s.key() for s in old.specs] == [s.key() for s in new.specs]
    assert {s.outlier_set for s in new.specs} == {"digits_heldout"}
    assert "`outliers` is now `outlier_set`" in capsys.readouterr().err
    from stamplib import notebook_runner

    assert notebook_runner.renamed_parameters({"outliers": "svhn", "seed": 1}) == {"outlier_set": "svhn", "seed": 1}
    assert "`outliers` is now `outlier_set`" in capsys.readouterr().err
    with pytest.raises(ValueError, match="name one parameter"):
        notebook_runner.renamed_parameters({"outliers": "svhn", "outlier_set": "noise"})


def test_a_record_that_names_its_outlier_set_outliers_loads_and_keeps_its_key(tmp_path: Path) -> None:
    """Every committed record names the outlier set ``outliers``, as the store wrote it before the
    rename: the store serves it under the key it had; a record written now names it ``outlier_set``."""
    committed = sorted((REPO / "results/builtin_benchmark").glob("stamp__cifar10_builtin__noise__*.json"))[0]
    stored = json.loads(committed.read_text())
    assert stored["spec"]["outliers"] == "noise" and "outlier_set" not in stored["spec"]
    spec = RunSpec.from_dict(stored["spec"])
    assert spec.outlier_set == "noise" and spec.key() == stored["key"]
    store = ResultsStore(tmp_path)
    assert store.path(spec).name == committed.name  # the file name holds the value, as before
    store.path(spec).write_text(committed.read_text())
    # as the committed store declares: its records' outputs files are not kept
    (tmp_path / "OUTPUTS_NOT_KEPT.txt").write_text((committed.parent / "OUTPUTS_NOT_KEPT.txt").read_text())
    served = ResultsStore(tmp_path).get(spec)
    assert served is not None and served.key == stored["key"] and served.spec == spec
    assert store.path(spec).is_file() and not (tmp_path / ".grid" / "stale").exists()  # served, not set aside
    written = served.to_json()["spec"]
    assert written["outlier_set"] == "noise" and "outliers" not in written
    with pytest.raises(ValueError, match="names 'outlier_set' twice"):
        RunSpec.from_dict({**stored["spec"], "outlier_set": "noise"})


def test_an_outlier_set_keeps_the_key_it_had_as_outliers() -> None:
    spec = RunSpec(method="stamp", dataset="digits", outlier_set="digits_heldout", corruptions=("fog", "contrast"),
                   profile="smoke", outlier_ratio=0.1)
    fields = spec.to_dict()
    assert fields["outlier_set"] == "digits_heldout" and "outliers" not in fields
    old = {("outliers" if name == "outlier_set" else name): value for name, value in fields.items()}
    # 6d3e31afc7716ece: this cell's key as the code before the rename computed it
    assert RunSpec.from_dict(old).key() == spec.key() == "6d3e31afc7716ece"
    # a closed-set cell too (its ratio is 0): bfc553e379e54636 before the rename
    closed = RunSpec(method="tent", dataset="digits", outlier_set="none", corruptions=("fog",), profile="smoke")
    assert closed.key() == "bfc553e379e54636" and closed.with_(outlier_set="noise").key() != closed.key()
