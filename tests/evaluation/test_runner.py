"""run(spec): one record per cell, partial data refused before work, a killed run resumed
without recomputing or trusting partial files, identical bits on a rerun, collapses flagged."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import stamplib
from stamplib import data, methods, models, paths
from stamplib.data import loaders
from stamplib.evaluation import runner
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.methods.base import HYPERPARAMETER_SETS, TTAMethod, TTAOutput, register
from tests.data.files import write_cifar_c
from tests.support import context_for

REPO = Path(__file__).resolve().parents[2]


def _boom(*args: object, **kwargs: object) -> None:
    raise AssertionError("heavy work started before the bad input was refused")


def test_run_stores_one_record_and_skips_on_rerun(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path / "store")
    spec = RunSpec(method="bn_stats", corruptions=("none", "contrast"), profile="smoke")
    record = stamplib.run(spec, context_for(store))
    assert set(record.per_corruption) == {"none", "contrast"}
    assert record.per_corruption["none"].n_id == 64 and record.per_corruption["none"].n_outliers == 16
    assert list((tmp_path / "store").glob("*.json")) == [store.path(spec)]

    def boom(*args, **kwargs):
        raise AssertionError("a stored spec must not be recomputed")

    monkeypatch.setattr(stamplib.models, "source_model", boom)
    assert stamplib.run(spec, context_for(store)) == record



def test_partial_cifar10_c_fails_before_the_model_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_cifar_c(tmp_path, per=10, corruptions=("gaussian_noise",))  # half extracted: fog and snow missing
    monkeypatch.setattr(models, "source_model", _boom)
    spec = RunSpec(method="source", dataset="cifar10_c", corruptions=("gaussian_noise", "fog", "snow"),
                   profile="smoke")
    with pytest.raises(loaders.DatasetNotFound) as err:
        stamplib.run(spec, context_for(tmp_path / "results", data_root=tmp_path))
    msg = str(err.value)
    assert "fog.npy" in msg and "snow.npy" in msg and "gaussian_noise.npy" not in msg
    assert "unpack CIFAR-10-C.tar again" in msg
    (tmp_path / "CIFAR-10-C" / "labels.npy").unlink()
    with pytest.raises(loaders.DatasetNotFound, match="labels.npy"):
        data.check_available("cifar10_c_8_2", ("gaussian_noise",), data_root=tmp_path)



_GRID = """
import sys, time
import torch
torch.set_num_threads(1)
import stamplib
from stamplib import RunSpec, paths
specs = [RunSpec(method=m, corruptions=("gaussian_noise",), profile="smoke", seed=s)
         for s in range(3) for m in ("source", "bn_stats")]
for spec in specs:
    stamplib.run(spec, paths.RunContext.build())
    time.sleep(float(sys.argv[1]))  # a long grid: the kill lands before the next cell
"""


GRID_SPECS = [RunSpec(method=m, corruptions=("gaussian_noise",), profile="smoke", seed=s)
              for s in range(3) for m in ("source", "bn_stats")]


def _records_on_disk(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*.json") if not p.name.startswith("."))


def test_killed_grid_resumes_without_recomputing_or_trusting_partial_files(
    tmp_path: Path, digits_model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"
    env = {**os.environ, "STAMPLIB_RESULTS": str(results), "STAMPLIB_HOME": str(paths.home()),
           "OMP_NUM_THREADS": "1"}  # the cached digits model (digits_model) is reused
    proc = subprocess.Popen([sys.executable, "-c", _GRID, "0.5"], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # Wait for the event (a first record), however loaded the machine is; the ceiling only
        # keeps a hung grid from hanging the test run, it is not the property under test.
        hang_guard = time.monotonic() + 1800
        while not _records_on_disk(results):
            assert proc.poll() is None, f"the grid died: {proc.stderr.read().decode()[-2000:]}"
            assert time.monotonic() < hang_guard, "no record after 30 min: the grid hangs"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    store = ResultsStore(results)
    done = _records_on_disk(results)
    assert 1 <= len(done) < len(GRID_SPECS)
    for p in done:  # what is there under a record's name is complete
        assert json.loads(p.read_text())["key"] in {s.key() for s in GRID_SPECS}
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in done}

    # Plant what a crash of another writer could leave: a truncated record, and a temporary
    # file that holds a complete but wrong record under a pending spec's name.
    last, poisoned = GRID_SPECS[-1], GRID_SPECS[-2]
    text = done[0].read_text()
    store.path(last).write_text(text[: len(text) // 2])
    fake = json.loads(text)
    fake.update(key=poisoned.key(), spec=poisoned.to_dict(), mean={"acc": -1.0, "auroc": -1.0, "h": -1.0})
    stray = results / f".tmp-999999-{store.path(poisoned).name}"
    stray.write_text(json.dumps(fake))
    with pytest.warns(UserWarning, match="unreadable"):
        assert all(r.mean.acc >= 0 for r in store.records())  # temporary files are never read

    computed = []
    real_run_stream = runner.run_stream

    def counting(method, stream, *args, **kwargs):
        computed.append(method)
        return real_run_stream(method, stream, *args, **kwargs)

    monkeypatch.setattr(runner, "run_stream", counting)
    # The store set the truncated record aside when it read it (above); the run recomputes it.
    assert not store.path(last).exists() and list((store.grid_dir / "stale").glob(f"*{last.key()}.json"))
    for spec in GRID_SPECS:
        stamplib.run(spec, context_for(store))

    assert len(computed) == len(GRID_SPECS) - len(done)  # finished cells were not recomputed
    for p, (payload, mtime) in before.items():
        assert p.read_bytes() == payload and p.stat().st_mtime_ns == mtime
    assert _records_on_disk(results) == sorted(store.path(s) for s in GRID_SPECS)  # exactly one each
    records = store.records()
    assert sorted(r.key for r in records) == sorted(s.key() for s in GRID_SPECS)
    assert all(0 <= r.mean.acc <= 100 for r in records)
    assert store.get(poisoned).mean.acc >= 0 and store.get(last) is not None



@pytest.mark.parametrize("name", methods.available())
def test_every_method_runs_a_cell_on_the_digits_benchmark(name: str, tmp_path: Path, digits_model) -> None:
    """End to end through run(): the source model, source data where a method needs it, the
    hyperparameter set from the data set registry, finite numbers for every corruption."""
    spec = RunSpec(method=name, corruptions=("none", "gaussian_noise"), profile="smoke")
    record = stamplib.run(spec, context_for(tmp_path))
    for m in record.per_corruption.values():
        assert m.n_id == 64 and m.n_outliers == 16
        assert all(0.0 <= m.scores[k] <= 100.0 for k in ("acc", "auroc", "h")), m
    assert record.config == repr(methods.resolve_config(name, "cifar10_c"))


def test_run_twice_gives_identical_records(tmp_path: Path, digits_model: torch.nn.Module) -> None:
    spec = RunSpec(method="rotta", corruptions=("gaussian_noise", "contrast"), profile="smoke", seed=2)
    first = stamplib.run(spec, context_for(tmp_path / "a"))
    data.build_stream.cache_clear()  # rebuild the streams too
    torch.manual_seed(99)
    second = stamplib.run(spec, context_for(tmp_path / "b"), force=True)

    def numbers(record: Record) -> dict:
        return {c: {k: v for k, v in m.to_json().items() if k != "seconds"} for c, m in record.per_corruption.items()}

    assert json.dumps(numbers(first)) == json.dumps(numbers(second))  # bitwise: same repr of every float
    assert first.mean == second.mean


def test_set_deterministic_switches_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    from stamplib import determinism

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)  # restored after the test
    assert not torch.are_deterministic_algorithms_enabled()
    with determinism.deterministic():
        assert determinism.is_deterministic() and not torch.backends.cudnn.benchmark
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == determinism.CUBLAS_WORKSPACE
    assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.deterministic



@dataclasses.dataclass(frozen=True)
class _NoConfig:
    pass


class _NaNOnSecondStream(TTAMethod):
    """Source predictions, but non-finite outputs on the second corruption's stream."""

    config_cls = _NoConfig
    configs = dict.fromkeys(HYPERPARAMETER_SETS, _NoConfig())

    def setup(self) -> None:
        self.model.eval()
        self.resets = 0

    def reset_buffers(self) -> None:
        self.resets += 1  # 1 at creation, then one per corruption

    @torch.no_grad()
    def step(self, x: torch.Tensor) -> TTAOutput:
        probs = self.model(x).softmax(1)
        if self.resets == 3:
            probs = torch.full_like(probs, float("nan"))
        return TTAOutput(probs, -probs.max(1).values)


class _AlwaysClassZero(TTAMethod):
    config_cls = _NoConfig
    configs = dict.fromkeys(HYPERPARAMETER_SETS, _NoConfig())

    def step(self, x: torch.Tensor) -> TTAOutput:
        probs = torch.zeros(x.shape[0], self.num_classes)
        probs[:, 0] = 1.0
        return TTAOutput(probs, torch.rand(x.shape[0], generator=self.cpu_generator))


@pytest.fixture
def fake_methods():
    from stamplib.methods import base

    names = {"test_nan_second": _NaNOnSecondStream, "test_class_zero": _AlwaysClassZero}
    for name, cls in names.items():
        register(name)(cls)
    try:
        yield list(names)
    finally:
        for name in names:
            base._REGISTRY.pop(name, None)


def test_collapsed_corruptions_are_flagged_in_records(
    fake_methods: list[str], tmp_path: Path, digits_model: torch.nn.Module
) -> None:
    store = ResultsStore(tmp_path / "results")
    # quick: streams of 1,280 samples (a single-class stream is only called a collapse from 128)
    specs = {name: RunSpec(method=name, corruptions=("none", "gaussian_noise"), profile="quick")
             for name in fake_methods}
    nan_rec, zero_rec = (stamplib.run(specs[n], context_for(store)) for n in fake_methods)

    pc = nan_rec.per_corruption
    assert not pc["none"].collapsed and pc["gaussian_noise"].collapsed
    assert pc["gaussian_noise"].collapse_reason == "non-finite outputs"
    assert nan_rec.mean.collapsed == ("gaussian_noise",) == nan_rec.collapsed
    # still averaged (not dropped): the mean ACC includes the collapsed stream's ACC
    assert nan_rec.mean.acc == pytest.approx((pc["none"].acc + pc["gaussian_noise"].acc) / 2)
    assert zero_rec.mean.collapsed == ("none", "gaussian_noise")
    assert "single class (0)" in zero_rec.per_corruption["none"].collapse_reason

    # (how tables flag them: tests/report/test_tables.py)



def test_continual_resets_once_and_records_the_order(tmp_path: Path, digits_model: torch.nn.Module) -> None:
    corruptions = ("contrast", "gaussian_noise")
    base = RunSpec(method="tent", dataset="digits", outlier_set="noise", corruptions=corruptions, profile="smoke")
    episodic = stamplib.run(base, context_for(tmp_path))
    continual = stamplib.run(base.with_stream(schedule="continual"), context_for(tmp_path))
    assert continual.stream.to_json() == {"continual": True, "order": list(corruptions), "dirichlet": 0.0,
                                          "outlier_burst": 0}
    assert episodic.stream is None and "stream" not in episodic.to_json()
    first, second = corruptions
    # the first corruption starts from the source model either way; the second does not
    assert continual.per_corruption[first].acc == episodic.per_corruption[first].acc
    assert continual.per_corruption[first].auroc == episodic.per_corruption[first].auroc
    a, b = (np.load(tmp_path / r.outputs) for r in (episodic, continual))
    assert not np.array_equal(a[f"{second}.ood_score"], b[f"{second}.ood_score"])
    np.testing.assert_array_equal(a[f"{first}.ood_score"], b[f"{first}.ood_score"])
    shifted = stamplib.run(base.with_stream(dirichlet=0.1, outlier_burst=16), context_for(tmp_path))
    assert shifted.stream.dirichlet == 0.1 and shifted.per_corruption[first].n_outliers == \
        episodic.per_corruption[first].n_outliers
