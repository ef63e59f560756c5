"""A sealed store (one with a manifest, MANIFEST.sha256) is committed evidence: it refuses, in one
line and without moving anything, a record file that differs from its entry, an unlisted one and a
listed one that is absent; ``put`` lists what it writes; a store of one's own keeps recomputing."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from stamplib.evaluation import manifest
from stamplib.evaluation.manifest import Difference, EvidenceError
from stamplib.evaluation.record import Mean, Record, Row
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from tests.support import load_script

REPO = Path(__file__).resolve().parents[2]
SHA_A, SHA_B = "a" * 64, "b" * 64


def _record(seed: int = 0, acc: float = 80.0) -> Record:
    spec = RunSpec(method="source", dataset="digits", outliers="noise", profile="smoke",
                   corruptions=("gaussian_noise", "fog"), seed=seed)
    rows = {"gaussian_noise": Row({"acc": acc, "auroc": 70.0, "h": 74.7}, n_id=16, n_outliers=4),
            "fog": Row({"acc": acc - 10, "auroc": 60.0, "h": 64.6}, n_id=16, n_outliers=4)}
    return Record(key=spec.key(), spec=spec, per_corruption=rows, mean=Mean.of(rows))


def _sealed(root: Path, *records: Record) -> ResultsStore:
    """A store holding ``records``, sealed as tools/seal_evidence.py seals one."""
    store = ResultsStore(root)
    for record in records:
        store.put(record)
    manifest.write(root, {name: manifest.file_digest(root / name) for name in manifest.record_names(root)})
    return store


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _refused(store: ResultsStore, call, *words: str) -> str:  # noqa: ANN001 - a store method
    """``call()`` is refused with one line holding ``words``, and no file of the store changed."""
    before = _files(store.root)
    with pytest.raises(EvidenceError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and message.startswith("committed evidence refused: ")
    for word in words:
        assert word in message, message
    assert _files(store.root) == before, "a sealed store's file was moved, changed or deleted"
    return message


# -- the manifest's text: pure functions -----------------------------------------------------------


def test_the_manifest_is_sha256sum_lines_sorted_by_name_and_reads_back():
    entries = {"b.json": SHA_B, "a.json": SHA_A}
    text = manifest.render(entries)
    assert text == f"{SHA_A}  a.json\n{SHA_B}  b.json\n"
    assert manifest.parse(text) == entries
    assert manifest.with_entry(entries, "a.json", SHA_B) == {"a.json": SHA_B, "b.json": SHA_B}


@pytest.mark.parametrize("text, why", [
    (f"{SHA_A} a.json\n", "line 1 is not"),
    (f"{SHA_A}  a.json\n{SHA_A[:-1]}  b.json\n", "line 2 is not"),
    (f"{SHA_A}  ../a.json\n", "line 1 is not"),
    (f"{SHA_A}  a.json\n{SHA_B}  a.json\n", "line 2 lists a.json a second time"),
])
def test_a_malformed_manifest_line_is_named(text, why):
    with pytest.raises(ValueError, match=why):
        manifest.parse(text)


def test_differences_name_absent_unlisted_and_changed_files():
    listed = {"a.json": SHA_A, "b.json": SHA_B, "c.json": SHA_A}
    present = {"b.json": SHA_B, "c.json": SHA_B, "d.json": SHA_A}
    assert manifest.differences(listed, present) == [
        Difference("a.json", "absent"), Difference("c.json", "changed"), Difference("d.json", "unlisted")]
    assert manifest.differences(listed, dict(listed)) == []


# -- put lists what it writes -------------------------------------------------------------------------


def test_put_into_a_sealed_store_lists_the_record_in_the_same_step(tmp_path):
    store = _sealed(tmp_path, _record(0))
    new = store.put(_record(1))
    entries = manifest.read(tmp_path)
    assert entries[store.path(new.spec).name] == manifest.file_digest(store.path(new.spec))
    replaced = store.put(_record(1, acc=85.0))  # a cell computed again: its entry follows
    assert manifest.read(tmp_path)[store.path(replaced.spec).name] == manifest.file_digest(store.path(replaced.spec))
    assert len(manifest.read(tmp_path)) == 2
    assert {r.key for r in store.records()} == {_record(0).key, _record(1).key}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_puts_at_once_all_get_their_entries(tmp_path):
    store = _sealed(tmp_path)
    threads = [threading.Thread(target=store.put, args=(_record(seed),)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(manifest.read(tmp_path)) == 8
    assert len(store.records()) == 8


def test_put_into_a_store_of_ones_own_writes_no_manifest(tmp_path):
    ResultsStore(tmp_path).put(_record())
    assert not manifest.is_sealed(tmp_path)


# -- a sealed store refuses, and moves nothing ----------------------------------------------------------


def _rewrite(store: ResultsStore, record: Record, change) -> str:  # noqa: ANN001 - a function of the dict
    path = store.path(record.spec)
    stored = json.loads(path.read_text())
    change(stored)
    path.write_text(json.dumps(stored, indent=1, sort_keys=True))
    return path.name


def _forge(stored: dict) -> None:
    """ACC 99 everywhere, the mean following: consistent, so only the manifest can tell."""
    for row in stored["per_corruption"].values():
        row["acc"] = 99.0
    stored["mean"]["acc"] = 99.0


@pytest.mark.parametrize("change, words", [
    (lambda d: d["mean"].update(h=12.3), ("was edited: the mean h is 12.3",)),
    (_forge, ("was edited: its numbers are not the ones computed",)),
])
def test_an_edited_or_forged_record_is_refused_by_get_and_records(tmp_path, change, words):
    record = _record()
    store = _sealed(tmp_path, record, _record(1))
    name = _rewrite(store, record, change)
    _refused(store, lambda: store.get(record.spec), name, "differs from its SHA-256 in", *words)
    _refused(store, store.records, name, *words)
    _refused(store, store.verify, name)


def test_a_truncated_record_is_refused(tmp_path):
    record = _record()
    store = _sealed(tmp_path, record)
    path = store.path(record.spec)
    path.write_bytes(path.read_bytes()[:100])
    _refused(store, store.records, path.name, "is damaged or truncated: unreadable")


def test_a_listed_record_that_is_absent_or_an_unlisted_one_is_refused(tmp_path):
    gone, other = _record(0), _record(1)
    store = _sealed(tmp_path, gone, other)
    store.path(gone.spec).unlink()
    _refused(store, store.records, store.path(gone.spec).name, "is listed in the store's MANIFEST.sha256 but absent")
    assert store.get(gone.spec) is None  # a missing cell: a compute command computes it, and put lists it
    store.put(gone)
    assert len(store.records()) == 2

    stray = _record(2)
    (tmp_path / store.path(stray.spec).name).write_text(json.dumps(stray.to_json(), indent=1, sort_keys=True))
    _refused(store, store.records, store.path(stray.spec).name, "is not in the store's MANIFEST.sha256",
             "tools/seal_evidence.py")
    _refused(store, lambda: store.get(stray.spec), "is not in the store's MANIFEST.sha256")


def test_a_listed_record_that_fails_its_checks_is_refused_not_moved(tmp_path):
    """A record whose own file matches the manifest but whose outputs file was replaced."""
    record = _record()
    store = ResultsStore(tmp_path)
    record = store.put(record, {c: _outputs() for c in record.per_corruption})
    manifest.write(tmp_path, {n: manifest.file_digest(tmp_path / n) for n in manifest.record_names(tmp_path)})
    (tmp_path / record.outputs).write_bytes(b"not an archive")
    _refused(store, store.records, store.path(record.spec).name, "truncated or damaged")


def _outputs():  # noqa: ANN202 - StreamOutputs
    import numpy as np

    from stamplib.evaluation.outputs import StreamOutputs

    labels = np.array([0, 1, 2, -1] * 5, dtype=np.int16)
    return StreamOutputs(prediction=np.abs(labels), ood_score=np.linspace(0, 1, 20, dtype=np.float32),
                         label=labels, index=np.arange(20, dtype=np.int32))


def test_a_damaged_manifest_is_one_line(tmp_path):
    store = _sealed(tmp_path, _record())
    manifest.path_of(tmp_path).write_text("not a manifest\n")
    with pytest.raises(EvidenceError, match="MANIFEST.sha256 is damaged .*line 1"):
        store.records()


def test_a_store_of_ones_own_still_recomputes_and_warns(tmp_path):
    record = _record()
    store = ResultsStore(tmp_path)
    store.put(record)
    _rewrite(store, record, lambda d: d["mean"].update(h=12.3))
    with pytest.warns(UserWarning, match="stale results record .* the mean h is 12.3"):
        assert store.get(record.spec) is None
    assert store.status([record.spec]).missing == [record.spec]


# -- the maintainer's bootstrap ------------------------------------------------------------------------


def _seal_tool():  # noqa: ANN202 - the module
    return load_script("tools/seal_evidence.py")


def test_the_seal_tool_lists_consistent_unlisted_records_only(tmp_path, capsys):
    tool = _seal_tool()
    store = ResultsStore(tmp_path)
    good, bad = _record(0), _record(1)
    store.put(good)
    store.put(bad)
    _rewrite(store, bad, lambda d: d["mean"].update(acc=1.0))
    assert tool.main([str(tmp_path)]) == 1
    assert f"{store.path(bad.spec).name}: not sealed: the mean acc is 1" in capsys.readouterr().out
    assert manifest.read(tmp_path) == {store.path(good.spec).name: manifest.file_digest(store.path(good.spec))}

    _rewrite(store, good, _forge)  # a listed record edited: reported, its entry never rewritten
    listed = manifest.read(tmp_path)
    assert tool.main([str(tmp_path)]) == 1
    assert "differs from its listed digest" in capsys.readouterr().out
    assert manifest.read(tmp_path) == listed
    assert tool.main(["--check", str(tmp_path)]) == 1


@pytest.mark.parametrize("folder", ["results/reference", "results/builtin_benchmark"])
def test_each_committed_store_is_sealed_and_lists_exactly_its_records(folder):
    root = REPO / folder
    assert manifest.is_sealed(root), f"{folder} has no {manifest.NAME}: python tools/seal_evidence.py {folder}"
    present = {name: manifest.file_digest(root / name) for name in manifest.record_names(root)}
    assert manifest.differences(manifest.read(root), present) == []
