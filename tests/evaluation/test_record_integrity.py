"""A record is served only when it is whole and consistent: its metrics are numbers, its mean
follows from its rows, its outputs file exists and matches its digest. Anything else is moved
aside with a one-line warning and recomputed; the committed stores pass as they are."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from stamplib.data import downloads
from stamplib.evaluation import store as store_module
from stamplib.evaluation.outputs import NoOutputsError, StreamOutputs, record_outputs
from stamplib.evaluation.record import Mean, Record, Row
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import OUTPUTS_NOT_KEPT, OutOfSpace, ResultsStore, add_outputs_digest

REPO = Path(__file__).resolve().parents[2]


def _spec(**kw) -> RunSpec:
    return RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke",
                   corruptions=("gaussian_noise", "fog"), **kw)


def _outputs(n: int = 20, shift: int = 0) -> dict[str, StreamOutputs]:
    labels = np.where(np.arange(n) % 5 == 0, -1, np.arange(n) % 3).astype(np.int16)
    return {c: StreamOutputs(prediction=((labels + shift) % 3).astype(np.int16),
                             ood_score=np.linspace(0, 1, n, dtype=np.float32), label=labels,
                             index=np.arange(n, dtype=np.int32)) for c in ("gaussian_noise", "fog")}


def _stored(store: ResultsStore, spec: RunSpec | None = None) -> Record:
    """A record as the runner stores it: rows scored from outputs, their mean, the outputs file."""
    spec = spec or _spec()
    outputs = _outputs()
    rows = {c: Row(out.score(), collapsed=False, collapse_reason=None, n_id=16, n_outliers=4)
            for c, out in outputs.items()}
    record = Record(key=spec.key(), spec=spec, per_corruption=rows, mean=Mean.of(rows), collapsed=())
    return store.put(record, outputs)


def _edit(store: ResultsStore, spec: RunSpec, change) -> None:  # noqa: ANN001 - a function of the dict
    path = store.path(spec)
    stored = json.loads(path.read_text())
    change(stored)
    path.write_text(json.dumps(stored, indent=1, sort_keys=True))


def _refused(store: ResultsStore, spec: RunSpec, reason: str) -> None:
    """The record of ``spec`` is not served: set aside, with one warning line naming ``reason``."""
    with pytest.warns(UserWarning, match=reason) as caught:
        assert store.get(spec) is None
    assert all("\n" not in str(w.message) for w in caught)
    assert not store.path(spec).exists(), "a stale record stays where it would be served"
    assert any(p.name.endswith(store.path(spec).name) for p in (store.grid_dir / "stale").iterdir())
    assert store.status([spec]).missing == [spec]


def test_a_whole_record_is_served_with_its_digest(tmp_path):
    store = ResultsStore(tmp_path)
    record = _stored(store)
    assert record.outputs_sha256 == downloads.file_digest(tmp_path / record.outputs, "sha256")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.get(record.spec) == record
        assert store.records() == [record]


@pytest.mark.parametrize("change, reason", [
    (lambda d: d["mean"].update(h=12.3), "the mean h is 12.3, but its corruptions average"),
    (lambda d: d["per_corruption"]["fog"].update(acc=None), "fog's acc is None, not a number"),
    (lambda d: d["per_corruption"]["fog"].update(auroc="84.2"), "fog's auroc is '84.2', not a number"),
    (lambda d: d["per_corruption"]["fog"].update(acc=float("inf")), "fog's acc is inf"),
    (lambda d: d["per_corruption"]["fog"].update(auroc=float("nan")), "fog's auroc is nan"),
    (lambda d: d["mean"].update(acc="high"), "the mean acc is 'high', not a number"),
    (lambda d: d.update(outputs_sha256="0" * 64), "does not match the record's digest"),
    (lambda d: d.update(outputs="../elsewhere.outputs.npz"), "is not a file of the store"),
    (lambda d: d.update(key="0123456789abcdef"), "holds the record of cell 0123456789abcdef"),
    (lambda d: d.pop("spec"), "incomplete"),
])
def test_a_tampered_field_is_set_aside_and_never_served(tmp_path, change, reason):
    store = ResultsStore(tmp_path)
    record = _stored(store)
    _edit(store, record.spec, change)
    _refused(store, record.spec, reason)
    assert store.records() == []


def test_a_missing_truncated_or_replaced_outputs_file_makes_its_record_stale(tmp_path):
    store = ResultsStore(tmp_path)
    record = _stored(store)
    (tmp_path / record.outputs).unlink()
    _refused(store, record.spec, "outputs file .* is missing")

    record = _stored(store)
    data = (tmp_path / record.outputs).read_bytes()
    (tmp_path / record.outputs).write_bytes(data[: len(data) // 2])
    _refused(store, record.spec, "truncated or damaged")
    assert not (tmp_path / record.outputs).exists()  # set aside with its record

    record = _stored(store)
    store_module.save_outputs(tmp_path / record.outputs, _outputs(shift=1))  # whole, but another run's
    _refused(store, record.spec, "does not match the record's digest")


def test_a_record_without_a_digest_loads_as_current_while_its_outputs_are_whole(tmp_path):
    """Records written before the digest: served, their outputs file checked to be a whole archive."""
    store = ResultsStore(tmp_path)
    record = _stored(store)
    _edit(store, record.spec, lambda d: d.pop("outputs_sha256"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.get(record.spec).outputs_sha256 is None
    data = (tmp_path / record.outputs).read_bytes()
    (tmp_path / record.outputs).write_bytes(data[:-40])
    _refused(store, record.spec, "truncated or damaged")


def test_the_migration_adds_the_digest_and_changes_nothing_else(tmp_path):
    store = ResultsStore(tmp_path)
    record = _stored(store)
    _edit(store, record.spec, lambda d: d.pop("outputs_sha256"))
    before = store.path(record.spec).read_text().splitlines()
    assert add_outputs_digest(store.path(record.spec)) == "added"
    after = store.path(record.spec).read_text().splitlines()
    added = [line for line in after if line not in before]
    assert added == [f' "outputs_sha256": "{record.outputs_sha256}",'] and len(after) == len(before) + 1
    assert add_outputs_digest(store.path(record.spec)) == "has one"
    assert store.get(record.spec) == record
    other = _stored(store, _spec(seed=1))
    (tmp_path / other.outputs).unlink()
    _edit(store, other.spec, lambda d: d.pop("outputs_sha256"))
    assert add_outputs_digest(store.path(other.spec)) == "no outputs file"


def test_a_store_that_does_not_keep_outputs_serves_metrics_and_checks_files_it_has(tmp_path):
    store = ResultsStore(tmp_path)
    (tmp_path / OUTPUTS_NOT_KEPT).write_text("JSON only, to keep the repository small\n")
    kept, gone = _stored(store), _stored(store, _spec(seed=1))
    (tmp_path / gone.outputs).unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.get(gone.spec) == gone and store.get(kept.spec) == kept
    with pytest.raises(NoOutputsError, match="does not keep"):
        record_outputs(gone, tmp_path)
    assert store.rescored([gone]) == [gone]  # metrics served, nothing re-scored
    store_module.save_outputs(tmp_path / kept.outputs, _outputs(shift=2))
    _refused(store, kept.spec, "does not match the record's digest")
    _edit(store, gone.spec, lambda d: d["mean"].update(acc=1.0))
    _refused(store, gone.spec, "the mean acc")


def test_closed_set_rows_may_have_undefined_outlier_metrics(tmp_path):
    """A stream without outliers has no AUROC (NaN); ACC must still be a finite number."""
    store = ResultsStore(tmp_path)
    spec = RunSpec(method="source", dataset="digits", outlier_set="none", profile="smoke", corruptions=("fog",))
    rows = {"fog": Row({"acc": 80.0, "auroc": float("nan"), "h": float("nan")}, n_id=16, n_outliers=0)}
    record = store.put(Record(key=spec.key(), spec=spec, per_corruption=rows, mean=Mean.of(rows)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.get(spec) is not None
    _edit(store, spec, lambda d: d["per_corruption"]["fog"].update(acc=float("nan")))
    _refused(store, record.spec, "fog's acc is nan")


def _tracked_copy(tmp_path: Path, folder: str) -> Path:
    """``folder`` as a fresh clone has it: the files git tracks, in a copy (a test never moves
    committed files aside)."""
    files = subprocess.run(["git", "ls-files", folder], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, tmp_path / name)
    return tmp_path / folder


@pytest.mark.parametrize("folder", ["results/reference", "results/builtin_benchmark"])
def test_every_committed_record_passes_on_a_fresh_clone(tmp_path, folder):
    copy = _tracked_copy(tmp_path, folder)
    names = [p for p in copy.glob("*.json") if not p.name.startswith(".")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        records = ResultsStore(copy).records()
    assert len(records) == len(names) > 0
    assert ResultsStore(copy).outputs_kept == (folder == "results/reference")


# -- writing: atomic, with the disk checked first ------------------------------------------------------


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.is_file() and ".grid" not in p.parts)


def test_a_full_disk_while_writing_leaves_no_orphan_and_says_one_line(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    spec = _spec()
    real_replace = os.replace

    def disk_full_at_the_record(src, dst):  # noqa: ANN001, ANN202 - os.replace's own
        if str(dst).endswith(".json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", disk_full_at_the_record)
    with pytest.raises(OutOfSpace) as caught:
        _stored(store, spec)
    assert "\n" not in str(caught.value) and "no space left" in str(caught.value)
    assert _leftovers(tmp_path) == []  # neither the outputs file nor a temporary one
    monkeypatch.undo()

    def disk_full_while_writing(fd):  # noqa: ANN001, ANN202 - os.fsync's own
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full_while_writing)
    with pytest.raises(OutOfSpace):
        _stored(store, spec)
    assert _leftovers(tmp_path) == []
    monkeypatch.undo()
    record = _stored(store, spec)
    assert _leftovers(tmp_path) == sorted([store.path(spec).name, record.outputs])


def test_a_cell_that_does_not_fit_is_refused_before_it_is_computed(tmp_path, monkeypatch):
    from stamplib.evaluation import runner
    from tests.support import context_for

    def no_compute(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the cell was computed before the free space was checked")

    monkeypatch.setattr(runner, "build_method", no_compute)
    monkeypatch.setattr(store_module.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9, 4096))
    with pytest.raises(OutOfSpace, match=r"0\.0 MiB free, and cell .* writes up to") as caught:
        runner.run(_spec(), context_for(ResultsStore(tmp_path)))
    assert "\n" not in str(caught.value)


# -- end to end: the runner and the command line -------------------------------------------------------


def test_run_recomputes_a_tampered_record_and_never_serves_it(tmp_path, digits_model):
    import stamplib
    from tests.support import context_for

    spec = RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke")
    context = context_for(tmp_path / "results")
    original = stamplib.run(spec, context)
    store = ResultsStore(context.results)
    for change in (lambda d: d["mean"].update(h=12.3),
                   lambda d: d["per_corruption"]["gaussian_noise"].update(h=None),
                   lambda d: (Path(context.results) / d["outputs"]).unlink()):
        _edit(store, spec, change)
        with pytest.warns(UserWarning, match="stale results record"):
            again = stamplib.run(spec, context)
        assert again.mean == original.mean and again.per_corruption.keys() == original.per_corruption.keys()
        assert again.mean.h != 12.3
        assert store.get(spec) == again


def test_the_command_line_says_a_full_disk_in_one_line(tmp_path, monkeypatch, capsys, digits_model):
    from stamplib import cli

    real_replace = os.replace

    def disk_full(src, dst):  # noqa: ANN001, ANN202 - os.replace's own
        if str(dst).endswith(".json") and "results" in str(dst):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", disk_full)
    results = tmp_path / "results"
    code = cli.main(["run", "--method", "source", "--dataset", "digits", "--profile", "smoke", "--results",
                     str(results)])
    err = capsys.readouterr().err
    errors = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "no space left" in errors[0] and "Traceback" not in err, err
    assert _leftovers(results) == []
