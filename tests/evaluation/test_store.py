"""The results store: atomic records, and which cells are done, running or missing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore


def _smoke(method: str, **kw) -> RunSpec:
    return RunSpec(method=method, dataset="digits", outlier_set="noise", profile="smoke", **kw)


def _fake_record(store: ResultsStore, spec: RunSpec) -> None:
    store.put(Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "mean": {}, "per_corruption": {},
                                "collapsed": []}))


def _marker(store: ResultsStore, spec: RunSpec, **fields) -> None:
    path = store.root / ".grid" / "running" / f"{spec.key()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"job_id": "test", "started": time.time(), **fields}))



def test_store_writes_atomically_and_ignores_partial_files(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    spec = RunSpec(method="source", corruptions=("none",), profile="smoke")
    record = Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "mean": {}})

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.put(record)
    monkeypatch.undo()
    assert store.get(spec) is None  # only a temporary file exists
    store.path(spec).write_text('{"key": "trunc')  # a truncated record is ignored, not trusted
    with pytest.warns(UserWarning, match="unreadable"):
        assert store.get(spec) is None
    store.put(record)
    assert store.get(spec) == record



def test_status_done_missing_running(tmp_path):
    store = ResultsStore(tmp_path)
    specs = [_smoke("source", seed=s) for s in range(7)]
    _fake_record(store, specs[0])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host, now = socket.gethostname(), time.time()
    _marker(store, specs[1], host=host, pid=os.getpid(), deadline=None)  # this live process
    _marker(store, specs[2], host=host, pid=dead.pid, deadline=now + 3600)  # killed job: stale
    _marker(store, specs[3], host="node-17", pid=1, deadline=now + 3600)  # a job on another node
    _marker(store, specs[4], host="node-17", pid=1, deadline=now - 1)  # past its time limit: stale
    _marker(store, specs[5], host=host, pid=os.getpid(), deadline=now - 1)  # pid reused after the limit
    done, missing, running = store.status(specs)
    assert done == [specs[0]]
    assert running == [specs[1], specs[3]]
    assert missing == [specs[2], specs[4], specs[5], specs[6]]



def test_a_cell_stored_between_the_two_looks_is_done_not_missing(tmp_path, monkeypatch):
    """Another grid's job stores its cell and removes the marker after ``status`` found no record
    and before it read the marker: the cell is done (it was once reported neither done nor
    running, and a grid's report then counted five of six cells)."""
    store = ResultsStore(tmp_path)
    spec = _smoke("source")
    _marker(store, spec, host=socket.gethostname(), pid=os.getpid(), deadline=None)
    looked_at_marker = ResultsStore.running_marker

    def job_finishes_first(self, spec_):
        _fake_record(self, spec_)  # the job stores the record, then removes the marker
        self.unmark_running(spec_)
        return looked_at_marker(self, spec_)

    monkeypatch.setattr(ResultsStore, "running_marker", job_finishes_first)
    done, missing, running = store.status([spec])
    assert (done, missing, running) == ([spec], [], [])


def test_a_record_honours_the_umask(tmp_path: Path) -> None:
    """Records were written 0600 by mkstemp whatever the umask (issue 83)."""
    import stat

    from stamplib.evaluation.record import Mean, Row

    spec = RunSpec(method="source", dataset="digits", outlier_set="noise", profile="smoke")
    rows = {"gaussian_noise": Row({"acc": 80.0, "auroc": 70.0, "h": 74.7}, n_id=16, n_outliers=4)}
    path = ResultsStore(tmp_path).path(spec)
    ResultsStore(tmp_path).put(Record(key=spec.key(), spec=spec, per_corruption=rows, mean=Mean.of(rows)))
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
