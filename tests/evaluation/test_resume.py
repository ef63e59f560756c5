"""An episodic cell killed after its first corruption resumes at its second: the first is not
computed again, and the record equals an uninterrupted run's bit for bit (issue 25). A
continual cell keeps nothing and restarts from the beginning."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import stamplib
from stamplib import data, paths
from stamplib.data import StreamSpec
from stamplib.evaluation import runner
from stamplib.evaluation.outputs import load_outputs, outputs_path
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from tests.support import context_for

REPO = Path(__file__).resolve().parents[2]
CORRUPTIONS = ("gaussian_noise", "defocus_blur", "contrast")
#: STAMP: random views, a memory and an optimiser, so a resumed run that restored anything
#: wrongly (generators, memory, weights) would show in its outputs.
SPEC = RunSpec(method="stamp", corruptions=CORRUPTIONS, profile="smoke")
CONTINUAL = RunSpec(method="stamp", corruptions=CORRUPTIONS, profile="smoke", stream=StreamSpec(schedule="continual"))

#: Runs one cell and SIGKILLs itself when the second stream starts: the first corruption has
#: then finished, and nothing of the process gets to clean up.
_KILLED_CELL = """
import json, os, signal, sys
import torch
torch.set_num_threads(1)
import stamplib
from stamplib import paths
from stamplib.evaluation import runner
from stamplib.evaluation.spec import RunSpec
spec = RunSpec.from_dict(json.loads(sys.argv[1]))
streams = []
real_run_stream = runner.run_stream
def run_stream(method, stream, *args, **kwargs):
    streams.append(stream)
    if len(streams) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return real_run_stream(method, stream, *args, **kwargs)
runner.run_stream = run_stream
stamplib.run(spec, paths.RunContext.build())
"""

#: Columns of a trace and fields of a row that measure time or memory, not the method.
_TIMING = {"seconds", "peak_memory_mb"}


def _kill_after_first_corruption(spec: RunSpec, results: Path) -> None:
    env = {**os.environ, "STAMPLIB_RESULTS": str(results), "STAMPLIB_HOME": str(paths.home()),
           "OMP_NUM_THREADS": "1"}  # the cached digits model (digits_model) is reused
    proc = subprocess.run([sys.executable, "-c", _KILLED_CELL, json.dumps(spec.to_dict())], env=env, cwd=REPO,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=1800)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]


def _built_corruptions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The corruptions whose streams are built from now on (a computed corruption builds one)."""
    built: list[str] = []
    real_build = runner.data.build_stream

    def build_stream(spec: data.CorruptionStreamSpec, **kwargs: Any) -> data.Stream:
        built.append(spec.corruption)
        return real_build(spec, **kwargs)

    monkeypatch.setattr(runner.data, "build_stream", build_stream)
    return built


def _without_timing(record: Record) -> dict[str, Any]:
    def strip(mapping: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in mapping.items() if k not in _TIMING}

    stored = record.to_json()
    return {
        "per_corruption": {c: strip(row) for c, row in stored["per_corruption"].items()},
        "mean": strip(stored["mean"]),
        "trace": {c: strip(columns) for c, columns in stored.get("trace", {}).items()},
        "config": record.config,
        "key": record.key,
        "provenance": record.provenance.checkpoint,
    }


def _assert_same_outputs(a: Path, b: Path) -> None:
    first, second = load_outputs(a), load_outputs(b)
    assert list(first) == list(second) == list(CORRUPTIONS)
    for corruption in CORRUPTIONS:
        for field in ("prediction", "ood_score", "label", "index"):
            np.testing.assert_array_equal(getattr(first[corruption], field), getattr(second[corruption], field))


def test_killed_episodic_cell_resumes_at_its_second_corruption_with_identical_bits(
    tmp_path: Path, digits_model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    resumed_store = ResultsStore(tmp_path / "resumed")
    _kill_after_first_corruption(SPEC, resumed_store.root)
    assert resumed_store.get(SPEC) is None  # no record of an unfinished cell
    kept = sorted(p.name for p in resumed_store.partial_dir(SPEC).glob("*.json"))
    assert kept == ["gaussian_noise.json"]

    built = _built_corruptions(monkeypatch)
    resumed = stamplib.run(SPEC, context_for(resumed_store))
    assert built == ["defocus_blur", "contrast"]  # the first corruption was not recomputed
    assert not resumed_store.partial_dir(SPEC).exists()  # the record replaces what was kept

    built.clear()
    whole_store = ResultsStore(tmp_path / "whole")
    whole = stamplib.run(SPEC, context_for(whole_store))
    assert built == list(CORRUPTIONS)
    assert _without_timing(resumed) == _without_timing(whole)
    assert resumed.trace  # STAMP reports, so the comparison above covered its traces
    _assert_same_outputs(outputs_path(resumed_store.path(SPEC)), outputs_path(whole_store.path(SPEC)))


def test_killed_continual_cell_keeps_nothing_and_restarts(
    tmp_path: Path, digits_model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ResultsStore(tmp_path / "results")
    _kill_after_first_corruption(CONTINUAL, store.root)
    assert not store.partial_dir(CONTINUAL).exists()
    built = _built_corruptions(monkeypatch)
    stamplib.run(CONTINUAL, context_for(store))
    assert built == list(CORRUPTIONS)


def test_a_kept_corruption_of_another_source_model_or_config_is_computed_again(
    tmp_path: Path, digits_model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ResultsStore(tmp_path / "results")
    spec = RunSpec(method="bn_stats", corruptions=("gaussian_noise", "contrast"), profile="smoke")
    record = stamplib.run(spec, context_for(store))
    outputs = load_outputs(outputs_path(store.path(spec)))["gaussian_noise"]
    row = record.per_corruption["gaussian_noise"]
    store.path(spec).unlink()

    store.put_partial(spec, "gaussian_noise", row, outputs, None, checkpoint_sha256="0" * 64)
    built = _built_corruptions(monkeypatch)
    stamplib.run(spec, context_for(store))
    assert built == ["gaussian_noise", "contrast"]  # kept under another model's hash: not trusted
    store.path(spec).unlink()

    sha = record.provenance.checkpoint.sha256
    store.put_partial(spec, "gaussian_noise", row, outputs, None, checkpoint_sha256=sha)
    entry = store.partial_dir(spec) / "gaussian_noise.json"
    entry.write_text(entry.read_text().replace("BNStats", "Other"))  # other hyperparameters
    built.clear()
    stamplib.run(spec, context_for(store))
    assert built == ["gaussian_noise", "contrast"]

    store.path(spec).unlink()
    store.put_partial(spec, "gaussian_noise", row, outputs, None, checkpoint_sha256=sha)
    built.clear()
    assert stamplib.run(spec, context_for(store)).per_corruption["gaussian_noise"] == row
    assert built == ["contrast"]
