"""The ImageNet validation split: the clean source data of EATA's Fisher information and
OWTTT's source statistics on ImageNet-C (baselines.md §5, §9).

Layout (torchvision's ``ImageNet(root, split="val")`` folder, which the authors' loader reads
from ``<DATA_DIR>/ImageNet``)::

    <data_root>/ImageNet/val/<wnid>/*.JPEG      1,000 wnid folders × 50 images

Order: sorted wnid folders, sorted file names (torchvision's ImageFolder), so the class index
is the sorted-wnid index, the same as ImageNet-C's, and "the first 2,000 images" are the first
40 classes. Preprocessing as the authors' ``get_transform`` gives it for this data set:
``Resize((256, 256))`` — a 256×256 square, not the shorter side — then ``CenterCrop(224)``; the
ImageNet mean/std normalisation lives in the model wrapper here (``InputNormalization``).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from stamplib import paths
from stamplib.data.loaders import DatasetFormatError, DatasetNotFound, ImageSet, list_image_folder

RESIZE = 256  # the authors resize to RESIZE × RESIZE
CROP = 224
NUM_CLASSES = 1000


def imagenet_val_folder(data_root: str | os.PathLike) -> Path:
    return paths.given_data_root(data_root, "ImageNet's validation split") / "ImageNet" / "val"


def preprocess(image: Image.Image) -> np.ndarray:
    """``Resize((256, 256))`` (PIL bilinear, as torchvision does on PIL images), then
    ``CenterCrop(224)`` with torchvision's rounding; uint8 224×224×3."""
    image = image.convert("RGB").resize((RESIZE, RESIZE), Image.BILINEAR)
    top = int(round((RESIZE - CROP) / 2.0))
    left = int(round((RESIZE - CROP) / 2.0))
    return np.asarray(image.crop((left, top, left + CROP, top + CROP)), dtype=np.uint8)


def _decode(path: Path) -> np.ndarray:
    try:
        with Image.open(path) as im:
            return preprocess(im)
    except (OSError, SyntaxError) as exc:
        raise DatasetFormatError(f"{path} cannot be decoded ({exc}); the file is truncated or not an image") from exc


def load_imagenet_val(
    data_root: str | os.PathLike,
    *,
    limit: int | None = None,
    expect_classes: int | None = NUM_CLASSES,
    workers: int | None = None,
) -> ImageSet:
    """The first ``limit`` (default: all 50,000) ImageNet validation images in folder order,
    preprocessed as the authors do, with their sorted-wnid labels. Not cached: 50,000 images
    are 7.5 GB as uint8, and EATA needs only the first 2,000."""
    folder = imagenet_val_folder(data_root)
    if not folder.is_dir():
        raise DatasetNotFound(
            f"{folder} is missing: EATA and OWTTT on ImageNet-C compute their source statistics from "
            "the ImageNet validation images, expected as ImageNet/val/<wnid>/*.JPEG under the data "
            "root. ImageNet cannot be downloaded automatically: get ILSVRC2012_img_val.tar and the "
            "devkit from image-net.org and let torchvision.datasets.ImageNet(<data_root>/ImageNet, "
            "split='val') sort the images into wnid folders"
        )
    files, labels, classes = list_image_folder(folder)
    if classes == [""]:
        raise DatasetFormatError(
            f"{folder} holds its images directly, not in wnid folders; sort them into "
            "ImageNet/val/<wnid>/ (torchvision.datasets.ImageNet(<data_root>/ImageNet, split='val') "
            "does it from the devkit)"
        )
    if expect_classes is not None and len(classes) != expect_classes:
        raise DatasetFormatError(
            f"{folder} has {len(classes)} class folders, expected {expect_classes}: a partial copy "
            "would shift every class index; copy or extract the validation images again"
        )
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be a positive number of images or None (all), got {limit!r}")
        files, labels = files[:limit], labels[:limit]
    images = np.empty((len(files), CROP, CROP, 3), np.uint8)

    def put(i: int) -> None:
        images[i] = _decode(files[i])

    with ThreadPoolExecutor(workers or min(4, os.cpu_count() or 1)) as pool:
        list(pool.map(put, range(len(files))))
    return ImageSet(torch.from_numpy(images), torch.tensor(labels, dtype=torch.int64), tuple(classes))
