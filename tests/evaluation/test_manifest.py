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
    spec = RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke",
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


def _builtin_copy(tmp_path: Path, count: int = 2) -> tuple[Path, list[str]]:
    """A store at ``…/results/builtin_benchmark`` (so the tool takes it for the built-in benchmark's)
    holding ``count`` committed records and the diagnostic of network 0, none of them listed yet."""
    import shutil

    source, root = REPO / "results" / "builtin_benchmark", tmp_path / "results" / "builtin_benchmark"
    (root / "networks").mkdir(parents=True)
    shutil.copyfile(source / "OUTPUTS_NOT_KEPT.txt", root / "OUTPUTS_NOT_KEPT.txt")
    names = manifest.record_names(source)[:count]
    for name in names:
        shutil.copyfile(source / name, root / name)
    shutil.copyfile(source / "networks" / "ResNetTiny_10_jpeg.json", root / "networks" / "ResNetTiny_10_jpeg.json")
    return root, names


def test_the_seal_tool_lists_only_the_benchmarks_consistent_cells_and_networks(tmp_path, capsys):
    tool = _seal_tool()
    root, good = _builtin_copy(tmp_path)
    smoke = _record(0)  # whole and consistent, but a smoke-profile cell of no design: copied in, never sealed
    (root / ResultsStore(root).path(smoke.spec).name).write_text(json.dumps(smoke.to_json(), indent=1, sort_keys=True))
    edited = json.loads((root / good[1]).read_text())
    edited["mean"]["acc"] = 1.0
    (root / good[1]).write_text(json.dumps(edited, indent=1, sort_keys=True))
    (root / "networks" / "ResNetTiny_10_jpeg_seed9.json").write_text(
        (root / "networks" / "ResNetTiny_10_jpeg.json").read_text().replace('"network": 0', '"network": 9'))

    assert tool.main([str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{ResultsStore(root).path(smoke.spec).name}: not sealed: it is not a cell of the benchmark's designs " \
           "(profile smoke" in out
    assert f"{good[1]}: not sealed: the mean acc is 1" in out
    assert "networks/ResNetTiny_10_jpeg_seed9.json: not sealed: network 9 of cifar10_builtin is none of" in out
    assert manifest.read(root) == {name: manifest.file_digest(root / name)
                                   for name in (good[0], "networks/ResNetTiny_10_jpeg.json")}

    restored = json.loads((REPO / "results" / "builtin_benchmark" / good[0]).read_text())
    restored["mean"]["h"] += 1  # a listed record edited: reported, its entry never rewritten
    (root / good[0]).write_text(json.dumps(restored, indent=1, sort_keys=True))
    listed = manifest.read(root)
    assert tool.main([str(root)]) == 1
    assert "differs from its listed digest" in capsys.readouterr().out
    assert manifest.read(root) == listed
    assert tool.main(["--check", str(root)]) == 1


def test_the_seal_tool_refuses_a_store_of_no_benchmark(tmp_path, capsys):
    ResultsStore(tmp_path).put(_record())
    assert _seal_tool().main([str(tmp_path)]) == 2
    assert "is no committed benchmark's store" in capsys.readouterr().err
    assert not manifest.is_sealed(tmp_path)


def test_the_seal_tool_recomputes_a_reference_records_rows_from_its_outputs(tmp_path, capsys):
    """The reference store keeps per-sample outputs: a forged row that its mean follows is caught
    by recomputing the row from them."""
    import shutil

    source, root = REPO / "results" / "reference", tmp_path / "results" / "reference"
    root.mkdir(parents=True)
    name = manifest.record_names(source)[0]
    stored = json.loads((source / name).read_text())
    shutil.copyfile(source / stored["outputs"], root / stored["outputs"])
    for row in stored["per_corruption"].values():
        row["acc"] = 99.0
    stored["mean"]["acc"] = 99.0
    (root / name).write_text(json.dumps(stored, indent=1, sort_keys=True))
    assert _seal_tool().main([str(root)]) == 1
    assert f"{name}: not sealed: its " in capsys.readouterr().out and not manifest.is_sealed(root)


@pytest.mark.parametrize("folder", ["results/reference", "results/builtin_benchmark"])
def test_each_committed_store_is_sealed_and_lists_exactly_its_records_and_diagnostics(folder):
    root = REPO / folder
    assert manifest.is_sealed(root), f"{folder} has no {manifest.NAME}: python tools/seal_evidence.py {folder}"
    present = {name: manifest.file_digest(root / name) for name in manifest.guarded_names(root)}
    assert manifest.differences(manifest.read(root), present) == []
    assert any(name.startswith("networks/") for name in present), "the network diagnostics are guarded too"


# -- the network diagnostics are guarded with the records (issue 83) ---------------------------------


def _diagnostic(network: int = 0, auroc: float = 73.41):  # noqa: ANN202 - a NetworkDiagnostic
    from stamplib.evidence.networks import NetworkDiagnostic

    return NetworkDiagnostic("cifar10_builtin", network, "ResNetTiny_10_jpeg" + (f"_seed{network}" if network else ""),
                             "c" * 64, 0.85, 2000, 2000, auroc, "truck", 0.9, 0.4, 0.8, 0.9)


def test_a_diagnostic_in_a_sealed_store_gets_its_entry_and_an_edit_is_refused(tmp_path):
    from stamplib.evidence import networks

    store = _sealed(tmp_path, _record())
    assert networks.put(tmp_path, _diagnostic(), "python -m stamplib claims diagnose")
    assert manifest.read(tmp_path)["networks/ResNetTiny_10_jpeg.json"] == manifest.file_digest(
        tmp_path / "networks" / "ResNetTiny_10_jpeg.json")
    assert networks.read_all(tmp_path) == [_diagnostic()]
    store.records()  # the store with its diagnostic passes

    path = tmp_path / "networks" / "ResNetTiny_10_jpeg.json"
    stored = json.loads(path.read_text())
    stored["auroc_clean_vs_noise"] = 99.99
    path.write_text(json.dumps(stored, indent=1))
    for call in (store.records, lambda: networks.read_all(tmp_path)):
        _refused(store, call, "networks/ResNetTiny_10_jpeg.json was edited", "differs from its SHA-256",
                 "git checkout -- ")


def test_a_foreign_or_truncated_diagnostic_is_one_line_naming_the_file(tmp_path):
    from stamplib.evidence import networks

    folder = tmp_path / "networks"
    folder.mkdir()
    (folder / "foreign.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match=r"networks/foreign.json is no network diagnostic: it holds \['hello'\]"):
        networks.read_all(tmp_path)
    (folder / "foreign.json").unlink()
    networks.put(tmp_path, _diagnostic(), "x")
    whole = (folder / "ResNetTiny_10_jpeg.json").read_bytes()
    (folder / "ResNetTiny_10_jpeg.json").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"networks/ResNetTiny_10_jpeg.json is no network diagnostic: it is not "
                                         r"whole JSON") as caught:
        networks.read_all(tmp_path)
    assert "\n" not in str(caught.value)

    store = _sealed(tmp_path / "sealed", _record())  # in a committed store the manifest refuses it first
    (tmp_path / "sealed" / "networks").mkdir()
    (tmp_path / "sealed" / "networks" / "foreign.json").write_text("[]")
    _refused(store, lambda: networks.read_all(tmp_path / "sealed"), "networks/foreign.json is not in the store's")


def test_a_diagnostic_whose_numbers_are_the_same_is_not_rewritten(tmp_path):
    from stamplib.evidence import networks

    _sealed(tmp_path, _record())
    assert networks.put(tmp_path, _diagnostic(), "python -m stamplib claims compute --jobs 1")
    path = tmp_path / "networks" / "ResNetTiny_10_jpeg.json"
    before, listing, stamp = path.read_bytes(), manifest.path_of(tmp_path).read_bytes(), path.stat().st_mtime_ns
    assert not networks.put(tmp_path, _diagnostic(), "python -m stamplib claims diagnose --replicates 0")
    assert (path.read_bytes(), manifest.path_of(tmp_path).read_bytes(), path.stat().st_mtime_ns) == (
        before, listing, stamp), "only the command differed: nothing may be rewritten"
    assert networks.put(tmp_path, _diagnostic(auroc=80.0), "a later command")  # new numbers are written
    assert networks.read_all(tmp_path) == [_diagnostic(auroc=80.0)]


# -- a store is known to be committed from git (issue 83) -----------------------------------------------


def _git(root: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


def _committed(tmp_path: Path, count: int = 3) -> ResultsStore:
    """A sealed store of ``count`` records, committed to a git repository at ``tmp_path``."""
    pytest.importorskip("subprocess")
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "results" / "store"
    store = _sealed(root, *(_record(seed) for seed in range(count)))
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "evidence")
    return store


def test_a_committed_store_without_its_manifest_is_refused_naming_the_manifest(tmp_path):
    store = _committed(tmp_path)
    manifest.path_of(store.root).unlink()
    assert store.sealed, "git's commit says the store is committed evidence"
    first = _record(0)
    edited = _rewrite(store, first, lambda d: d["mean"].update(h=12.3))
    for call in (store.records, lambda: store.get(first.spec), lambda: store.put(_record(7))):
        message = _refused(store, call, f"the manifest {store.root / manifest.NAME}", "is missing",
                           f"git checkout -- {store.root / manifest.NAME}")
        assert edited not in message, "the records are never blamed for a missing manifest"
    assert not (store.root / ".grid" / "stale").exists()


@pytest.mark.parametrize("damage, words", [
    (lambda entries, name: {**entries, name: "0" * 64}, "gives another SHA-256 for"),
    (lambda entries, name: {k: v for k, v in entries.items() if k != name}, "no longer lists"),
    (lambda entries, name: {}, "no longer lists"),
    (lambda entries, name: {**entries, "source__digits__noise__0000000000000000.json": "0" * 64},
     "lists a file that was never committed"),
])
def test_a_damaged_manifest_is_named_and_the_records_are_not_blamed(tmp_path, damage, words):
    store = _committed(tmp_path)
    name = store.path(_record(1).spec).name
    manifest.write(store.root, damage(manifest.read(store.root), name))
    message = _refused(store, store.records, f"the manifest {store.root / manifest.NAME} differs from the committed "
                                             "one", words, f"git checkout -- {store.root / manifest.NAME}")
    assert "remove it" not in message and f"git checkout -- {store.root / name}" not in message


def test_an_edited_record_of_a_committed_store_is_still_named(tmp_path):
    store = _committed(tmp_path)
    store.put(_record(5))  # the manifest now differs from the commit, legitimately
    name = _rewrite(store, _record(1), lambda d: d["mean"].update(h=12.3))
    _refused(store, store.records, f"{name} was edited: the mean h is 12.3", f"git checkout -- {store.root / name}")


def test_a_committed_record_computed_again_to_the_same_numbers_is_not_rewritten(tmp_path):
    """Only its provenance (command, time, machine) would change: the committed file stays (issue 83)."""
    import dataclasses

    record = _record()
    store = _sealed(tmp_path, record)
    path = store.path(record.spec)
    before, listing = path.read_bytes(), manifest.path_of(tmp_path).read_bytes()
    again = dataclasses.replace(record, seconds=12.5, device="cpu (another machine)")
    assert store.put(again).seconds == record.seconds
    assert (path.read_bytes(), manifest.path_of(tmp_path).read_bytes()) == (before, listing)
    changed = store.put(_record(acc=81.0))  # new numbers are written, with their entry
    assert json.loads(path.read_text())["mean"]["acc"] == changed.mean.acc
    assert manifest.read(tmp_path)[path.name] == manifest.file_digest(path)


def test_a_diagnostic_with_the_same_numbers_but_no_entry_gets_its_entry_and_keeps_its_bytes(tmp_path):
    """After a merge, a diagnostic rewritten elsewhere may differ from its manifest entry: computing
    it again to the same numbers lists the file as it is (claims diagnose is the way to re-vouch for it)."""
    import dataclasses

    from stamplib.evidence import networks

    store = _sealed(tmp_path, _record())
    path = tmp_path / "networks" / "ResNetTiny_10_jpeg.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**dataclasses.asdict(_diagnostic()), "command": "elsewhere"}, indent=1))
    before = path.read_bytes()
    _refused(store, store.records, "networks/ResNetTiny_10_jpeg.json is not in the store's")
    assert not networks.put(tmp_path, _diagnostic(), "python -m stamplib claims diagnose")
    assert path.read_bytes() == before
    assert manifest.read(tmp_path)["networks/ResNetTiny_10_jpeg.json"] == manifest.file_digest(path)
    store.records()  # the store passes again
