"""Loaders on small files written in the real on-disk formats, and outlier-C generation."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
from PIL import Image

from stamplib import data
from stamplib.data import loaders, outlier_c
from stamplib.data.corruptions import corrupt
from tests.data.files import write_cifar10, write_cifar_batch, write_cifar_c, write_folder
from tests.support import uint8_images as images

# --------------------------------------------------------------------------- CIFAR


def test_cifar10_pickles_round_trip(tmp_path: Path) -> None:
    test, labels = write_cifar10(tmp_path)
    got = loaders.load_cifar("cifar10", "test", tmp_path)
    assert got.images.dtype == torch.uint8 and got.images.shape == (20, 32, 32, 3)
    assert np.array_equal(got.images.numpy(), test) and np.array_equal(got.labels.numpy(), labels)
    train = loaders.load_cifar("cifar10", "train", tmp_path)
    assert len(train) == 20 and np.array_equal(train.images[:4].numpy(), images(4, seed=1))


def test_cifar100_uses_fine_labels(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-100-python"
    write_cifar_batch(folder / "test", images(6), np.array([0, 50, 99, 80, 81, 3]), key=b"fine_labels")
    write_cifar_batch(folder / "train", images(2), np.array([1, 2]), key=b"fine_labels")
    got = loaders.load_cifar("cifar100", "test", tmp_path)
    assert got.labels.tolist() == [0, 50, 99, 80, 81, 3]


def test_cifar_missing_and_truncated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STAMPLIB_DATA_ROOT", raising=False)
    with pytest.raises(loaders.DatasetNotFound) as info:
        loaders.load_cifar("cifar10", "test", tmp_path)
    assert "cifar-10-python.tar.gz" in str(info.value) and str(tmp_path) in str(info.value)
    write_cifar10(tmp_path)
    batch = tmp_path / "cifar-10-batches-py" / "test_batch"
    batch.write_bytes(batch.read_bytes()[:1000])
    with pytest.raises(loaders.DatasetFormatError, match="truncated"):
        loaders.load_cifar("cifar10", "test", tmp_path)


def test_cifar_c_severity_blocks(tmp_path: Path) -> None:
    arrays = write_cifar_c(tmp_path)
    for severity in (1, 5):
        got = loaders.load_cifar_c("cifar10", "fog", severity, tmp_path)
        rows = slice((severity - 1) * 20, severity * 20)
        assert np.array_equal(got.images.numpy(), arrays["fog"][rows])
        assert got.labels.tolist() == [i % 10 for i in range(20)]
    with pytest.raises(ValueError):
        loaders.load_cifar_c("cifar10", "fog", 6, tmp_path)


def test_cifar_c_validation(tmp_path: Path) -> None:
    write_cifar_c(tmp_path)
    folder = tmp_path / "CIFAR-10-C"
    with pytest.raises(loaders.DatasetNotFound, match="snow.npy"):
        loaders.load_cifar_c("cifar10", "snow", 5, tmp_path)
    np.save(folder / "snow.npy", images(5 * 20).astype(np.float32))
    with pytest.raises(loaders.DatasetFormatError, match="uint8"):
        loaders.load_cifar_c("cifar10", "snow", 5, tmp_path)
    np.save(folder / "snow.npy", images(21))
    with pytest.raises(loaders.DatasetFormatError, match="severity blocks"):
        loaders.load_cifar_c("cifar10", "snow", 5, tmp_path)
    raw = (folder / "fog.npy").read_bytes()
    (folder / "fog.npy").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(loaders.DatasetFormatError, match="truncated"):
        loaders.load_cifar_c("cifar10", "fog", 5, tmp_path)


# --------------------------------------------------------------------------- generic sources


def test_npz_source_and_errors(tmp_path: Path) -> None:
    imgs, labels = images(7), np.arange(7)
    np.savez(tmp_path / "ok.npz", images=imgs, labels=labels)
    got = loaders.load_npz(tmp_path / "ok.npz")
    assert np.array_equal(got.images.numpy(), imgs) and got.labels.tolist() == list(range(7))
    np.savez(tmp_path / "float.npz", images=imgs / 255.0, labels=labels)
    with pytest.raises(loaders.DatasetFormatError, match=r"\[0, 1\]"):
        loaders.load_npz(tmp_path / "float.npz")
    np.savez(tmp_path / "nchw.npz", images=imgs.transpose(0, 3, 1, 2), labels=labels)
    with pytest.raises(loaders.DatasetFormatError, match="channels-last"):
        loaders.load_npz(tmp_path / "nchw.npz")
    np.savez(tmp_path / "range.npz", images=imgs.astype(np.int32) * 2, labels=labels)
    with pytest.raises(loaders.DatasetFormatError, match="outside 0..255"):
        loaders.load_npz(tmp_path / "range.npz")
    np.savez(tmp_path / "nolabels.npz", images=imgs)
    with pytest.raises(loaders.DatasetFormatError, match="labels"):
        loaders.load_npz(tmp_path / "nolabels.npz")
    assert len(loaders.load_npz(tmp_path / "nolabels.npz", require_labels=False)) == 7
    np.savez(tmp_path / "short.npz", images=imgs, labels=labels[:3])
    with pytest.raises(loaders.DatasetFormatError, match="7 labels"):
        loaders.load_npz(tmp_path / "short.npz")
    raw = (tmp_path / "ok.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(loaders.DatasetFormatError, match="truncated"):
        loaders.load_npz(tmp_path / "cut.npz")
    with pytest.raises(loaders.DatasetNotFound, match="np.savez"):
        loaders.load_npz(tmp_path / "absent.npz")


def test_image_folder_order_cache_and_invalidation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = images(3, seed=1), images(2, seed=2)
    root = tmp_path / "set"
    write_folder(root, {"zebra": list(b), "apple": list(a)})  # created out of order on purpose
    got = loaders.load_image_folder(root)
    assert got.classes == ("apple", "zebra")
    assert got.labels.tolist() == [0, 0, 0, 1, 1]
    assert np.array_equal(got.images.numpy(), np.concatenate([a, b]))  # PNG is lossless
    cache = tmp_path / "set.stamplib.npz"
    assert cache.is_file()

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("decoded again although the cache is valid")

    monkeypatch.setattr(loaders, "decode_images", boom)
    again = loaders.load_image_folder(root, limit=4)
    assert np.array_equal(again.images.numpy(), got.images.numpy()[:4])
    monkeypatch.undo()
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(root / "zebra" / "0000.png")  # edit a file
    changed = loaders.load_image_folder(root)
    assert changed.images[3].sum() == 0


def test_image_folder_jpeg_flat_resize_and_errors(tmp_path: Path) -> None:
    flat = tmp_path / "flat"
    flat.mkdir()
    for i, a in enumerate(images(3, size=40)):
        Image.fromarray(a).save(flat / f"{i}.jpg", quality=90)
    got = loaders.load_image_folder(flat, resize=32, cache=False)
    assert got.images.shape == (3, 32, 32, 3) and got.classes == ("",)
    Image.fromarray(images(1, size=20)[0]).save(flat / "9.jpg")
    with pytest.raises(loaders.DatasetFormatError, match="different sizes"):
        loaders.load_image_folder(flat, cache=False)
    (flat / "9.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(loaders.DatasetFormatError, match="cannot be decoded"):
        loaders.load_image_folder(flat, resize=32, cache=False)
    with pytest.raises(loaders.DatasetNotFound):
        loaders.load_image_folder(tmp_path / "nothing")


# --------------------------------------------------------------------------- datasets


def test_svhn_mat(tmp_path: Path) -> None:
    imgs = images(5)
    y = np.array([[10], [1], [2], [9], [10]], dtype=np.uint8)
    (tmp_path / "svhn").mkdir()
    scipy.io.savemat(tmp_path / "svhn" / "test_32x32.mat", {"X": imgs.transpose(1, 2, 3, 0), "y": y})
    got = loaders.load_svhn("test", tmp_path)
    assert np.array_equal(got.images.numpy(), imgs) and got.labels.tolist() == [0, 1, 2, 9, 0]
    mat = tmp_path / "svhn" / "test_32x32.mat"
    mat.write_bytes(mat.read_bytes()[:2000])
    with pytest.raises(loaders.DatasetFormatError, match="truncated"):
        loaders.load_svhn("test", tmp_path)
    mat.write_bytes(b"MATLAB 5.0 garbage")
    with pytest.raises(loaders.DatasetFormatError):
        loaders.load_svhn("test", tmp_path)


def test_imagenet_c_layout(tmp_path: Path) -> None:
    folder = tmp_path / "ImageNet-C" / "fog" / "5"
    big = images(1, size=256, seed=3)[0]
    write_folder(folder, {"n02": [images(1, 224, 1)[0]], "n01": [images(1, 224, 2)[0], big]})
    got = loaders.load_imagenet_c("fog", 5, tmp_path, expect_classes=2)
    assert got.images.shape == (3, 224, 224, 3) and got.labels.tolist() == [0, 0, 1]
    assert np.array_equal(got.images[1].numpy(), big[16:240, 16:240])  # CenterCrop(224)
    with pytest.raises(loaders.DatasetFormatError, match="1000"):
        loaders.load_imagenet_c("fog", 5, tmp_path)
    with pytest.raises(loaders.DatasetNotFound, match="noise.tar"):
        loaders.load_imagenet_c("gaussian_noise", 5, tmp_path)


def test_tiny_imagenet_c_permutation_is_cached_and_seeded(tmp_path: Path) -> None:
    folder = tmp_path / "Tiny-ImageNet-C" / "fog" / "5"
    pool = images(6, size=64)
    write_folder(folder, {"n1": list(pool[:3]), "n2": list(pool[3:])})
    got = loaders.load_tiny_imagenet_c("fog", 5, tmp_path, limit=4)
    perm = np.load(tmp_path / "Tiny-ImageNet-C" / "permutation-6.npy")
    expected = torch.randperm(6, generator=torch.Generator().manual_seed(2020)).numpy()
    assert np.array_equal(perm, expected)
    assert np.array_equal(got.images.numpy(), pool[perm[:4]])
    np.save(tmp_path / "Tiny-ImageNet-C" / "permutation-6.npy", np.array([0, 0, 1, 2, 3, 4]))
    with pytest.raises(loaders.DatasetFormatError, match="not a permutation"):
        loaders.load_tiny_imagenet_c("fog", 5, tmp_path)


def test_textures_places_lsun_first_n_and_resize(tmp_path: Path) -> None:
    write_folder(tmp_path / "dtd" / "images", {"banded": list(images(2, 50, 1)), "zigzagged": list(images(2, 60, 2))},
                 ext=".jpg")
    tex = loaders.load_textures(tmp_path, limit=3)
    assert tex.images.shape == (3, 224, 224, 3) and tex.labels.tolist() == [0, 0, 1]
    write_folder(tmp_path / "places365" / "val_256", {"": list(images(3, 256))})
    assert loaders.load_places365(tmp_path).images.shape == (3, 224, 224, 3)
    lsun = tmp_path / "LSUN_resize"
    write_folder(lsun, {"": list(images(4))})
    assert np.array_equal(loaders.load_lsun_resize(tmp_path, limit=2).images.numpy(), images(4)[:2])


def test_resize_images_matches_pil_bilinear() -> None:
    x = images(2, 64)
    out = loaders.resize_images(torch.from_numpy(x), 32)
    ref = np.asarray(Image.fromarray(x[1]).resize((32, 32), Image.BILINEAR))
    assert out.shape == (2, 32, 32, 3) and np.array_equal(out[1].numpy(), ref)


# --------------------------------------------------------------------------- outlier-C


def test_generation_is_deterministic_chunked_and_manifested(tmp_path: Path) -> None:
    pool = images(9)
    m1 = outlier_c.generate_from_images(pool, tmp_path / "a", ["gaussian_noise", "contrast"], (5,), chunk=4)
    m2 = outlier_c.generate_from_images(pool, tmp_path / "b", ["gaussian_noise", "contrast"], (5,), chunk=9)
    for rel in ("gaussian_noise/5.npy", "contrast/5.npy"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
        assert m1["files"][rel]["sha256"] == m2["files"][rel]["sha256"]
    expected = corrupt(pool[:5], "gaussian_noise", 5, seed=outlier_c.GENERATION_SEED)
    assert np.array_equal(np.load(tmp_path / "a" / "gaussian_noise/5.npy")[:5], expected)  # = on the fly
    assert not [p for p in (tmp_path / "a").rglob(".tmp-*")]


def test_killed_generation_leaves_nothing_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "svhn"
    calls = {"n": 0}
    import stamplib.data.corruptions as corruptions_module

    real = corruptions_module.corrupt

    def dies_midway(*args: object, **kwargs: object) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # a kill in the middle of the second file
        return real(*args, **kwargs)

    monkeypatch.setattr(corruptions_module, "corrupt", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        outlier_c.generate_from_images(images(4), out, ["contrast", "fog"], (5,), chunk=2)
    assert (out / "contrast" / "5.npy").is_file()
    assert not (out / "fog" / "5.npy").exists() and not list(out.rglob(".tmp-*"))
    assert "fog/5.npy" not in outlier_c.read_manifest(out)["files"]


def test_generate_svhn_and_load_generated(tmp_path: Path) -> None:
    pool = images(6)
    (tmp_path / "svhn").mkdir()
    scipy.io.savemat(tmp_path / "svhn" / "test_32x32.mat", {"X": pool.transpose(1, 2, 3, 0), "y": np.ones((6, 1),
                                                                                                          np.uint8)})
    out = outlier_c.generate("svhn", ["brightness"], (5,), data_root=tmp_path, progress=False)
    got = outlier_c.outlier_c_images("svhn", "brightness", 5, tmp_path, limit=4)
    assert np.array_equal(got.numpy(), corrupt(pool[:4], "brightness", 5, seed=outlier_c.GENERATION_SEED))
    assert outlier_c.outlier_c_images("svhn", "brightness", 5, tmp_path, limit=7) is None  # too few rows
    assert outlier_c.outlier_c_images("svhn", "fog", 5, tmp_path) is None
    path = out / "brightness" / "5.npy"
    data = np.load(path)
    data[0, 0, 0, 0] ^= 1
    np.save(path, data)
    with pytest.raises(loaders.DatasetFormatError, match="SHA-256"):
        outlier_c.load_generated("svhn", "brightness", 5, tmp_path)
    # Regenerating repairs it (the stale file fails the hash check and is rewritten).
    outlier_c.generate("svhn", ["brightness"], (5,), data_root=tmp_path, progress=False)
    assert outlier_c.load_generated("svhn", "brightness", 5, tmp_path) is not None


def test_released_layouts_take_precedence(tmp_path: Path) -> None:
    folder = tmp_path / "LSUN_resize-C" / "fog" / "5" / "LSUN_resize"
    write_folder(folder.parent, {"LSUN_resize": list(images(3, seed=5))})
    got = outlier_c.outlier_c_images("lsun", "fog", 5, tmp_path, limit=2)
    assert np.array_equal(got.numpy(), images(3, seed=5)[:2])
    shutil.rmtree(tmp_path / "LSUN_resize-C")
    assert outlier_c.outlier_c_images("lsun", "fog", 5, tmp_path) is None


# --------------------------------------------------------------------------- damaged and partial files


def test_cifar_c_labels_out_of_range(tmp_path: Path) -> None:
    write_cifar_c(tmp_path, per=10, corruptions=("fog",))
    folder = tmp_path / "CIFAR-10-C"
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
        data.dataset(f"folder:{root}")


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
    write_cifar_c(tmp_path, per=10, corruptions=())
    folder = tmp_path / "CIFAR-10-C"
    np.save(folder / "fog.npy", images(50).astype(np.float32) / 255.0)
    with pytest.raises(loaders.DatasetFormatError, match=r"\(x \* 255\).round\(\).astype\(np.uint8\)"):
        loaders.load_cifar_c("cifar10", "fog", 5, tmp_path)


def test_damaged_tiny_permutation_is_recreated(tmp_path: Path) -> None:
    good = loaders.tiny_permutation(6, tmp_path)
    path = tmp_path / "permutation-6.npy"
    path.write_bytes(path.read_bytes()[:40])  # half a header
    with pytest.warns(UserWarning, match="unreadable"):
        again = loaders.tiny_permutation(6, tmp_path)
    assert np.array_equal(good, again) and np.array_equal(np.load(path), good)


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
    np.savez(
        stray, images=np.zeros((6, 32, 32, 3), np.uint8), labels=np.zeros(6, np.int64), fingerprint=np.array("whatever")
    )
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
