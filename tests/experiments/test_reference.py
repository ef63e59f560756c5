"""Provenance of records and the committed reference run (issue 15): what a record names, how a
recomputation is compared with the committed records, the STAMP seed spread."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path
from unittest import mock

import pytest
import torch

from stamplib import methods
from stamplib.data import downloads
from stamplib.evaluation import provenance
from stamplib.evaluation.record import Checkpoint, Record
from stamplib.evaluation.runner import run
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import reference
from stamplib.models import checkpoints
from stamplib.models.builtin import DIGITS_CHECKPOINT
from tests.support import context_for, pretend_gpus


def test_a_record_names_its_checkpoint_data_code_and_command(
    tmp_path: Path, digits_model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = RunSpec(method="source", corruptions=("gaussian_noise",), profile="smoke")
    record = run(spec, context_for(tmp_path, command="python -m stamplib run --method source"))
    made = record.provenance
    side = checkpoints.read_sidecar(checkpoints.checkpoint_path(DIGITS_CHECKPOINT))
    assert made.checkpoint == Checkpoint(DIGITS_CHECKPOINT, side["sha256"], side["clean_test_accuracy"])
    assert made.data == {"name": "digits", "builtin": True}
    assert made.command == "python -m stamplib run --method source"
    assert set(made.git) == {"commit", "dirty"}
    # provenance is not part of what a record says: the stored record reads back equal
    assert ResultsStore(tmp_path).get(spec).provenance == made


def test_data_provenance_hashes_the_archive_in_the_data_root(data_root: Path) -> None:
    expected = downloads.RESOURCES["cifar10_jpeg"].sha256
    absent = provenance.data_provenance("cifar10_jpeg_8_2", data_root)
    assert absent == {"name": "cifar10_jpeg_8_2", "archive": "cifar10-jpeg.tar.gz", "sha256": None,
                      "expected_sha256": expected}
    (data_root / "cifar10-jpeg.tar.gz").write_bytes(gzip.compress(b"not the real archive"))
    present = provenance.data_provenance("cifar10_jpeg", data_root)
    assert present["sha256"] == downloads.file_digest(data_root / "cifar10-jpeg.tar.gz")
    assert present["sha256"] != expected  # a different file is visible as such


def test_data_provenance_reads_the_unpack_marker_when_only_the_folder_is_there(tmp_path: Path) -> None:
    import io
    import tarfile

    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w:gz") as tar:
        image = b"jpeg bytes"
        info = tarfile.TarInfo("test/airplane/0000.jpg")
        info.size = len(image)
        tar.addfile(info, io.BytesIO(image))
    archive = tmp_path / "cifar10-jpeg.tar.gz"
    archive.write_bytes(payload.getvalue())
    digest = downloads.file_digest(archive)
    resource = dataclasses.replace(downloads.RESOURCES["cifar10_jpeg"], sha256=digest)
    with mock.patch.dict(downloads.RESOURCES, {"cifar10_jpeg": resource}):
        downloads.fetch("cifar10_jpeg", tmp_path, download_missing=False)
        archive.unlink()  # the folder alone travels on, as to a GPU machine
        made = provenance.data_provenance("cifar10_jpeg", tmp_path)
    assert made["sha256"] == digest and made["sha256_from"] == downloads.UNPACK_MARKER
    assert (tmp_path / "cifar10-jpeg" / "test" / "airplane" / "0000.jpg").read_bytes() == b"jpeg bytes"


def _json(spec: RunSpec, acc: float, auroc: float) -> dict:
    per = {c: {"acc": acc, "auroc": auroc, "h": 0.0} for c in spec.corruptions}
    return {"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per, "mean": per[spec.corruptions[0]]}


def _record(spec: RunSpec, acc: float, auroc: float) -> Record:
    return Record.from_json(_json(spec, acc, auroc))


def test_recompute_comparison_uses_point_one_for_deterministic_methods_and_the_seed_spread_otherwise(
    tmp_path: Path,
) -> None:
    committed, again = ResultsStore(tmp_path / "ref"), ResultsStore(tmp_path / "new")
    cells = reference.specs()  # planning needs no data
    stamp_seeds = [s for s in cells if s.method == "stamp" and s.dataset == "cifar10_jpeg" and s.outlier_set == "noise"]
    assert sorted(s.seed for s in stamp_seeds) == [0, 1, 2]
    for spec, acc in zip(sorted(stamp_seeds, key=lambda s: s.seed), (80.0, 80.6, 79.9)):
        committed.put(_record(spec, acc, 70.0))
    assert reference.seed_spread(committed) == pytest.approx(0.7)

    tent = next(s for s in cells if s.method == "tent" and s.outlier_set == "noise")
    cotta = next(s for s in cells if s.method == "cotta" and s.outlier_set == "noise")
    committed.put(_record(tent, 60.0, 55.0))
    committed.put(_record(cotta, 50.0, 45.0))
    again.put(_record(tent, 60.05, 55.2))  # AUROC moved 0.2 > 0.1
    again.put(_record(cotta, 50.5, 45.0))  # within STAMP's 0.7
    for spec in stamp_seeds:
        again.put(committed.get(spec))
    result = reference.compare_stores(committed, again, cells)
    assert result.compared == 5 and result.spread == pytest.approx(0.7)
    assert {(d.key, d.metric) for d in result.differences} == {(tent.key(), "auroc")}
    assert len(result.differences) == len(tent.corruptions)
    assert "committed 55.00, recomputed 55.20" in str(result.differences[0])


def test_without_a_seed_spread_stochastic_methods_stay_unchecked(tmp_path: Path) -> None:
    committed, again = ResultsStore(tmp_path / "ref"), ResultsStore(tmp_path / "new")
    cells = reference.specs()
    rotta = next(s for s in cells if s.method == "rotta")
    committed.put(_record(rotta, 50.0, 50.0))
    again.put(_record(rotta, 10.0, 10.0))
    result = reference.compare_stores(committed, again, cells)
    assert result.spread is None and result.compared == 0 and result.unchecked == [rotta.key()]


def test_a_missing_or_nan_metric_counts_as_a_difference() -> None:
    spec = RunSpec(method="source", corruptions=("gaussian_noise", "contrast"))
    ref = _record(spec, 50.0, 50.0)
    new = _json(spec, 50.0, 50.0)
    new["per_corruption"]["contrast"]["auroc"] = float("nan")
    del new["per_corruption"]["gaussian_noise"]
    new = Record.from_json(new)
    found = {(d.corruption, d.metric) for d in reference.compare_records(ref, new, 0.1)}
    assert found == {("gaussian_noise", "acc"), ("gaussian_noise", "auroc"), ("contrast", "auroc")}


def test_a_closed_set_record_without_auroc_equals_its_recomputation() -> None:
    """No outliers, no AUROC: NaN on both sides is agreement (it once flagged every closed-set
    cell of a recomputation as different)."""
    spec = RunSpec(method="source", outlier_set="none", corruptions=("gaussian_noise",))
    ref, new = _record(spec, 50.0, float("nan")), _json(spec, 50.04, float("nan"))
    assert reference.compare_records(ref, Record.from_json(new), 0.1) == []
    new["per_corruption"]["gaussian_noise"]["acc"] = 51.0
    new = Record.from_json(new)
    assert [(d.corruption, d.metric) for d in reference.compare_records(ref, new, 0.1)] == [("gaussian_noise", "acc")]


def test_the_reference_data_root_is_named_relative_to_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STAMPLIB_DATA_ROOT", raising=False)
    root = reference.default_data_root()
    assert root.parts[-2:] == ("shared", "data")
    assert root.parent.parent == Path(__file__).resolve().parents[3]  # <repo>/../shared/data


def test_the_doctor_names_shared_data_beside_the_checkout(data_root: Path) -> None:
    from stamplib import data, paths

    hints = {name: where for name, _, where in data.dataset_status(data_root)}
    assert str(paths.shared_data()) in hints["cifar10_jpeg"]
    assert "/work/" not in hints["cifar10_jpeg"].replace(str(paths.shared_data()), "")


def test_recompute_reports_the_largest_difference_and_can_take_the_deterministic_methods_only(
    tmp_path: Path,
) -> None:
    cells = reference.specs()
    chosen = reference.select_methods(cells, "deterministic")
    assert {s.method for s in chosen} == set(reference.DETERMINISTIC)
    assert len(chosen) == 3 * len(reference.DETERMINISTIC)  # settings (a), (b) and (c)
    assert {s.method for s in reference.select_methods(cells, "stamp,tent")} == {"stamp", "tent"}
    assert reference.select_methods(cells, "") == cells
    with pytest.raises(ValueError, match="no reference cell of \\['tenet'\\]"):
        reference.select_methods(cells, "tenet")

    committed, again = ResultsStore(tmp_path / "ref"), ResultsStore(tmp_path / "new")
    tent, source = (next(s for s in cells if s.method == m and s.outlier_set == "noise") for m in ("tent", "source"))
    committed.put(_record(tent, 60.0, 55.0))
    committed.put(_record(source, 40.0, 45.0))
    again.put(_record(tent, 60.03, 55.0))
    again.put(_record(source, 40.0, 44.95))
    result = reference.compare_stores(committed, again, [tent, source])
    assert result.differences == []  # both within 0.1 pt
    assert result.largest is not None and (result.largest.key, result.largest.metric) == (source.key(), "auroc")
    assert abs(result.largest.recomputed - result.largest.reference) == pytest.approx(0.05)


def test_owttt_is_held_to_the_seed_spread_because_rounding_moves_it() -> None:
    """A recomputation of an OWTTT record on a CPU without AVX-512 moved 3 predictions of 2,000
    (0.15 pt), on an H100 2.45 pt: 0.1 pt would fail any machine but the one that wrote it."""
    assert reference.tolerance_for("tent", 17.98) == reference.DETERMINISTIC_TOLERANCE
    assert reference.tolerance_for("owttt", 17.98) == 17.98 and reference.tolerance_for("owttt", None) is None
    assert reference.tolerance_for("stamp", 17.98) == 17.98
    spec = next(s for s in reference.specs() if s.method == "owttt" and s.outlier_set == "heldout_classes")
    committed, again = _record(spec, 58.0, 47.0), _record(spec, 58.15, 47.0)
    assert reference.compare_records(committed, again, reference.tolerance_for("owttt", 17.98)) == []
    assert reference.compare_records(committed, again, reference.DETERMINISTIC_TOLERANCE) != []


def test_the_optional_cells_follow_the_issue_and_repeat_no_reference_cell() -> None:
    core = reference.specs()
    extra = reference.extra_specs()
    assert not {s.key() for s in core} & {s.key() for s in extra}
    assert len(core) == 44
    full = [s for s in extra if len(s.corruptions) == 15]
    assert [s.method for s in full] == ["source", "bn_stats", "tent", "stamp"]
    assert all(s.dataset == "cifar10_jpeg" and s.outlier_set == "noise" for s in extra)
    assert dict(extra[4].overrides) == {"num_views": 1}
    streams = 11 * 4  # notebook 13: batches of 4 and 16, sorted labels, mixed domains; the ten and UniEnt
    seeded = 9 * 2  # the paper's ten over seeds 1 and 2 in (a), STAMP's being reference cells
    assert len(extra) == 4 + 1 + 6 + 14 + 2 + 16 + 4 + streams + seeded  # Table 5's last row is STAMP's default
    stress = reference.stress_specs()
    assert stress == extra[25:-seeded]
    over_seeds = reference.seeded_specs()
    assert over_seeds == extra[-seeded:]
    assert {(s.method, s.seed) for s in over_seeds} == {(m, seed) for m in methods.PAPER_ORDER if m != "stamp"
                                                        for seed in (1, 2)}
    assert all(s.outlier_set == "noise" and s.outlier_ratio == 0.2 and not s.overrides for s in over_seeds)
    assert [dict(s.overrides).get("weighting") for s in stress[:2]] == ["static", "eata"]
    stamp_ratios = [s.outlier_ratio for s in stress if s.method == "stamp" and not s.overrides and
                    s.outlier_ratio != 0.2]
    assert stamp_ratios == [0.05, 0.5, 0.1, 1 / 3]
    harder = [s for s in stress if s.stream.batch_size != 64 or s.stream.label_shift or s.stream.schedule == "mixed"]
    assert len(harder) == streams and {s.method for s in harder} == {*methods.PAPER_ORDER, "unient"}
    assert [s.method for s in harder[:20]] == [m for m in ("source", "bn_stats", "tent", "eata",
                                                           "sar") for _ in range(4)]
    assert [s.method for s in extra if s.stream.realistic] == list(methods.TABLE_ORDER)
    assert all(s.stream.relative_speed == 0 and len(s.corruptions) == 3 for s in extra if s.stream.realistic)


@pytest.mark.parametrize(("flags", "want_core", "want_extras"), [
    (["--cells", "core"], True, False), (["--cells", "extras"], False, True), (["--cells", "all"], True, True),
    (["--cells", "stress"], False, False), (["--cells", "seeds"], False, False),
    # the old spelling, reference compute, still leads there for one release
    (["old", "--extras"], True, True), (["old"], True, False),
])
def test_claims_compute_reference_takes_the_cells_asked_for_on_the_device_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], want_core: bool, want_extras: bool
) -> None:
    """``--cells extras --device cuda`` sends the optional cells alone to a GPU (the 44 stay on
    the machine that computed the others); nothing is computed here, run_grid is a stand-in."""
    from stamplib import cli
    from stamplib.experiments import grid

    calls = []

    def fake_run_grid(specs, context, options, *, keep_order):
        assert context.data_root == tmp_path  # passed down, not left in the environment
        calls.append((list(specs), context.device))
        return grid.GridReport(done=list(specs))

    pretend_gpus(monkeypatch)  # a GPU machine's command line

    monkeypatch.setattr(grid, "run_grid", fake_run_grid)
    door = ["reference", "compute"] if flags[:1] == ["old"] else ["claims", "compute", "--benchmark", "reference"]
    flags = [f for f in flags if f != "old"]
    argv = [*door, "--results", str(tmp_path), "--data-root", str(tmp_path), "--device", "cuda"]
    assert cli.main(argv + flags) == 0
    [(specs, device)] = calls
    core, extras = reference.specs(), reference.extra_specs()
    assert device == "cuda"
    stress = reference.stress_specs() if flags == ["--cells", "stress"] else []
    seeded = reference.seeded_specs() if flags == ["--cells", "seeds"] else []
    assert specs == (core if want_core else []) + (extras if want_extras else []) + stress + seeded


def test_recompute_can_take_one_setting_so_one_source_model_is_enough() -> None:
    cells = reference.specs()
    a, c = reference.select_settings(cells, "a"), reference.select_settings(cells, "c")
    assert {s.outlier_set for s in a} == {"noise"} and {s.dataset for s in a} == {"cifar10_jpeg"}
    assert {s.outlier_set for s in c} == {"none"} and {s.dataset for s in c} == {"cifar10_jpeg"}
    assert len(a) == 14 + 2  # the fourteen methods and STAMP's seeds 1 and 2
    b = reference.select_settings(cells, "b")
    assert {s.dataset for s in b} == {"cifar10_jpeg_8_2"}
    assert sorted(s.key() for s in a + b + c) == sorted(s.key() for s in cells)
    assert reference.select_settings(cells, "") == cells
    with pytest.raises(ValueError, match="unknown setting"):
        reference.select_settings(cells, "d")


def test_recompute_covers_the_stress_cells_that_are_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``reference recompute --cells stress`` recomputes the stored Fig. 3, Table 6 and notebook
    13 records (run_grid is a stand-in that copies them, so every one compares equal)."""
    from stamplib import cli
    from stamplib.experiments import grid

    store = ResultsStore(tmp_path / "ref")
    stored = reference.stress_specs()[:3]
    for spec in stored:
        store.put(_record(spec, 70.0, 80.0), None)
    asked = []

    def fake_run_grid(specs, context, options, *, keep_order):
        asked.extend(specs)
        for spec in specs:
            ResultsStore(context.results).put(_record(spec, 70.0, 80.0), None)
        return grid.GridReport(done=list(specs))

    monkeypatch.setattr(grid, "run_grid", fake_run_grid)
    argv = ["reference", "recompute", "--cells", "stress", "--results", str(tmp_path / "ref"),
            "--scratch", str(tmp_path / "new"), "--data-root", str(tmp_path)]
    assert cli.main(argv) == 0
    assert [s.key() for s in asked] == [s.key() for s in stored]
