"""The typed record (stamplib.evaluation.record, issue 50): every committed record loads through
Record.from_json and writes back exactly the JSON it came from; the stream section is written
from the StreamSpec itself, so an option added to it appears with no list to update."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from stamplib import data, paths
from stamplib.evaluation import runner
from stamplib.evaluation.record import Record, Row, StreamSection
from stamplib.evaluation.spec import RunSpec, current_names
from stamplib.evaluation.store import ResultsStore, current_config

RESULTS = (paths.repo_root() or Path.cwd()) / "results"


def _committed() -> list[tuple[Path, dict]]:
    found = []
    for path in sorted(RESULTS.rglob("*.json")):
        stored = json.loads(path.read_text())
        if isinstance(stored, dict) and "spec" in stored and "mean" in stored:
            found.append((path, stored))
    return found


def test_every_committed_record_reads_and_writes_back_unchanged() -> None:
    committed = _committed()
    assert len(committed) > 400
    # the same JSON, each spec field under its name today (a stored spec keeps the names it was written
    # with: a record written before the rename names its outlier set "outliers", the field outlier_set)
    changed = [path.name for path, stored in committed
               if json.dumps(Record.from_json(stored).to_json(), sort_keys=True)
               != json.dumps({**stored, "spec": current_names(stored["spec"])}, sort_keys=True)]
    assert not changed, f"records whose JSON changes when read and written: {changed[:5]}"
    named = [("outliers" in stored["spec"]) + ("outlier_set" in stored["spec"]) for _, stored in committed]
    assert set(named) == {1}  # each names its outlier set once, under one of the two names
    assert sum("outliers" in stored["spec"] for _, stored in committed) > 400  # none rewritten by the rename
    shapes = {tuple(sorted(stored.get("stream", {}))) for _, stored in committed}
    assert len(shapes) >= 3  # the batch-size, label-shift and mixed-domain sections are among them


def test_a_record_is_frozen_and_read_by_attribute() -> None:
    path, stored = next((p, s) for p, s in _committed() if "realistic" in s and "trace" in s)
    record = Record.from_json(stored)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.key = "other"  # type: ignore[misc]
    row = next(iter(record.per_corruption.values()))
    assert isinstance(row, Row) and row.acc == stored["per_corruption"][next(iter(stored["per_corruption"]))]["acc"]
    assert record.realistic.speed.value == stored["realistic"]["relative_speed"]
    assert record.mean.h == stored["mean"]["h"] and record.spec.key() == record.key == stored["key"]
    assert record.provenance.checkpoint.sha256 == stored["provenance"]["checkpoint"]["sha256"]


@dataclasses.dataclass(frozen=True)
class _ReversedStreamSpec(data.StreamSpec):
    """A stream option added as docs/architecture.md says (a field with its check), no list edited."""

    reverse: bool = data.streams.option(False, lambda value: bool(value))


def test_a_new_stream_option_appears_in_the_record_and_its_default_leaves_the_record_as_it_was() -> None:
    base = RunSpec(method="source", corruptions=("none",), profile="smoke")
    reversed_ = base.with_(stream=_ReversedStreamSpec(reverse=True))
    section = StreamSection.of(reversed_)
    assert section is not None and section.options == {"reverse": True}
    assert section.to_json() == {"continual": False, "order": ["none"], "dirichlet": 0.0, "outlier_burst": 0,
                                 "reverse": True}
    assert StreamSection.of(base.with_(stream=_ReversedStreamSpec())) is None  # at its default: no section
    # The realistic protocol has a section of its own and stays out of this one.
    assert StreamSection.of(base.with_stream(realistic=True, relative_speed=2)) is None


def test_an_old_stream_section_without_a_later_option_loads_and_stays_current(tmp_path: Path) -> None:
    """Records written before an option existed name only the options they had: they load, write
    back unchanged and are what the store serves for their spec."""
    spec = RunSpec(method="tent", corruptions=("none", "contrast"), profile="smoke",
                   stream=data.StreamSpec(schedule="continual"))
    old = {"key": spec.key(), "spec": spec.to_dict(), "config": current_config(spec), "collapsed": [],
           "per_corruption": {c: {"acc": 50.0, "auroc": 60.0, "h": 54.5, "collapsed": False, "collapse_reason": None}
                              for c in spec.corruptions},
           "mean": {"acc": 50.0, "auroc": 60.0, "h": 54.5, "collapsed": []},
           "stream": {"continual": True, "order": ["none", "contrast"], "dirichlet": 0.0, "outlier_burst": 0}}
    store = ResultsStore(tmp_path)
    store.path(spec).write_text(json.dumps(old))
    record = store.get(spec)
    assert record is not None and record.to_json() == old
    assert record.stream == StreamSection.of(spec)  # what the runner writes today for this spec


def test_the_runner_has_one_loop_for_every_schedule() -> None:
    assert set(runner.SCHEDULE_LOOPS) == set(data.SCHEDULES)
    assert runner.SCHEDULE_LOOPS["gradual"] is runner.SCHEDULE_LOOPS["continual"]
