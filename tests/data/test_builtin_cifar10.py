"""The built-in CIFAR-10 benchmark: package data that is checked byte for byte, decodes to the
photographs its manifest names, and source networks that load strictly and recognise them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from stamplib import data, models
from stamplib.data import builtin_cifar10
from stamplib.data.builtin_cifar10 import FOLDER, PackageDataError
from stamplib.models import checkpoints
from stamplib.models.training import evaluate_accuracy

#: The networks the package ships: network 0 of both settings always; networks 1–4 as their pairs
#: are trained (``benchmark build`` ships a seed's two networks together).
NETWORKS = tuple(n for n in builtin_cifar10.CHECKPOINTS if (FOLDER / f"{n}.pt").is_file())
#: Every file the package ships: the photographs and the networks with their sidecars.
SHIPPED = ("cifar10_subset.npz", *(f"{n}{s}" for n in NETWORKS for s in (".pt", ".json")))


def test_every_shipped_file_has_its_recorded_sha256_and_the_folder_fits_the_budget() -> None:
    sums = builtin_cifar10.recorded_sums()
    assert set(sums) == set(SHIPPED)
    assert set(builtin_cifar10.BASE_CHECKPOINTS) <= set(NETWORKS)
    for name in NETWORKS:  # a seed's two networks ship together
        assert all(other in NETWORKS for other in builtin_cifar10._pair(name)), name
    builtin_cifar10.verify()
    total = sum((FOLDER / name).stat().st_size for name in (*SHIPPED, "SHA256SUMS", "README.md"))
    assert total <= builtin_cifar10.MAX_BYTES


@pytest.mark.parametrize("name", SHIPPED)
def test_a_changed_byte_is_refused_with_the_way_to_restore_it(tmp_path: Path, name: str) -> None:
    copy = tmp_path / "builtin"
    shutil.copytree(FOLDER, copy)
    payload = bytearray((copy / name).read_bytes())
    payload[len(payload) // 2] ^= 0x01
    (copy / name).write_bytes(bytes(payload))
    with pytest.raises(PackageDataError, match=rf"{name} has SHA-256 .*`git checkout"):
        builtin_cifar10.verify(copy)
    others = tuple(n for n in SHIPPED if n != name)
    builtin_cifar10.verify(copy, others)  # the untouched files still pass


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "builtin"
    shutil.copytree(FOLDER, copy)
    (copy / "ResNetTiny_8_jpeg.pt").unlink()
    with pytest.raises(PackageDataError, match="ResNetTiny_8_jpeg.pt is missing"):
        builtin_cifar10.checkpoint_file("ResNetTiny_8_jpeg", copy)


def test_loading_a_shipped_network_checks_the_package_sums(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "builtin"
    shutil.copytree(FOLDER, copy)
    payload = bytearray((copy / "ResNetTiny_10_jpeg.pt").read_bytes())
    payload[-100] ^= 0x01
    (copy / "ResNetTiny_10_jpeg.pt").write_bytes(bytes(payload))
    monkeypatch.setattr(builtin_cifar10, "FOLDER", copy)
    with pytest.raises(PackageDataError, match="ResNetTiny_10_jpeg.pt has SHA-256"):
        models.source_model("cifar10_builtin")
    assert {row["checkpoint"] for row in checkpoints.status()} >= set(builtin_cifar10.BASE_CHECKPOINTS)  # still lists


def test_the_photographs_are_class_balanced_and_interleaved() -> None:
    photos = builtin_cifar10.load()
    for images, labels, files in ((photos.test_images, photos.test_labels, photos.test_files),
                                  (photos.train_images, photos.train_labels, photos.train_files)):
        assert images.shape == (2000, 32, 32, 3) and images.dtype == torch.uint8
        assert torch.bincount(labels, minlength=10).tolist() == [200] * 10
        assert labels[:10].tolist() == list(range(10))  # the first N cover every class
        assert len(set(files)) == 2000
        assert images.float().std() > 30  # photographs, not a constant fill
    assert photos.test_files[0] == "airplane/0000.jpg"


def test_the_registry_serves_the_photographs_and_the_class_split() -> None:
    ten, split = data.dataset("cifar10_builtin"), data.dataset("cifar10_builtin_8_2")
    assert ten.builtin and split.builtin and (ten.num_classes, split.num_classes) == (10, 8)
    images, labels = ten.clean_test(Path("unused"))
    assert images.shape[0] == 2000
    known, known_labels = split.clean_test(Path("unused"))
    assert known.shape[0] == 1600 and int(known_labels.max()) == 7
    heldout = split.heldout.load(Path("unused"))
    assert heldout.shape[0] == 400  # ship and truck


@pytest.mark.parametrize(("dataset", "classes", "n_test"), [("cifar10_builtin", 10, 10_000),
                                                             ("cifar10_builtin_8_2", 8, 8_000)])
def test_the_source_networks_load_strictly_and_recognise_the_photographs(dataset: str, classes: int,
                                                                         n_test: int) -> None:
    entry = data.dataset(dataset)
    model = models.source_model(dataset)  # create(..., weights=name): strict, SHA-256-verified
    assert model.fc.out_features == classes
    side = checkpoints.read_sidecar(checkpoints.checkpoint_path(entry.checkpoint))
    assert side["n_test"] == n_test and side["n_train"] == 5_000 * classes
    assert side["recipe_name"] in ("cifar10_compact", "cifar10_8_compact")
    images, labels = entry.clean_test(Path("unused"))
    accuracy = evaluate_accuracy(model, images, labels)
    # Measured on all JPEG test photographs of its classes; the 2,000 shipped ones are among them.
    assert accuracy > side["clean_test_accuracy"] - 0.05


def test_the_search_path_cannot_shadow_a_shipped_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAMPLIB_HOME", str(tmp_path))
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "ResNetTiny_10_jpeg.pt").write_bytes(b"not a network")
    assert checkpoints.checkpoint_path("ResNetTiny_10_jpeg") == FOLDER / "ResNetTiny_10_jpeg.pt"


def _jpeg_folder(root: Path, per_class: int) -> None:
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        for name in ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"):
            folder = root / "cifar10-jpeg" / split / name
            folder.mkdir(parents=True)
            for i in range(per_class):
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(folder / f"{i:04d}.jpg")


def _fake_checkpoints(folder: Path) -> None:
    folder.mkdir()
    for name in builtin_cifar10.CHECKPOINTS:
        classes = 8 if name.startswith("ResNetTiny_8_") else 10
        net = models.resnet_cifar_tiny(classes)
        checkpoints.save_checkpoint(folder / f"{name}.pt", net.state_dict(), {"name": name, "num_classes": classes})


def test_build_writes_a_verified_folder_from_an_image_folder(tmp_path: Path) -> None:
    _jpeg_folder(tmp_path / "data", per_class=3)
    _fake_checkpoints(tmp_path / "ckpt")
    out = tmp_path / "built"
    written = builtin_cifar10.build(tmp_path / "data" / "cifar10-jpeg", tmp_path / "ckpt", out=out, per_class=2)
    every = {f"{n}{s}" for n in builtin_cifar10.CHECKPOINTS for s in (".pt", ".json")}
    assert {p.name for p in written} == {"cifar10_subset.npz", *every, "SHA256SUMS"}  # all five pairs given
    builtin_cifar10.verify(out)
    photos = builtin_cifar10.load(out)
    assert photos.test_images.shape == (20, 32, 32, 3) and photos.test_labels[:10].tolist() == list(range(10))
    source = tmp_path / "data" / "cifar10-jpeg" / "test" / "airplane" / "0001.jpg"
    with Image.open(source) as im:  # decoded exactly as the ImageFolder loader decodes the file
        assert torch.equal(photos.test_images[10], torch.from_numpy(np.array(im.convert("RGB"))))
    assert json.loads((out / "ResNetTiny_8_jpeg.json").read_text())["num_classes"] == 8
    images = (out / "cifar10_subset.npz").read_bytes()
    builtin_cifar10.build(tmp_path / "data" / "cifar10-jpeg", tmp_path / "ckpt", out=out, per_class=2)
    assert (out / "cifar10_subset.npz").read_bytes() == images  # the same arrays: kept, its SHA-256 too


def test_build_names_what_is_missing(tmp_path: Path) -> None:
    _jpeg_folder(tmp_path / "data", per_class=2)
    with pytest.raises(FileNotFoundError, match="train-source --dataset cifar10_jpeg --recipe compact"):
        builtin_cifar10.build(tmp_path / "data" / "cifar10-jpeg", tmp_path, out=tmp_path / "built", per_class=2)
    with pytest.raises(FileNotFoundError, match="fewer than 5"):
        builtin_cifar10.build(tmp_path / "data" / "cifar10-jpeg", tmp_path, out=tmp_path / "built", per_class=5)


def test_the_shipped_networks_are_retrained_from_the_full_training_split_only() -> None:
    from stamplib.models import recipes

    assert "cifar10_builtin" not in recipes.trainable_datasets()
    with pytest.raises(ValueError, match="--dataset cifar10_jpeg_8_2 --recipe compact"):
        recipes.train_source_for("cifar10_builtin_8_2", data_root="/nowhere")


def test_build_ships_the_networks_whose_pairs_are_trained(tmp_path: Path) -> None:
    _jpeg_folder(tmp_path / "data", per_class=2)
    _fake_checkpoints(tmp_path / "ckpt")
    for name in ("ResNetTiny_10_jpeg_seed3", "ResNetTiny_8_jpeg_seed2", "ResNetTiny_10_jpeg_seed4",
                 "ResNetTiny_8_jpeg_seed4"):  # seed 3 lacks its 8-class network, seed 2 its 10-class one
        for suffix in (".pt", ".json"):
            (tmp_path / "ckpt" / f"{name}{suffix}").unlink()
    out = tmp_path / "built"
    written = builtin_cifar10.build(tmp_path / "data" / "cifar10-jpeg", tmp_path / "ckpt", out=out, per_class=2)
    networks = {p.stem for p in written if p.suffix == ".pt"}
    assert networks == {"ResNetTiny_10_jpeg", "ResNetTiny_8_jpeg", "ResNetTiny_10_jpeg_seed1",
                        "ResNetTiny_8_jpeg_seed1"}
    with pytest.raises(PackageDataError, match="not shipped in .* yet: train it"):
        builtin_cifar10.checkpoint_file("ResNetTiny_10_jpeg_seed3", out)
