"""The ImageNet validation split as EATA's and OWTTT's source data on ImageNet-C (baselines.md
§5, §9): folder order and labels, the authors' Resize((256, 256)) + CenterCrop(224), layout
errors, and ``stamplib run --dataset imagenet_c`` end to end on a made-up ImageNet folder."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from stamplib import data, methods, models
from stamplib.data.imagenet import load_imagenet_val
from stamplib.data.loaders import DatasetFormatError, DatasetNotFound


def _image(seed: int, size: tuple[int, int], mode: str = "RGB") -> Image.Image:
    rng = np.random.default_rng(seed)
    w, h = size
    arr = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    return Image.fromarray(arr).convert(mode)


def _encoded(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def wnid(c: int) -> str:
    return f"n{c:08d}"


def make_val(root: Path, classes: int, per_class: int) -> Path:
    """``root/ImageNet/val/<wnid>/*`` with images of several sizes, modes and formats, and a
    non-image file that the loader must skip."""
    folder = root / "ImageNet" / "val"
    variants = [  # (size, mode, format, suffix): landscape, portrait, tiny, grayscale, CMYK
        ((300, 200), "RGB", "JPEG", ".JPEG"),
        ((180, 260), "RGB", "PNG", ".png"),
        ((12, 9), "RGB", "JPEG", ".JPEG"),
        ((256, 256), "L", "PNG", ".png"),
        ((240, 230), "CMYK", "JPEG", ".JPEG"),
    ]
    k = 0
    for c in range(classes):
        (folder / wnid(c)).mkdir(parents=True)
        for _ in range(per_class):
            size, mode, fmt, suffix = variants[k % len(variants)]
            (folder / wnid(c) / f"ILSVRC2012_val_{k:08d}{suffix}").write_bytes(_encoded(_image(k, size, mode), fmt))
            k += 1
        (folder / wnid(c) / "notes.txt").write_text("not an image")
    return folder


def torchvision_reference(folder: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """The authors' pipeline, run by torchvision itself: ImageFolder + Resize((256, 256)) +
    CenterCrop(224), as uint8 NHWC."""
    from torchvision import datasets, transforms

    transform = transforms.Compose(
        [transforms.Resize((256, 256)), transforms.CenterCrop(224), transforms.PILToTensor()]
    )
    dataset = datasets.ImageFolder(str(folder), transform=transform)
    images = torch.stack([dataset[i][0] for i in range(len(dataset))]).permute(0, 2, 3, 1)
    return images.contiguous(), torch.tensor(dataset.targets)


def test_val_split_is_torchvisions_imagefolder_with_the_authors_transform(tmp_path):
    folder = make_val(tmp_path, classes=3, per_class=4)
    val = load_imagenet_val(tmp_path, expect_classes=3)
    images, labels = torchvision_reference(folder)
    assert val.images.shape == (12, 224, 224, 3) and val.images.dtype == torch.uint8
    assert torch.equal(val.labels, labels) and val.labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert torch.equal(val.images, images)
    assert val.classes == tuple(wnid(c) for c in range(3))


def test_the_resize_is_a_square_not_the_shorter_side(tmp_path):
    """A 512×256 image whose left quarter is red: squeezed to 256×256, red fills columns 0–63,
    i.e. 0–47 of the crop. ``Resize(256)`` (shorter side) would crop the middle of the wide
    image and show no red at all."""
    folder = tmp_path / "ImageNet" / "val" / wnid(0)
    folder.mkdir(parents=True)
    arr = np.zeros((256, 512, 3), np.uint8)
    arr[:, :128, 0] = 255
    (folder / "a.png").write_bytes(_encoded(Image.fromarray(arr), "PNG"))
    image = load_imagenet_val(tmp_path, expect_classes=1).images[0]
    assert (image[:, :40] == torch.tensor([255, 0, 0], dtype=torch.uint8)).all()
    assert image[:, 56:].max() == 0


def test_limit_takes_the_first_images_in_folder_order(tmp_path):
    make_val(tmp_path, classes=3, per_class=4)
    full = load_imagenet_val(tmp_path, expect_classes=3)
    first = load_imagenet_val(tmp_path, expect_classes=3, limit=6)
    assert torch.equal(first.images, full.images[:6]) and first.labels.tolist() == [0] * 4 + [1] * 2


def test_layout_errors_say_what_to_do(tmp_path):
    with pytest.raises(DatasetNotFound, match="image-net.org"):
        load_imagenet_val(tmp_path)
    make_val(tmp_path, classes=3, per_class=1)
    with pytest.raises(DatasetFormatError, match="3 class folders, expected 1000"):
        load_imagenet_val(tmp_path)
    flat = tmp_path / "flat"
    (flat / "ImageNet" / "val").mkdir(parents=True)
    (flat / "ImageNet" / "val" / "ILSVRC2012_val_00000001.JPEG").write_bytes(
        _encoded(_image(0, (20, 20)), "JPEG")
    )
    with pytest.raises(DatasetFormatError, match="wnid folders"):
        load_imagenet_val(flat)


# -- stamplib run --dataset imagenet_c, end to end ------------------------------------------------------
class ImageNetStandIn(nn.Module):
    """A 1000-class network small enough for a unit test: one strided conv, BN, pooled
    features, a linear ``fc`` (OWTTT's encoder is everything before it)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 16, stride=16)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


@pytest.fixture(scope="module")
def fake_imagenet(tmp_path_factory) -> Path:
    """1,000 wnid folders (the loaders insist on all of them, as a partial copy would shift the
    class indices): one small image per class in ImageNet/val, one 224×224 image per class in
    ImageNet-C/gaussian_noise/5."""
    root = tmp_path_factory.mktemp("imagenet")
    val_bytes = [_encoded(_image(s, (24, 18)), "JPEG") for s in range(16)]
    c_bytes = [_encoded(_image(100 + s, (224, 224)), "JPEG") for s in range(16)]
    for c in range(1000):
        for sub, payload in (("ImageNet/val", val_bytes), ("ImageNet-C/gaussian_noise/5", c_bytes)):
            folder = root / sub / wnid(c)
            folder.mkdir(parents=True)
            (folder / f"ILSVRC2012_val_{c:08d}.JPEG").write_bytes(payload[c % 16])
    return root


def _stand_in() -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return models.InputNormalization(ImageNetStandIn(), models.IMAGENET_MEAN, models.IMAGENET_STD).eval()


def _run_cli(monkeypatch, root: Path, results: Path, method: str, *sets: str) -> None:
    from stamplib import cli

    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(root))
    # ResNet-50's weights cannot be downloaded here: the stand-in takes its place.
    monkeypatch.setattr(models, "source_model", lambda dataset, progress=True, network=0: _stand_in())
    argv = ["run", "--method", method, "--dataset", "imagenet_c", "--outlier-set", "none",
            "--corruptions", "gaussian_noise", "--profile", "smoke", "--results", str(results)]
    for item in sets:
        argv += ["--set", item]
    assert cli.main(argv) == 0
    (record,) = [p for p in results.glob("*.json")]
    assert f'"method": "{method}"' in record.read_text()


def test_cli_eata_on_imagenet_c_computes_fisher_from_the_val_split(fake_imagenet, tmp_path, monkeypatch):
    from stamplib.methods import eata

    seen = {}
    real = eata.fisher_information

    def spy(model, params, images, batch_size, generator):
        seen["images"] = images.clone()
        seen["fisher"] = real(model, params, images, batch_size, generator)
        return seen["fisher"]

    monkeypatch.setattr(eata, "fisher_information", spy)
    _run_cli(monkeypatch, fake_imagenet, tmp_path / "results", "eata", "fisher_samples=300")
    # EATA's first 300 source images by index: classes 0..299 of ImageNet/val, one image each.
    reference = load_imagenet_val(fake_imagenet)
    assert torch.equal(seen["images"], reference.images[:300])
    folder = fake_imagenet / "ImageNet" / "val"
    first = Image.open(next((folder / wnid(0)).iterdir())).convert("RGB")
    from torchvision import transforms

    expected = transforms.CenterCrop(224)(transforms.Resize((256, 256))(first))
    assert torch.equal(seen["images"][0], torch.from_numpy(np.array(expected)))
    assert all(torch.isfinite(f).all() for f in seen["fisher"]) and any(f.sum() > 0 for f in seen["fisher"])


def test_cli_owttt_on_imagenet_c_takes_prototypes_from_the_val_split(fake_imagenet, tmp_path, monkeypatch):
    from stamplib.methods.owttt import OWTTT

    seen = {}
    real = OWTTT._compute_source_stats

    def spy(self):
        seen["source"] = self.source_data
        return real(self)

    monkeypatch.setattr(OWTTT, "_compute_source_stats", spy)
    _run_cli(monkeypatch, fake_imagenet, tmp_path / "results", "owttt")
    source = seen["source"]
    assert source.images.shape == (1000, 224, 224, 3)  # every val image: one per class here
    assert source.labels.tolist() == list(range(1000))


def test_source_train_of_imagenet_c_is_the_val_split(fake_imagenet):
    images, labels = data.source_train("imagenet_c", fake_imagenet, limit=5)
    assert images.shape == (5, 224, 224, 3) and labels.tolist() == [0, 1, 2, 3, 4]
    assert methods.method_class("eata").source_images_needed(methods.resolve_config("eata", "imagenet_c")) == 2000
    assert methods.method_class("owttt").source_images_needed(methods.resolve_config("owttt", "imagenet_c")) is None
