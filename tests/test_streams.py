"""Stream composition (protocol.md §1, §3): counts, order, first-N outliers, ratios, class
splits, closed set, batching — on small files in the real formats under a temporary data root."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from stamplib import data
from stamplib.data import loaders, outlier_c
from stamplib.data.corruptions import corrupt
from stamplib.data.streams import mix, outliers_for_ratio

SHARED_TARBALL = Path("/work/shared/data/cifar10-jpeg.tar.gz")


# Small writers of the real on-disk formats (same as tests/test_loaders.py; test files stay independent).


def images(n: int, size: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def write_cifar10(root: Path, n_test: int = 20, n_train_batch: int = 4) -> tuple[np.ndarray, np.ndarray]:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    batches = {f"data_batch_{i}": (images(n_train_batch, seed=i), np.arange(n_train_batch) % 10) for i in range(1, 6)}
    batches["test_batch"] = (images(n_test, seed=99), np.arange(n_test) % 10)
    for name, (imgs, labels) in batches.items():
        with open(folder / name, "wb") as fh:
            pickle.dump({b"data": imgs.transpose(0, 3, 1, 2).reshape(len(imgs), 3072), b"labels": labels.tolist()}, fh)
    return batches["test_batch"]


def write_cifar_c(root: Path, per: int = 20) -> dict[str, np.ndarray]:
    (root / "CIFAR-10-C").mkdir(parents=True, exist_ok=True)
    out = {c: images(5 * per, seed=10 + k) for k, c in enumerate(("gaussian_noise", "fog"))}
    for c, arr in out.items():
        np.save(root / "CIFAR-10-C" / f"{c}.npy", arr)
    np.save(root / "CIFAR-10-C" / "labels.npy", np.tile(np.arange(per) % 10, 5).astype(np.uint8))
    return out


def write_folder(root: Path, tree: dict[str, list[np.ndarray]]) -> None:
    for cls, arrays in tree.items():
        (root / cls).mkdir(parents=True, exist_ok=True)
        for i, a in enumerate(arrays):
            Image.fromarray(a).save(root / cls / f"{i:04d}.png")


def indexed_pool(n: int, size: int = 32) -> np.ndarray:
    """Images whose pixels encode their pool index (channel 0 = i % 256, channel 1 = i // 256)."""
    pool = np.zeros((n, size, size, 3), np.uint8)
    pool[..., 0] = (np.arange(n) % 256)[:, None, None]
    pool[..., 1] = (np.arange(n) // 256)[:, None, None]
    return pool


def pool_index(imgs: torch.Tensor) -> list[int]:
    return (imgs[:, 0, 0, 0].long() + 256 * imgs[:, 0, 0, 1].long()).tolist()


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    data.build_stream.cache_clear()


def test_ratio_to_count_mapping() -> None:
    """protocol.md §3.2 with 10,000 ID images; "33 %" is taken as exactly 1/3 → 5,000."""
    expected = {0.05: 526, 0.1: 1111, 0.2: 2500, 1 / 3: 5000, 0.5: 10_000}
    assert {r: outliers_for_ratio(10_000, r) for r in expected} == expected
    assert outliers_for_ratio(10_000, 0.33) == 4925  # the literal reading, not used
    assert outliers_for_ratio(8_000, 0.2) == 2000  # class splits: all 2,000 held-out images
    assert outliers_for_ratio(50_000, 0.2) == 12_500
    with pytest.raises(ValueError):
        outliers_for_ratio(10, 1.0)


def test_mix_counts_order_and_seed() -> None:
    ids = torch.from_numpy(indexed_pool(300, 4))
    outs = torch.from_numpy(indexed_pool(1000, 4) + np.uint8(0))
    outs[..., 2] = 255  # mark outliers
    labels = torch.arange(300) % 7
    a = mix(ids, labels, outs, 75, seed=3)
    b = mix(ids, labels, outs, 75, seed=3)
    c = mix(ids, labels, outs, 75, seed=4)
    assert a.images.shape[0] == 375 and a.num_outliers == 75 and int((a.labels >= 0).sum()) == 300
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.labels, c.labels)
    outlier_rows = a.images[a.is_outlier]
    assert (outlier_rows[..., 2] == 255).all()
    assert sorted(pool_index(outlier_rows)) == list(range(75))  # the first 75, not a sample
    id_rows = a.images[~a.is_outlier]
    idx = pool_index(id_rows)
    assert sorted(idx) == list(range(300))
    assert torch.equal(a.labels[~a.is_outlier], labels[torch.tensor(idx)])  # labels travel with images


@pytest.mark.parametrize(("n", "batches", "last"), [(10_000, 157, 16), (12_500, 196, 20), (55_000, 860, 24)])
def test_batches_of_64_with_partial_last(n: int, batches: int, last: int) -> None:
    stream = mix(torch.zeros(n, 1, 1, 3, dtype=torch.uint8), torch.zeros(n, dtype=torch.long), None, 0, seed=0)
    sizes = [b.x.shape[0] for b in stream.batches()]
    assert len(stream) == len(sizes) == batches
    assert set(sizes[:-1]) == {64} and sizes[-1] == last


@settings(max_examples=40, deadline=None, database=None)
@given(num_id=st.integers(1, 3000), ratio=st.floats(0.0, 0.9))
def test_counts_and_share_property(num_id: int, ratio: float) -> None:
    n_out = outliers_for_ratio(num_id, ratio)
    pool = torch.zeros(n_out, 1, 1, 3, dtype=torch.uint8)
    stream = mix(torch.zeros(num_id, 1, 1, 3, dtype=torch.uint8), torch.zeros(num_id, dtype=torch.long),
                 pool, n_out, seed=1)
    total = num_id + n_out
    assert stream.images.shape[0] == total and stream.num_outliers == n_out
    assert abs(n_out / total - ratio) <= 0.5 / total + 1e-12  # rounding N is the only error


# --------------------------------------------------------------------------- registered sets


def test_cifar10_c_uses_released_files_and_clean_for_none(tmp_path: Path) -> None:
    clean, _ = write_cifar10(tmp_path, n_test=40)
    released = write_cifar_c(tmp_path, per=40)
    np.savez(tmp_path / "noise_like.npz", images=indexed_pool(100))
    s = data.build_stream("cifar10_c", f"npz:{tmp_path}/noise_like.npz", "fog", 5, 0.2, seed=0, data_root=tmp_path)
    assert s.images.shape[0] == 50 and s.num_outliers == 10
    id_rows = s.images[~s.is_outlier].numpy()
    block = released["fog"][160:200]
    assert sorted(map(bytes, id_rows)) == sorted(map(bytes, block))  # released images, not re-corrupted
    none = data.build_stream("cifar10_c", "none", "none", data_root=tmp_path)
    assert sorted(map(bytes, none.images.numpy())) == sorted(map(bytes, clean)) and none.num_outliers == 0


def test_class_split_heldout_classes_from_the_same_corrupted_stream(tmp_path: Path) -> None:
    released = write_cifar_c(tmp_path, per=50)
    s = data.build_stream("cifar10_c_8_2", "heldout_classes", "gaussian_noise", 5, 0.2, seed=1, data_root=tmp_path)
    labels_block = np.arange(50) % 10
    block = released["gaussian_noise"][200:250]
    assert int((s.labels >= 0).sum()) == 40 and s.num_outliers == 10  # 8:2
    assert s.labels.max() == 7 and (s.labels[s.is_outlier] == -1).all()
    assert sorted(map(bytes, s.images[s.is_outlier].numpy())) == sorted(map(bytes, block[labels_block >= 8]))
    for batch in s.batches():
        assert torch.equal(batch.is_outlier, batch.y < 0)
    assert data.num_classes("cifar10_c_8_2") == 8 and data.num_classes("cifar100_c_80_20") == 80
    with pytest.raises(ValueError, match="class-split"):
        data.build_stream("cifar10_c", "heldout_classes", "gaussian_noise", data_root=tmp_path)


def test_closed_set_stream(tmp_path: Path) -> None:
    write_cifar_c(tmp_path, per=30)
    s = data.build_stream("cifar10_c", "none", "fog", 5, 0.2, seed=0, data_root=tmp_path)
    assert s.num_outliers == 0 and s.images.shape[0] == 30 and (s.labels >= 0).all()


def test_source_train_known_classes_only(tmp_path: Path) -> None:
    write_cifar10(tmp_path, n_train_batch=10)
    x, y = data.source_train("cifar10_c_8_2", data_root=tmp_path)
    assert x.shape == (40, 32, 32, 3) and y.max() == 7 and len(y) == 40
    x, y = data.source_train("cifar10", data_root=tmp_path)
    assert len(y) == 50
    with pytest.raises(FileNotFoundError, match="ImageNet/val"):  # ImageNet-C's source: the val split
        data.source_train("imagenet_c", data_root=tmp_path)


def test_clean_source_corrupted_on_the_fly_equals_generated_set(tmp_path: Path) -> None:
    """svhn: without a stored SVHN-C the first N clean images are corrupted with the
    generation seed — the same bytes as rows 0..N−1 of the generated file."""
    import scipy.io

    write_cifar10(tmp_path, n_test=40)
    pool = images(30, seed=7)
    (tmp_path / "svhn").mkdir()
    scipy.io.savemat(tmp_path / "svhn" / "test_32x32.mat",
                     {"X": pool.transpose(1, 2, 3, 0), "y": np.ones((30, 1), np.uint8)})
    fly = data.build_stream("cifar10", "svhn", "contrast", 5, 0.2, seed=0, data_root=tmp_path)
    outliers = fly.images[fly.is_outlier].numpy()
    expected = corrupt(pool[:10], "contrast", 5, seed=outlier_c.GENERATION_SEED)
    assert sorted(map(bytes, outliers)) == sorted(map(bytes, expected))
    outlier_c.generate("svhn", ["contrast"], (5,), data_root=tmp_path, progress=False)
    data.build_stream.cache_clear()
    cached = data.build_stream("cifar10", "svhn", "contrast", 5, 0.2, seed=0, data_root=tmp_path)
    assert torch.equal(cached.images, fly.images)
    assert data.OUTLIER_SETS["svhn"].corruption_seed == outlier_c.GENERATION_SEED


def test_outliers_resized_to_id_size_after_corruption(tmp_path: Path) -> None:
    write_cifar10(tmp_path, n_test=40)
    pool = images(12, size=64, seed=3)
    write_folder(tmp_path / "Tiny-ImageNet-C" / "fog" / "5", {"n1": list(pool[:6]), "n2": list(pool[6:])})
    s = data.build_stream("cifar10", "tiny", "fog", 5, 0.2, seed=0, data_root=tmp_path)
    perm = np.load(tmp_path / "Tiny-ImageNet-C" / "permutation-12.npy")
    expected = loaders.resize_images(torch.from_numpy(pool[perm[:10]]), 32).numpy()
    assert s.images.shape[1:] == (32, 32, 3)
    assert sorted(map(bytes, s.images[s.is_outlier].numpy())) == sorted(map(bytes, expected))


def test_scheme_sources_for_id_and_outliers(tmp_path: Path) -> None:
    np.savez(tmp_path / "id.npz", images=images(20), labels=np.arange(20) % 4)
    write_folder(tmp_path / "out", {"a": list(indexed_pool(6)), "b": list(indexed_pool(8)[6:])})
    s = data.build_stream(f"npz:{tmp_path}/id.npz", f"folder:{tmp_path}/out", "none", 5, 0.2, seed=2)
    assert data.num_classes(f"npz:{tmp_path}/id.npz") == 4
    assert sorted(pool_index(s.images[s.is_outlier])) == [0, 1, 2, 3, 4]  # first N in folder order
    # A template names already corrupted copies; they are used as they are.
    (tmp_path / "c" / "fog").mkdir(parents=True)
    np.savez(tmp_path / "c" / "fog" / "5.npz", images=indexed_pool(9))
    s = data.build_stream(f"npz:{tmp_path}/id.npz", f"npz:{tmp_path}/c/{{corruption}}/{{severity}}.npz",
                          "fog", 5, 0.2, seed=2)
    assert sorted(pool_index(s.images[s.is_outlier])) == [0, 1, 2, 3, 4]


def test_digits_unchanged_and_heldout_alias() -> None:
    a = data.build_stream("digits", "digits_heldout", "none", max_id=100)
    b = data.build_stream("digits", "heldout_classes", "none", max_id=100)
    assert torch.equal(a.images, b.images) and a.num_outliers == 25
    assert data.build_stream("digits", "noise", "none", max_id=100).num_outliers == 25


def test_dataset_status(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    status = {name: (found, where) for name, found, where in data.dataset_status(tmp_path)}
    assert status["digits"][0] and status["cifar10"][0] and status["cifar10_8_2"][0]
    assert not status["cifar10_c"][0] and "CIFAR-10-C.tar" in status["cifar10_c"][1]
    assert not status["svhn"][0] and "test_32x32.mat" in status["svhn"][1]
    assert set(data.ID_SETS) | set(data.OUTLIER_SETS) <= set(status)


def test_registries_are_lazy(tmp_path: Path) -> None:
    """Building every record reads nothing: an empty data root is fine until images are used."""
    for name in data.ID_SETS:
        if name != "digits":
            assert data.id_set(name, tmp_path).num_classes > 0
    with pytest.raises(loaders.DatasetNotFound, match="CIFAR-10-C.tar"):
        data.build_stream("cifar10_c", "none", "fog", data_root=tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_TARBALL.is_file(), reason="shared CIFAR-10 JPEG tarball not on this machine")
def test_real_cifar10_jpeg(tmp_path: Path) -> None:
    shutil.copy(SHARED_TARBALL, tmp_path / SHARED_TARBALL.name)
    s = data.build_stream("cifar10_jpeg_8_2", "heldout_classes", "none", data_root=tmp_path)
    assert s.images.shape == (10_000, 32, 32, 3) and s.num_outliers == 2000
    assert torch.bincount(s.labels[s.labels >= 0]).tolist() == [1000] * 8
    x, y = data.source_train("cifar10_jpeg_8_2", data_root=tmp_path)
    assert x.shape == (40_000, 32, 32, 3) and y.max() == 7


def test_image_folder_pools_are_dealt_out_class_by_class():
    import torch

    from stamplib.data import interleave_classes

    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    order = interleave_classes(labels)
    assert labels[order].tolist() == [0, 1, 2, 0, 1, 2, 0, 2, 2]
    assert sorted(order.tolist()) == list(range(9))  # a permutation
    assert order[labels[order] == 2].tolist() == [5, 6, 7, 8]  # file order kept within a class
