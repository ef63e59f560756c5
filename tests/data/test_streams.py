"""Stream composition (protocol.md §1, §3): counts, order, first-N outliers, ratios, class
splits, closed set, batching — on small files in the real formats under a temporary data root."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stamplib import data
from stamplib.data import loaders, outlier_c, streams
from stamplib.data.corruptions import corrupt
from stamplib.data.streams import StreamSpec, mix, outliers_for_ratio
from tests.data.files import indexed_pool, pool_index, write_cifar10, write_cifar_c, write_folder
from tests.support import uint8_images as images

SHARED_TARBALL = Path("/work/shared/data/cifar10-jpeg.tar.gz")


pytestmark = pytest.mark.usefixtures("fresh_streams")


def _boom(*args: object, **kwargs: object) -> None:
    raise AssertionError("heavy work started before the bad input was refused")

PROPERTY = settings(max_examples=40, deadline=None, database=None)


def test_ratio_to_count_mapping() -> None:
    """protocol.md §3.2 with 10,000 ID images; "33 %" is taken as exactly 1/3 → 5,000."""
    expected = {0.05: 526, 0.1: 1111, 0.2: 2500, 1 / 3: 5000, 0.5: 10_000}
    assert {r: outliers_for_ratio(10_000, r) for r in expected} == expected
    assert outliers_for_ratio(10_000, 0.33) == 4925  # the literal reading, not used
    assert outliers_for_ratio(8_000, 0.2) == 2000  # class splits: all 2,000 held-out images
    assert outliers_for_ratio(50_000, 0.2) == 12_500
    with pytest.raises(AssertionError):  # a stream's spec refuses the ratio first (the bad-input test below)
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


@PROPERTY
@given(
    num_id=st.integers(1, 400),
    ratio=st.sampled_from([0.0, 0.05, 0.1, 0.2, 1 / 3, 0.5, 0.75]),
    extra=st.integers(0, 50),
    seed=st.integers(0, 2**31 - 1),
    batch_size=st.integers(1, 130),
)
def test_stream_batches_cover_every_sample_once(num_id: int, ratio: float, extra: int, seed: int,
                                                batch_size: int) -> None:
    n_out = outliers_for_ratio(num_id, ratio)
    assert n_out == round(num_id * ratio / (1 - ratio))  # the ratio rule, protocol.md §3.2
    ids = torch.from_numpy(indexed_pool(num_id, 1))
    # a pool larger than needed: first N are used
    pool = torch.from_numpy(indexed_pool(n_out + extra, 1, offset=num_id))
    labels = torch.arange(num_id) % 7
    stream = mix(ids, labels, pool, n_out, seed=seed, stream=StreamSpec(batch_size=batch_size))

    xs, ys, outs = [], [], []
    for batch in stream.batches():
        assert 1 <= batch.x.shape[0] <= batch_size and batch.x.dtype == torch.float32
        xs.append(batch.x)
        ys.append(batch.y)
        outs.append(batch.is_outlier)
    assert len(xs) == len(stream) == math.ceil((num_id + n_out) / batch_size)
    x, y, is_out = torch.cat(xs), torch.cat(ys), torch.cat(outs)
    # Batches are the stream in order, as [0,1] floats of the stored uint8 images.
    assert torch.equal((x * 255).round().to(torch.uint8).permute(0, 2, 3, 1), stream.images)
    seen = pool_index(stream.images)
    assert sorted(seen) == list(range(num_id + n_out))  # every ID image and the first N outliers, once
    assert int(is_out.sum()) == n_out == stream.num_outliers
    assert torch.equal(is_out, y < 0)
    for i, label in zip(seen, y.tolist()):  # labels travel with their images
        assert label == (-1 if i >= num_id else i % 7)


@PROPERTY
@given(num_id=st.integers(1, 300), n_out=st.integers(0, 100), seed=st.integers(0, 2**31 - 1))
def test_mix_is_a_seeded_permutation(num_id: int, n_out: int, seed: int) -> None:
    ids, pool = torch.from_numpy(indexed_pool(num_id, 1)), torch.from_numpy(indexed_pool(n_out, 1, offset=num_id))
    labels = torch.zeros(num_id, dtype=torch.long)
    a = mix(ids, labels, pool, n_out, seed=seed)
    b = mix(ids, labels, pool, n_out, seed=seed)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    order = torch.randperm(num_id + n_out, generator=torch.Generator().manual_seed(seed))
    assert pool_index(a.images) == order.tolist()  # the order depends on the seed alone


@PROPERTY
@given(num_id=st.integers(1, 10_000), r1=st.floats(0.0, 0.95), r2=st.floats(0.0, 0.95))
def test_outlier_count_grows_with_the_ratio(num_id: int, r1: float, r2: float) -> None:
    lo, hi = sorted((r1, r2))
    assert 0 <= outliers_for_ratio(num_id, lo) <= outliers_for_ratio(num_id, hi)
    assert outliers_for_ratio(num_id, 0.0) == 0



# --------------------------------------------------------------------------- registered sets


def test_cifar10_c_uses_released_files_and_clean_for_none(tmp_path: Path) -> None:
    clean, _ = write_cifar10(tmp_path, n_test=40)
    released = write_cifar_c(tmp_path, per=40)
    np.savez(tmp_path / "noise_like.npz", images=indexed_pool(100))
    s = data.build_stream(data.CorruptionStreamSpec(
        "cifar10_c", f"npz:{tmp_path}/noise_like.npz", "fog", 5, 0.2, seed=0), data_root=tmp_path)
    assert s.images.shape[0] == 50 and s.num_outliers == 10
    id_rows = s.images[~s.is_outlier].numpy()
    block = released["fog"][160:200]
    assert sorted(map(bytes, id_rows)) == sorted(map(bytes, block))  # released images, not re-corrupted
    none = data.build_stream(data.CorruptionStreamSpec("cifar10_c", "none", "none"), data_root=tmp_path)
    assert sorted(map(bytes, none.images.numpy())) == sorted(map(bytes, clean)) and none.num_outliers == 0


def test_class_split_heldout_classes_from_the_same_corrupted_stream(tmp_path: Path) -> None:
    released = write_cifar_c(tmp_path, per=50)
    s = data.build_stream(data.CorruptionStreamSpec(
        "cifar10_c_8_2", "heldout_classes", "gaussian_noise", 5, 0.2, seed=1), data_root=tmp_path)
    labels_block = np.arange(50) % 10
    block = released["gaussian_noise"][200:250]
    assert int((s.labels >= 0).sum()) == 40 and s.num_outliers == 10  # 8:2
    assert s.labels.max() == 7 and (s.labels[s.is_outlier] == -1).all()
    assert sorted(map(bytes, s.images[s.is_outlier].numpy())) == sorted(map(bytes, block[labels_block >= 8]))
    for batch in s.batches():
        assert torch.equal(batch.is_outlier, batch.y < 0)
    assert data.num_classes("cifar10_c_8_2") == 8 and data.num_classes("cifar100_c_80_20") == 80
    with pytest.raises(ValueError, match="class-split"):
        data.build_stream(data.CorruptionStreamSpec(
            "cifar10_c", "heldout_classes", "gaussian_noise"), data_root=tmp_path)


def test_closed_set_stream(tmp_path: Path) -> None:
    write_cifar_c(tmp_path, per=30)
    s = data.build_stream(data.CorruptionStreamSpec("cifar10_c", "none", "fog", 5, 0.2, seed=0), data_root=tmp_path)
    assert s.num_outliers == 0 and s.images.shape[0] == 30 and (s.labels >= 0).all()


def test_source_train_known_classes_only(tmp_path: Path) -> None:
    write_cifar10(tmp_path, n_train_batch=10)
    x, y = data.source_train("cifar10_c_8_2", tmp_path)
    assert x.shape == (40, 32, 32, 3) and y.max() == 7 and len(y) == 40
    x, y = data.source_train("cifar10", tmp_path)
    assert len(y) == 50
    with pytest.raises(FileNotFoundError, match="ImageNet/val"):  # ImageNet-C's source: the val split
        data.source_train("imagenet_c", tmp_path)


def test_clean_source_corrupted_on_the_fly_equals_generated_set(tmp_path: Path) -> None:
    """svhn: without a stored SVHN-C the first N clean images are corrupted with the
    generation seed — the same bytes as rows 0..N−1 of the generated file."""
    import scipy.io

    write_cifar10(tmp_path, n_test=40)
    pool = images(30, seed=7)
    (tmp_path / "svhn").mkdir()
    scipy.io.savemat(tmp_path / "svhn" / "test_32x32.mat",
                     {"X": pool.transpose(1, 2, 3, 0), "y": np.ones((30, 1), np.uint8)})
    fly = data.build_stream(data.CorruptionStreamSpec(
        "cifar10", "svhn", "contrast", 5, 0.2, seed=0), data_root=tmp_path)
    outliers = fly.images[fly.is_outlier].numpy()
    expected = corrupt(pool[:10], "contrast", 5, seed=outlier_c.GENERATION_SEED)
    assert sorted(map(bytes, outliers)) == sorted(map(bytes, expected))
    outlier_c.generate("svhn", ["contrast"], (5,), data_root=tmp_path, progress=False)
    data.build_stream.cache_clear()
    cached = data.build_stream(data.CorruptionStreamSpec(
        "cifar10", "svhn", "contrast", 5, 0.2, seed=0), data_root=tmp_path)
    assert torch.equal(cached.images, fly.images)


def test_outliers_resized_to_id_size_after_corruption(tmp_path: Path) -> None:
    write_cifar10(tmp_path, n_test=40)
    pool = images(12, size=64, seed=3)
    write_folder(tmp_path / "Tiny-ImageNet-C" / "fog" / "5", {"n1": list(pool[:6]), "n2": list(pool[6:])})
    s = data.build_stream(data.CorruptionStreamSpec("cifar10", "tiny", "fog", 5, 0.2, seed=0), data_root=tmp_path)
    perm = np.load(tmp_path / "Tiny-ImageNet-C" / "permutation-12.npy")
    expected = loaders.resize_images(torch.from_numpy(pool[perm[:10]]), 32).numpy()
    assert s.images.shape[1:] == (32, 32, 3)
    assert sorted(map(bytes, s.images[s.is_outlier].numpy())) == sorted(map(bytes, expected))


def test_scheme_sources_for_id_and_outliers(tmp_path: Path) -> None:
    np.savez(tmp_path / "id.npz", images=images(20), labels=np.arange(20) % 4)
    write_folder(tmp_path / "out", {"a": list(indexed_pool(6)), "b": list(indexed_pool(8)[6:])})
    s = data.build_stream(data.CorruptionStreamSpec(
        f"npz:{tmp_path}/id.npz", f"folder:{tmp_path}/out", "none", 5, 0.2, seed=2))
    assert data.num_classes(f"npz:{tmp_path}/id.npz") == 4
    assert sorted(pool_index(s.images[s.is_outlier])) == [0, 1, 2, 3, 4]  # first N in folder order
    # A template names already corrupted copies; they are used as they are.
    (tmp_path / "c" / "fog").mkdir(parents=True)
    np.savez(tmp_path / "c" / "fog" / "5.npz", images=indexed_pool(9))
    s = data.build_stream(data.CorruptionStreamSpec(
        f"npz:{tmp_path}/id.npz", f"npz:{tmp_path}/c/{{corruption}}/{{severity}}.npz",
                          "fog", 5, 0.2, seed=2))
    assert sorted(pool_index(s.images[s.is_outlier])) == [0, 1, 2, 3, 4]


def test_digits_unchanged_and_heldout_alias() -> None:
    a = data.build_stream(data.CorruptionStreamSpec("digits", "digits_heldout", "none", max_id=100))
    b = data.build_stream(data.CorruptionStreamSpec("digits", "heldout_classes", "none", max_id=100))
    assert torch.equal(a.images, b.images) and a.num_outliers == 25
    assert data.build_stream(data.CorruptionStreamSpec("digits", "noise", "none", max_id=100)).num_outliers == 25


def test_dataset_status(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    status = {name: (found, where) for name, found, where in data.dataset_status(tmp_path)}
    assert status["digits"][0] and status["cifar10"][0] and status["cifar10_8_2"][0]
    assert not status["cifar10_c"][0] and "CIFAR-10-C.tar" in status["cifar10_c"][1]
    assert not status["svhn"][0] and "test_32x32.mat" in status["svhn"][1]
    assert set(data.DATASETS) | set(data.OUTLIER_SETS) <= set(status)


def test_registries_are_lazy(tmp_path: Path) -> None:
    """Looking every entry up reads nothing: an empty data root is fine until images are used."""
    for name in data.DATASETS:
        assert data.dataset(name).num_classes > 0 and data.hyperparameter_set_of(name)
    with pytest.raises(loaders.DatasetNotFound, match="CIFAR-10-C.tar"):
        data.build_stream(data.CorruptionStreamSpec("cifar10_c", "none", "fog"), data_root=tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_TARBALL.is_file(), reason="shared CIFAR-10 JPEG tarball not on this machine")
def test_real_cifar10_jpeg(tmp_path: Path) -> None:
    shutil.copy(SHARED_TARBALL, tmp_path / SHARED_TARBALL.name)
    s = data.build_stream(data.CorruptionStreamSpec("cifar10_jpeg_8_2", "heldout_classes", "none"), data_root=tmp_path)
    assert s.images.shape == (10_000, 32, 32, 3) and s.num_outliers == 2000
    assert torch.bincount(s.labels[s.labels >= 0]).tolist() == [1000] * 8
    x, y = data.source_train("cifar10_jpeg_8_2", tmp_path)
    assert x.shape == (40_000, 32, 32, 3) and y.max() == 7


def test_image_folder_pools_are_dealt_out_class_by_class():
    from stamplib.data import interleave_classes

    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    order = interleave_classes(labels)
    assert labels[order].tolist() == [0, 1, 2, 0, 1, 2, 0, 2, 2]
    assert sorted(order.tolist()) == list(range(9))  # a permutation
    assert order[labels[order] == 2].tolist() == [5, 6, 7, 8]  # file order kept within a class


# --------------------------------------------------------------------------- bad input


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
        (("digits", "noise", "fog", 5, 0.2, 0, 0), r"max_id must be a positive integer \(or None"),
        (("digits", "noise", "fog", 5, 0.2, 0, -3), r"max_id must be a positive integer \(or None"),
    ],
)
def test_a_streams_spec_refuses_before_reading_anything(monkeypatch: pytest.MonkeyPatch, args: tuple,
                                                        match: str) -> None:
    monkeypatch.setattr(streams, "dataset", _boom)  # any file or image access goes through it
    with pytest.raises(ValueError, match=match):
        data.CorruptionStreamSpec(*args)
    for size in (0, -64):  # the stream's own options are checked where the StreamSpec is built
        with pytest.raises(ValueError, match="batch_size must be a positive integer"):
            StreamSpec(batch_size=size)


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



# --------------------------------------------------------------------------- harder streams


def _switches(labels: torch.Tensor) -> int:
    known = labels[labels >= 0]
    return int((known[1:] != known[:-1]).sum())


def _order_labels(id_labels: torch.Tensor, n_out: int, **options: object) -> torch.Tensor:
    order = streams.stream_order(id_labels, n_out, seed=5, stream=StreamSpec(**options))
    assert sorted(order.tolist()) == list(range(id_labels.numel() + n_out))  # a permutation
    return torch.cat([id_labels, torch.full((n_out,), -1)])[order]


def test_default_order_is_todays_uniform_shuffle_bit_for_bit() -> None:
    labels = torch.arange(300) % 10
    expected = torch.randperm(375, generator=torch.Generator().manual_seed(5))
    assert torch.equal(streams.stream_order(labels, 75, seed=5), expected)


def test_dirichlet_order_gives_runs_of_one_class_and_keeps_the_outlier_share() -> None:
    id_labels = torch.arange(2000) % 10
    iid = _order_labels(id_labels, 500)
    shifted = _order_labels(id_labels, 500, dirichlet=0.01)
    mild = _order_labels(id_labels, 500, dirichlet=1000.0)
    for s in (shifted, mild):
        assert torch.equal(s[s >= 0].bincount(), id_labels.bincount())  # every sample once
    # i.i.d.: ~90 % of neighbours differ; δ = 0.01: about one class change per slot
    assert _switches(iid) > 1700 and _switches(shifted) < 60
    # a large δ spreads every class evenly over the ten slots (in blocks within a slot, as in
    # RoTTA's sampler): every tenth of the stream holds every class
    assert all(chunk.unique().numel() == 10 for chunk in mild[mild >= 0].view(10, 200))
    # the labels' distribution drifts: the first tenth of a δ = 0.01 stream holds few classes
    head = shifted[shifted >= 0][:200]
    assert head.unique().numel() <= 3
    # outliers stay spread uniformly: every batch of 64 holds some, as in the i.i.d. stream
    per_batch = (shifted < 0).float().view(-1, 100).mean(1)  # 25 chunks of 100
    assert per_batch.min() > 0.05 and per_batch.max() < 0.4


def test_outlier_bursts_are_runs_of_the_given_length_between_id_samples() -> None:
    id_labels = torch.arange(1000) % 10
    labels = _order_labels(id_labels, 250, outlier_burst=64)
    flags = (labels < 0).int().tolist()
    import itertools

    runs = [len(list(g)) for value, g in itertools.groupby(flags) if value]
    assert runs == [64, 64, 64, 58]
    assert _switches(labels) > 800  # the ID order itself stays i.i.d.
    with pytest.raises(ValueError, match="longer outlier_burst"):
        streams.stream_order(torch.arange(3), 10, seed=0, stream=StreamSpec(outlier_burst=1))


@pytest.mark.parametrize("order", [dict(dirichlet=0.1), dict(outlier_burst=8), dict(label_shift="sorted"),
                                   dict(label_shift="imbalance:10+sorted")])
def test_the_mixed_schedule_refuses_an_order_its_shuffle_would_undo(order: dict) -> None:
    """interleave shuffles every corruption's samples into one stream: an order would be dropped
    without a word, so the pair is one line naming both, whichever way the spec is built."""
    ((name, value),) = order.items()
    for build in (lambda: StreamSpec(schedule="mixed", **order),
                  lambda: StreamSpec(**order).with_(schedule="mixed"),
                  lambda: StreamSpec.from_key_fields(mixed_domains=True, **order),
                  lambda: StreamSpec.parse({"schedule": "mixed", name: str(value)})):
        with pytest.raises(ValueError) as refused:
            build()
        message = str(refused.value)
        assert "\n" not in message and "schedule='mixed'" in message and f"{name}={value!r}" in message, message
    for schedule in ("episodic", "continual", "gradual"):  # the other schedules keep each stream's order
        assert StreamSpec(schedule=schedule, **order).schedule == schedule


def test_the_mixed_schedule_keeps_what_its_shuffle_does_not_undo() -> None:
    """The long tail is which samples the stream holds, and the batch size how it is cut: both
    survive the shuffle; the options that order the samples are exactly the three refused above."""
    for kept in (dict(label_shift="imbalance:10"), dict(batch_size=16), dict(dirichlet=0.0, outlier_burst=0)):
        assert StreamSpec(schedule="mixed", **kept).schedule == "mixed"
    ordering = {f.name for f in dataclasses.fields(StreamSpec) if f.metadata["orders"] is not None}
    assert ordering == {"dirichlet", "label_shift", "outlier_burst"}


def test_harder_options_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="dirichlet is the concentration"):
        StreamSpec(dirichlet=-1.0)
    with pytest.raises(ValueError, match="outlier_burst"):
        StreamSpec(outlier_burst=2.5)
    with pytest.raises(ValueError, match="stream is a StreamSpec"):
        data.CorruptionStreamSpec("digits", "noise", "gaussian_noise", stream={"dirichlet": 0.1})
    with pytest.raises(TypeError, match="build_stream takes a CorruptionStreamSpec"):
        data.build_stream(("digits", "noise", "gaussian_noise"))


def test_build_stream_serves_the_harder_orders_on_the_builtin_benchmark() -> None:
    plain = data.build_stream(data.CorruptionStreamSpec("digits", "noise", "gaussian_noise", max_id=256, seed=2))
    shifted = data.build_stream(data.CorruptionStreamSpec("digits", "noise", "gaussian_noise", max_id=256, seed=2,
                                stream=StreamSpec(dirichlet=0.05)))
    bursty = data.build_stream(data.CorruptionStreamSpec(
        "digits", "noise", "gaussian_noise", max_id=256, seed=2, stream=StreamSpec(outlier_burst=32)))
    for s in (shifted, bursty):
        assert s.num_outliers == plain.num_outliers == 64
        assert torch.equal(s.labels.sort().values, plain.labels.sort().values)
    assert _switches(shifted.labels) < _switches(plain.labels) / 3
    assert bursty.is_outlier.int().diff().ne(0).sum() <= 4  # two runs of 32: at most 4 edges
