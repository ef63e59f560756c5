"""Reliability (issue 10): every bad input fails early with one error naming the fix; a killed
grid resumes without recomputing or trusting partial files; same spec and seed give the same
bits on CPU; collapsed runs are flagged, never silently averaged.

Cases already covered elsewhere are not repeated here: float/NCHW/out-of-range images, short
labels and truncated files in ``.npz`` and CIFAR-C ``.npy`` (test_loaders), download checksum
and resume (test_downloads), wrong class count / wrong keys / checkpoint checksum
(test_models), unknown method and hyperparameter names (test_foundation).
"""

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
import pandas as pd
import pytest
import torch
from PIL import Image

import stamplib
from stamplib import cli, data, methods, models, paths
from stamplib.data import downloads, loaders, outlier_c
from stamplib.evaluation import runner
from stamplib.evaluation.metrics import aggregate
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.methods.base import SETTINGS, TTAMethod, TTAOutput, register
from stamplib.models import checkpoints
from stamplib.report import tables

REPO = Path(__file__).resolve().parents[1]


def images(n: int, size: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def _boom(*args: object, **kwargs: object) -> None:
    raise AssertionError("heavy work started before the bad input was refused")


@pytest.fixture(autouse=True)
def _fresh_streams() -> None:
    data.build_stream.cache_clear()


# ============================================================================ 1. bad input


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(dataset="mnist"), r"unknown dataset 'mnist'; choose one of .*digits"),
        (dict(outliers="cifar"), r"unknown outlier set 'cifar'; choose one of .*svhn.*none"),
        (dict(dataset="cifar10_c", outliers="heldout_classes"), r"needs a class-split dataset \(.*cifar10_c_8_2"),
        (dict(corruptions=("gaussian_noise", "fogg")), r"unknown corruption\(s\) \['fogg'\]; valid: .*contrast"),
        (dict(severity=0), r"severity must be an integer from 1 to 5"),
        (dict(outlier_ratio=-0.1), r"must be in \[0, 1\)"),
        (dict(outlier_ratio=float("nan")), r"must be in \[0, 1\)"),
        (dict(seed=-1), r"seed must be a non-negative integer"),
    ],
)
def test_runspec_refuses_bad_names_and_values(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RunSpec(method="tent", **kwargs)


def test_runspec_takes_a_single_corruption_name() -> None:
    # "fog" must not become ('f', 'o', 'g') and then fail as three unknown corruptions.
    assert RunSpec(method="tent", corruptions="fog").corruptions == ("fog",)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("mnist", "noise", "fog"), r"unknown dataset 'mnist'; choose one of .*cifar10_c"),
        (("digits", "cifar", "fog"), r"unknown outlier set 'cifar'; choose one of .*noise"),
        (("digits", "noise", "fogg"), r"unknown corruption\(s\) 'fogg'; choose from .*jpeg_compression"),
        (("cifar10_c", "heldout_classes", "fog"), r"needs a class-split dataset"),
        (("digits", "noise", "fog", 0), r"severity must be an integer from 1 to 5"),
        (("digits", "noise", "fog", 6), r"severity must be an integer from 1 to 5"),
        (("digits", "noise", "fog", 5, 1.0), r"must be in \[0, 1\)"),
        (("digits", "noise", "fog", 5, -0.2), r"must be in \[0, 1\)"),
        (("digits", "noise", "fog", 5, 0.2, -1), r"seed must be a non-negative integer"),
        (("digits", "noise", "fog", 5, 0.2, 0, 0), r"max_id must be a positive integer or None"),
        (("digits", "noise", "fog", 5, 0.2, 0, -3), r"max_id must be a positive integer or None"),
        (("digits", "noise", "fog", 5, 0.2, 0, None, 0), r"batch_size must be a positive integer"),
        (("digits", "noise", "fog", 5, 0.2, 0, None, -64), r"batch_size must be a positive integer"),
    ],
)
def test_build_stream_refuses_before_reading_anything(monkeypatch: pytest.MonkeyPatch, args: tuple, match: str) -> None:
    monkeypatch.setattr(data, "id_set", _boom)  # any file or image access goes through it
    with pytest.raises(ValueError, match=match):
        data.build_stream(*args)


def test_stream_and_mix_errors_are_value_errors() -> None:
    imgs, labels = torch.zeros(4, 2, 2, 3, dtype=torch.uint8), torch.zeros(4, dtype=torch.long)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        data.Stream(imgs, labels, batch_size=0)
    with pytest.raises(ValueError, match="uint8 N×H×W×3"):
        data.Stream(imgs.permute(0, 3, 1, 2).float(), labels)
    with pytest.raises(ValueError, match="one per image"):
        data.Stream(imgs, labels[:3])
    with pytest.raises(ValueError, match="num_outliers must be ≥ 0"):
        data.mix(imgs, labels, None, -1, seed=0)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--method", "tent", "--dataset", "mnist"], "unknown dataset 'mnist'; choose one of"),
        (["--method", "tent", "--outliers", "cifar"], "unknown outlier set 'cifar'; choose one of"),
        (["--method", "tent", "--corruptions", "gaussian_noise,fogg"], "unknown corruption(s) ['fogg']; valid:"),
        (["--method", "tent", "--severity", "6"], "severity must be an integer from 1 to 5"),
        (["--method", "tent", "--ratio", "1.0"], "must be in [0, 1)"),
        (["--method", "tent", "--seed", "-1"], "seed must be a non-negative integer"),
        (["--method", "tent", "--set", "lr"], "expected NAME=VALUE, got 'lr'"),
        (["--method", "tent", "--set", "learning_rate=0.1"], "unknown hyperparameter(s) ['learning_rate']"),
    ],
)
def test_cli_run_bad_input_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], match: str
) -> None:
    monkeypatch.setattr(models, "source_model", _boom)
    assert cli.main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and match in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_download_failure_is_one_line_but_bugs_keep_their_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def offline(*args: object, **kwargs: object) -> None:
        raise downloads.DownloadError("could not download http://x/y.tar: offline. To continue later, rerun")

    monkeypatch.setattr(stamplib, "run", offline)
    assert cli.main(["run", "--method", "tent"]) == 2
    assert capsys.readouterr().err == "error: could not download http://x/y.tar: offline. To continue later, rerun\n"

    def bug(*args: object, **kwargs: object) -> None:
        raise RuntimeError("CUDA error: an illegal memory access")

    monkeypatch.setattr(stamplib, "run", bug)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        cli.main(["run", "--method", "tent"])


def test_cli_bad_name_in_a_real_process_has_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "STAMPLIB_RESULTS": str(tmp_path), "OMP_NUM_THREADS": "1"}
    bad = subprocess.run([sys.executable, "-m", "stamplib", "run", "--method", "tent", "--corruptions", "fogg"],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert bad.returncode == 2
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: unknown corruption") and "contrast" in lines[0]
    assert not list(tmp_path.iterdir())


def write_cifar_c(root: Path, corruptions: tuple[str, ...], per: int = 10, labels: bool = True) -> Path:
    folder = root / "CIFAR-10-C"
    folder.mkdir(parents=True, exist_ok=True)
    for k, c in enumerate(corruptions):
        np.save(folder / f"{c}.npy", images(5 * per, seed=k))
    if labels:
        np.save(folder / "labels.npy", np.tile(np.arange(per) % 10, 5).astype(np.uint8))
    return folder


def test_partial_cifar10_c_fails_before_the_model_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(tmp_path))
    write_cifar_c(tmp_path, ("gaussian_noise",))  # a half-extracted archive: fog and snow missing
    monkeypatch.setattr(models, "source_model", _boom)
    spec = RunSpec(method="source", dataset="cifar10_c", corruptions=("gaussian_noise", "fog", "snow"),
                   profile="smoke")
    with pytest.raises(loaders.DatasetNotFound) as err:
        stamplib.run(spec)
    msg = str(err.value)
    assert "fog.npy" in msg and "snow.npy" in msg and "gaussian_noise.npy" not in msg
    assert "unpack CIFAR-10-C.tar again" in msg
    assert cli.main(["run", "--method", "source", "--dataset", "cifar10_c", "--corruptions", "fog"]) == 2
    assert "fog.npy" in capsys.readouterr().err
    (tmp_path / "CIFAR-10-C" / "labels.npy").unlink()
    with pytest.raises(loaders.DatasetNotFound, match="labels.npy"):
        data.check_available("cifar10_c_8_2", ("gaussian_noise",), data_root=tmp_path)


def test_missing_files_of_a_templated_npz_dataset_are_listed(tmp_path: Path) -> None:
    np.savez(tmp_path / "fog-5.npz", images=images(4), labels=np.arange(4))
    name = f"npz:{tmp_path}/{{corruption}}-{{severity}}.npz"
    data.check_available(name, ("fog",))
    with pytest.raises(loaders.DatasetNotFound, match="snow-5.npz"):
        data.check_available(name, ("fog", "snow"))


def test_cifar_c_labels_out_of_range(tmp_path: Path) -> None:
    folder = write_cifar_c(tmp_path, ("fog",))
    np.save(folder / "labels.npy", np.tile(np.arange(10) + 1, 5).astype(np.uint8))  # 1..10, not 0..9
    with pytest.raises(loaders.DatasetFormatError, match=r"label 10 is out of range for 10 classes \(0..9\)"):
        loaders.load_cifar_c("cifar10", "fog", 5, tmp_path)


def test_image_folder_with_an_empty_class_folder(tmp_path: Path) -> None:
    root = tmp_path / "set"
    for cls in ("cat", "dog"):
        (root / cls).mkdir(parents=True)
    (root / "emu").mkdir()  # a partial copy: this class lost its images
    Image.fromarray(images(1)[0]).save(root / "cat" / "0.png")
    Image.fromarray(images(1, seed=1)[0]).save(root / "dog" / "0.png")
    with pytest.raises(loaders.DatasetFormatError, match=r"class folder\(s\) emu hold no images.*incomplete"):
        loaders.load_image_folder(root)
    with pytest.raises(loaders.DatasetFormatError, match="emu"):
        data.id_set(f"folder:{root}")


@pytest.mark.parametrize(
    ("array", "match"),
    [
        (np.zeros((4, 8, 8, 1), np.uint8), r"grey-scale.*np.repeat"),
        (np.zeros((4, 8, 8), np.uint8), r"grey-scale.*np.repeat"),
        (np.zeros((4, 1, 8, 8), np.uint8), r"N×1×H×W.*transpose\(0, 2, 3, 1\)"),
        (np.full((4, 8, 8, 3), 200.0, np.float32), r"floats in 0..255: store x.round\(\).astype\(np.uint8\)"),
    ],
)
def test_npz_image_layout_and_dtype_hints(tmp_path: Path, array: np.ndarray, match: str) -> None:
    np.savez(tmp_path / "x.npz", images=array, labels=np.arange(4))
    with pytest.raises(loaders.DatasetFormatError, match=match):
        loaders.load_npz(tmp_path / "x.npz")


def test_float_cifar_c_names_the_fix(tmp_path: Path) -> None:
    folder = write_cifar_c(tmp_path, ())
    np.save(folder / "fog.npy", images(50).astype(np.float32) / 255.0)
    with pytest.raises(loaders.DatasetFormatError, match=r"\(x \* 255\).round\(\).astype\(np.uint8\)"):
        loaders.load_cifar_c("cifar10", "fog", 5, tmp_path)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STAMPLIB_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _state(num_classes: int = 8) -> dict[str, torch.Tensor]:
    return models.create("resnet_cifar_tiny", num_classes).state_dict()


def test_truncated_checkpoint_file(tmp_path: Path) -> None:
    path = tmp_path / "m.pt"
    torch.save(_state(), path)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(models.CheckpointMismatchError, match="truncated or damaged.*Delete it and download"):
        models.create("resnet_cifar_tiny", 8, weights=path)
    torch.save(models.create("resnet_cifar_tiny", 8), path)  # a whole module, not a state_dict
    with pytest.raises(models.CheckpointMismatchError, match=r"pickled Python objects.*model.state_dict\(\)"):
        models.create("resnet_cifar_tiny", 8, weights=path)


def test_truncated_registered_checkpoint_is_not_recorded(home: Path) -> None:
    path = checkpoints.checkpoint_path("ResNet18_8")
    path.parent.mkdir(parents=True)
    torch.save(models.create("resnet18_cifar", 8).state_dict(), path)
    path.write_bytes(path.read_bytes()[:5000])  # a copy cut short
    with pytest.raises(models.CheckpointMismatchError, match="truncated"):
        models.create("resnet18_cifar", 8, weights="ResNet18_8")
    # Its hash must not be recorded: a later complete copy would then fail its checksum.
    assert not checkpoints.sidecar_path(path).exists()


def test_truncated_archive_placed_offline_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        payload = np.random.default_rng(0).bytes(50_000)
        info = tarfile.TarInfo("Toy-C/fog.npy")
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
    archive = buf.getvalue()
    resource = downloads.Resource("toy", "Toy-C.tar.gz", "http://127.0.0.1:9/never",
                                  sha256=hashlib.sha256(archive).hexdigest(), provides="Toy-C")
    monkeypatch.setitem(downloads.RESOURCES, "toy", resource)
    (tmp_path / "Toy-C.tar.gz").write_bytes(archive[: len(archive) // 2])  # an interrupted copy
    with pytest.raises(downloads.ChecksumError, match="delete it and download again"):
        downloads.fetch("toy", tmp_path, download_missing=False)
    assert not (tmp_path / "Toy-C").exists()


def test_damaged_tiny_permutation_is_recreated(tmp_path: Path) -> None:
    good = loaders.tiny_permutation(6, tmp_path)
    path = tmp_path / "permutation-6.npy"
    path.write_bytes(path.read_bytes()[:40])  # half a header
    with pytest.warns(UserWarning, match="unreadable"):
        again = loaders.tiny_permutation(6, tmp_path)
    assert np.array_equal(good, again) and np.array_equal(np.load(path), good)


# ============================================================================ 2. interruption

_GRID = """
import sys, time
import torch
torch.set_num_threads(1)
import stamplib
from stamplib import RunSpec
specs = [RunSpec(method=m, corruptions=("gaussian_noise",), profile="smoke", seed=s)
         for s in range(3) for m in ("source", "bn_stats")]
for spec in specs:
    stamplib.run(spec)
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
        deadline = time.monotonic() + 180
        while not _records_on_disk(results):
            assert proc.poll() is None, f"the grid died: {proc.stderr.read().decode()[-2000:]}"
            assert time.monotonic() < deadline, "no record after 180 s"
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
        assert all(r["mean"]["acc"] >= 0 for r in store.records())  # temporary files are never read

    computed = []
    real_run_stream = runner.run_stream

    def counting(method, stream, *args, **kwargs):
        computed.append(method)
        return real_run_stream(method, stream, *args, **kwargs)

    monkeypatch.setattr(runner, "run_stream", counting)
    with pytest.warns(UserWarning, match=f"unreadable results record .*{last.key()}.*recomputed"):
        for spec in GRID_SPECS:
            stamplib.run(spec, store=store)

    assert len(computed) == len(GRID_SPECS) - len(done)  # finished cells were not recomputed
    for p, (payload, mtime) in before.items():
        assert p.read_bytes() == payload and p.stat().st_mtime_ns == mtime
    assert _records_on_disk(results) == sorted(store.path(s) for s in GRID_SPECS)  # exactly one each
    records = store.records()
    assert sorted(r["key"] for r in records) == sorted(s.key() for s in GRID_SPECS)
    assert all(0 <= r["mean"]["acc"] <= 100 for r in records)
    assert store.get(poisoned)["mean"]["acc"] >= 0 and store.get(last) is not None


def _write_folder(root: Path, n: int) -> np.ndarray:
    arr = images(n)
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True, exist_ok=True)
    for i, a in enumerate(arr):
        Image.fromarray(a).save(root / ("a" if i % 2 else "b") / f"{i:03d}.png")
    return arr


def test_half_written_image_folder_cache_is_not_used(tmp_path: Path) -> None:
    root = tmp_path / "set"
    _write_folder(root, 6)
    reference = loaders.load_image_folder(root, cache=False)
    cache = tmp_path / "set.stamplib.npz"
    loaders.load_image_folder(root)
    full = cache.read_bytes()
    cache.write_bytes(full[: len(full) // 2])  # what a non-atomic writer killed midway leaves
    stray = tmp_path / ".tmp-999999-set.stamplib.npz"
    np.savez(stray, images=np.zeros((6, 32, 32, 3), np.uint8), labels=np.zeros(6, np.int64),
             fingerprint=np.array("whatever"))
    again = loaders.load_image_folder(root)
    assert torch.equal(again.images, reference.images) and torch.equal(again.labels, reference.labels)
    assert cache.read_bytes() != full[: len(full) // 2]  # rebuilt, and now complete
    with np.load(cache) as z:
        assert np.array_equal(z["images"], reference.images.numpy())


def test_half_written_outlier_c_file_is_not_used(tmp_path: Path) -> None:
    pool = images(4)
    out = outlier_c.generated_dir("svhn", tmp_path)
    outlier_c.generate_from_images(pool, out, ["contrast"], (5,))
    # A fog file without a manifest entry: a writer killed before recording it.
    (out / "fog").mkdir()
    full = (out / "contrast" / "5.npy").read_bytes()
    (out / "fog" / "5.npy").write_bytes(full[: len(full) // 2])
    assert outlier_c.outlier_c_images("svhn", "fog", 5, tmp_path) is None  # → corrupted on the fly
    manifest = outlier_c.generate_from_images(pool, out, ["contrast", "fog"], (5,))
    assert "fog/5.npy" in manifest["files"]
    assert outlier_c.load_generated("svhn", "fog", 5, tmp_path).shape == (4, 32, 32, 3)
    # A complete file cut short after it was recorded fails its SHA-256, never read silently.
    (out / "fog" / "5.npy").write_bytes(full[: len(full) // 2])
    with pytest.raises(loaders.DatasetFormatError, match="SHA-256"):
        outlier_c.load_generated("svhn", "fog", 5, tmp_path)


# ============================================================================ 3. determinism


@pytest.mark.parametrize("name", ["stamp", "rotta", "cotta"])
def test_same_spec_and_seed_give_the_same_bits_on_cpu(name: str, digits_model: torch.nn.Module) -> None:
    stream = data.build_stream("digits", "noise", "gaussian_noise", max_id=48, batch_size=20, seed=3)

    def once(global_seed: int) -> runner.StreamResult:
        torch.manual_seed(global_seed)  # the global RNG must play no part
        np.random.seed(global_seed)
        method = methods.create(name, digits_model, 8, dataset="digits", seed=1)
        return runner.run_stream(method, stream)

    a, b = once(0), once(12345)
    assert torch.equal(a.probs, b.probs) and torch.equal(a.ood_score, b.ood_score)
    assert torch.equal(a.labels, b.labels)


def test_run_twice_gives_identical_records(tmp_path: Path, digits_model: torch.nn.Module) -> None:
    spec = RunSpec(method="rotta", corruptions=("gaussian_noise", "contrast"), profile="smoke", seed=2)
    first = stamplib.run(spec, store=ResultsStore(tmp_path / "a"))
    data.build_stream.cache_clear()  # rebuild the streams too
    torch.manual_seed(99)
    second = stamplib.run(spec, store=ResultsStore(tmp_path / "b"), force=True)

    def numbers(record: dict) -> dict:
        return {c: {k: v for k, v in m.items() if k != "seconds"} for c, m in record["per_corruption"].items()}

    assert json.dumps(numbers(first)) == json.dumps(numbers(second))  # bitwise: same repr of every float
    assert first["mean"] == second["mean"]


def test_set_deterministic_switches_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    from stamplib import determinism

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)  # restored after the test
    assert not torch.are_deterministic_algorithms_enabled()
    with determinism.deterministic():
        assert determinism.is_deterministic() and not torch.backends.cudnn.benchmark
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == determinism.CUBLAS_WORKSPACE
    assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.deterministic


def test_cli_deterministic_flag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, digits_model: torch.nn.Module,
                                capsys: pytest.CaptureFixture[str]) -> None:
    from stamplib import determinism

    calls = []
    monkeypatch.setattr(determinism, "set_deterministic", lambda *a, **k: calls.append(True))
    argv = ["run", "--method", "source", "--corruptions", "none", "--profile", "smoke", "--results", str(tmp_path)]
    assert cli.main(argv) == 0 and calls == []
    assert cli.main([*argv, "--force", "--deterministic"]) == 0 and calls == [True]


# ============================================================================ 4. collapse


@dataclasses.dataclass(frozen=True)
class _NoConfig:
    pass


class _NaNOnSecondStream(TTAMethod):
    """Source predictions, but non-finite outputs on the second corruption's stream."""

    configs = dict.fromkeys(SETTINGS, _NoConfig())

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
    configs = dict.fromkeys(SETTINGS, _NoConfig())

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


def test_collapsed_corruptions_are_flagged_in_records_and_tables(
    fake_methods: list[str], tmp_path: Path, digits_model: torch.nn.Module
) -> None:
    store = ResultsStore(tmp_path / "results")
    # quick: streams of 1,280 samples (a single-class stream is only called a collapse from 128)
    specs = {name: RunSpec(method=name, corruptions=("none", "gaussian_noise"), profile="quick")
             for name in fake_methods}
    nan_rec, zero_rec = (stamplib.run(specs[n], store=store) for n in fake_methods)

    pc = nan_rec["per_corruption"]
    assert not pc["none"]["collapsed"] and pc["gaussian_noise"]["collapsed"]
    assert pc["gaussian_noise"]["collapse_reason"] == "non-finite outputs"
    assert nan_rec["mean"]["collapsed"] == ["gaussian_noise"] == nan_rec["collapsed"]
    # still averaged (not dropped): the mean ACC includes the collapsed stream's ACC
    assert nan_rec["mean"]["acc"] == pytest.approx((pc["none"]["acc"] + pc["gaussian_noise"]["acc"]) / 2)
    assert zero_rec["mean"]["collapsed"] == ["none", "gaussian_noise"]
    assert "single class (0)" in zero_rec["per_corruption"]["none"]["collapse_reason"]

    healthy = json.loads(json.dumps(zero_rec))
    healthy["spec"]["method"] = "source"
    healthy["collapsed"], healthy["mean"]["collapsed"] = [], []
    for m in healthy["per_corruption"].values():
        m["collapsed"], m["collapse_reason"] = False, None

    frame = tables.results_frame([nan_rec, zero_rec, healthy])
    assert frame["collapsed"].tolist() == [True, True, False]
    assert frame["collapsed_corruptions"].tolist() == ["gaussian_noise", "none,gaussian_noise", ""]
    md = tables.to_markdown(frame[["method", "ACC", "AUROC", "H", "collapsed"]])
    rows = md.splitlines()
    assert "collapsed" not in rows[0]  # the flag became daggers
    assert rows[2].count("†") == 3 and rows[3].count("†") == 3 and "†" not in rows[4]
    assert rows[-1].startswith("† collapsed:")
    csv_path, md_path, tex_path = tables.save_table(frame, "t", tmp_path / "fig")
    assert pd.read_csv(csv_path)["collapsed"].tolist() == [True, True, False]
    assert tex_path.read_text().count("$^\\dagger$") == 6 + 1  # 2 rows × 3 metrics + the note
    per = tables.results_frame([nan_rec], per_corruption=True)
    per_md = tables.to_markdown(per).splitlines()
    assert "†" not in per_md[2] and per_md[3].count("†") == 3  # only the collapsed corruption


def test_aggregate_names_collapsed_rows_and_still_averages() -> None:
    rows = {"a": {"acc": 10.0, "auroc": 50.0, "h": 20.0, "collapsed": True},
            "b": {"acc": 30.0, "auroc": 70.0, "h": 40.0, "collapsed": False}}
    assert aggregate(rows) == {"acc": 20.0, "auroc": 60.0, "h": 30.0, "collapsed": ["a"]}
    assert aggregate(list(rows.values()))["collapsed"] == [0]
    assert "collapsed" not in aggregate([{"acc": 1.0, "auroc": 2.0, "h": 3.0}])


def test_tables_without_a_collapse_have_no_dagger() -> None:
    frame = tables.results_frame([{
        "spec": {"method": "tent", "dataset": "digits", "outliers": "noise", "seed": 0},
        "per_corruption": {}, "collapsed": [], "mean": {"acc": 1.0, "auroc": 2.0, "h": 1.5},
    }])
    md = tables.to_markdown(frame)
    assert "†" not in md and md.count("\n") == 3
    assert "$^\\dagger$" not in tables.to_latex(frame)
