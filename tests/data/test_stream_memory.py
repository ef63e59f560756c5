"""Bounded host memory (issue 27): the stream cache keeps at most its byte budget, a cell holds
one stream at a time when streams do not fit, the stream gather makes no concatenated copy,
and decoded ImageNet-C corruptions are memory-mapped from an atomically written disk copy."""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import stamplib
from stamplib import data
from stamplib.data import loaders, stream_cache, streams
from stamplib.evaluation import runner
from stamplib.evaluation.spec import RunSpec
from tests.data.files import write_folder
from tests.support import context_for
from tests.support import uint8_images as images

pytestmark = pytest.mark.usefixtures("fresh_streams")

CORRUPTIONS = ("gaussian_noise", "fog", "contrast", "snow")


@pytest.fixture
def budget() -> Iterator[None]:
    """Tests set their own budget; the next test gets the default back."""
    yield
    data.set_stream_cache_budget(None)


def _released_copies(root: Path, n: int = 40) -> str:
    """An ID data set of already corrupted 32-px copies, one .npz per corruption (a fake
    CIFAR-10-C), as an ``npz:`` template."""
    for k, c in enumerate(CORRUPTIONS):
        (root / c).mkdir(parents=True)
        np.savez(root / c / "5.npz", images=images(n, seed=k), labels=np.arange(n) % 4)
    return f"npz:{root}/{{corruption}}/{{severity}}.npz"


def _build(name: str, corruption: str) -> streams.Stream:
    return data.build_stream(data.CorruptionStreamSpec(name, "noise", corruption, 5, 0.2, seed=0))


def test_the_stream_cache_keeps_at_most_its_budget_least_recently_used_first(tmp_path: Path, budget: None) -> None:
    name = _released_copies(tmp_path)
    size = stream_cache.stream_bytes(_build(name, "fog"))
    assert size == 50 * 32 * 32 * 3 + 50 * 8  # 40 ID images, 10 outliers, their labels
    data.set_stream_cache_budget(int(2.5 * size))
    cache = data.build_stream.cache
    built = {c: _build(name, c) for c in CORRUPTIONS}
    assert len(cache) == 2 and cache.nbytes <= 2.5 * size
    assert _build(name, "snow") is built["snow"] and _build(name, "contrast") is built["contrast"]
    again = _build(name, "gaussian_noise")  # dropped, so built again: a new object, the same stream
    assert again is not built["gaussian_noise"] and torch.equal(again.images, built["gaussian_noise"].images)
    # snow was used before contrast, so it made room
    assert cache.nbytes <= 2.5 * size and _build(name, "snow") is not built["snow"]

    data.set_stream_cache_budget(size - 1)  # smaller than one stream: everything goes, nothing is kept
    assert len(cache) == 0
    assert _build(name, "fog") is not _build(name, "fog")


def test_the_budget_comes_from_the_setting_then_the_environment_then_the_default(
        monkeypatch: pytest.MonkeyPatch, budget: None) -> None:
    monkeypatch.delenv(stream_cache.STREAM_CACHE_ENV, raising=False)
    assert data.stream_cache_budget() == stream_cache.DEFAULT_STREAM_CACHE_BYTES == 4 * 2**30
    monkeypatch.setenv(stream_cache.STREAM_CACHE_ENV, "512M")
    assert data.stream_cache_budget() == 512 * 2**20
    data.set_stream_cache_budget("1.5K")
    assert data.stream_cache_budget() == 1536
    data.set_stream_cache_budget(None)
    monkeypatch.setenv(stream_cache.STREAM_CACHE_ENV, "lots")
    with pytest.raises(ValueError, match=r"STAMPLIB_STREAM_CACHE.*512M"):
        data.stream_cache_budget()
    monkeypatch.delenv(stream_cache.STREAM_CACHE_ENV)
    assert [stream_cache.parse_bytes(v) for v in ("0", 7, "2g", "3 GiB", "10MB")] == [
        0,
        7,
        2 * 2**30,
        3 * 2**30,
        10 * 2**20,
    ]
    for bad in (-1, "1.5X", True, ""):
        with pytest.raises(ValueError, match="byte count"):
            stream_cache.parse_bytes(bad)


def test_a_cell_holds_one_stream_at_a_time_when_streams_do_not_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: None, digits_model
) -> None:
    """With a budget too small for any stream, the previous corruption's stream is freed before
    the next one is built."""
    data.set_stream_cache_budget(0)
    alive: list[weakref.ref] = []
    real = runner.build_stream

    def build_stream(spec: RunSpec, corruption: str, **options) -> streams.Stream:
        assert all(ref() is None for ref in alive), "an earlier corruption's stream is still alive"
        stream = real(spec, corruption, **options)
        alive.append(weakref.ref(stream))
        return stream

    monkeypatch.setattr(runner, "build_stream", build_stream)
    spec = RunSpec(method="stamp", corruptions=("gaussian_noise", "fog", "contrast"), profile="smoke")
    record = stamplib.run(spec, context_for(tmp_path))
    assert len(alive) == 3 and all(ref() is None for ref in alive) and len(record.per_corruption) == 3


def test_the_gather_equals_concatenating_then_indexing() -> None:
    g = torch.Generator().manual_seed(0)
    parts = [torch.randint(0, 256, (n, 4, 4, 3), dtype=torch.uint8, generator=g) for n in (2500, 700)]
    order = torch.randperm(3200, generator=g)
    assert torch.equal(streams.gather_rows(parts, order), torch.cat(parts)[order])


def _fake_imagenet_c(root: Path) -> Path:
    folder = root / "ImageNet-C" / "fog" / "5"
    write_folder(folder, {"n01": list(images(3, 224, seed=1)), "n02": list(images(2, 256, seed=2))})
    return folder


def test_imagenet_c_is_decoded_once_into_a_memory_mapped_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _fake_imagenet_c(tmp_path)
    plain = loaders.load_imagenet_c("fog", 5, tmp_path, expect_classes=2, cache=False)
    first = loaders.load_imagenet_c("fog", 5, tmp_path, expect_classes=2)
    [copy] = folder.parent.glob("5.stamplib-c224-*.npy")
    assert isinstance(np.load(copy, mmap_mode="r"), np.memmap) and not list(folder.parent.glob(".tmp-*"))
    assert torch.equal(first.images, plain.images) and first.labels.tolist() == plain.labels.tolist() == [0, 0, 0, 1, 1]

    def no_decoding(*args: object) -> None:
        raise AssertionError("decoded again although the decoded copy is on disk")

    monkeypatch.setattr(loaders, "_decode", no_decoding)
    (folder.parent / f".tmp-999999-{copy.name}").write_bytes(b"what a killed writer leaves")
    second = loaders.load_imagenet_c("fog", 5, tmp_path, expect_classes=2, limit=4)
    assert torch.equal(second.images, plain.images[:4])
    monkeypatch.undo()

    changed = folder / "n02" / "0000.png"
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 10**9))
    third = loaders.load_imagenet_c("fog", 5, tmp_path, expect_classes=2)  # a changed folder: decoded again
    [newer] = folder.parent.glob("5.stamplib-c224-*.npy")
    assert newer != copy and torch.equal(third.images, plain.images)  # and the stale copy is gone


def test_a_damaged_decoded_copy_is_decoded_again(tmp_path: Path) -> None:
    folder = _fake_imagenet_c(tmp_path)
    reference = loaders.load_imagenet_c("fog", 5, tmp_path, expect_classes=2, cache=False)
    loaders.load_imagenet_c("fog", 5, tmp_path, expect_classes=2)  # mapped, and unmapped before the damage
    [copy] = folder.parent.glob("5.stamplib-c224-*.npy")
    copy.write_bytes(copy.read_bytes()[:1000])  # in place, as no writer of ours ever does
    again = loaders.load_imagenet_c("fog", 5, tmp_path, expect_classes=2)
    assert torch.equal(again.images, reference.images) and copy.stat().st_size > 1000
