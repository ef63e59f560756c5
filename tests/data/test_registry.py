"""The data set registry: one entry per data set, read by every layer above it. A new data set
is one registered entry plus its loader: the test below adds one and runs it end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import stamplib
from stamplib import data, methods, models
from stamplib.data import loaders
from stamplib.evaluation.spec import RunSpec
from stamplib.experiments import registry
from stamplib.report import paper
from tests.support import context_for
from tests.support import uint8_images as images


@pytest.fixture
def toy_dataset(tmp_path: Path):
    """A fake data set, registered as a newcomer would: 5 classes of random 32×32 images, the
    last one held out (so ``heldout_classes`` works), a source network saved as a file."""
    g = np.random.default_rng(0)
    test = torch.from_numpy(images(120, seed=1)), torch.from_numpy(g.integers(0, 5, 120))
    train = torch.from_numpy(images(60, seed=2)), torch.arange(60) % 5
    calls: list[str] = []

    def load_test(root: Path):  # a loader reads its files under the data root
        calls.append(f"test {root}")
        return test

    weights = tmp_path / "toy-source.pt"
    torch.save(models.create("resnet_cifar_tiny", 4).state_dict(), weights)
    full = data.Dataset(
        "toy_full", classes=5, hyperparameter_set="cifar10_c", test=load_test, train=lambda root, limit=None: train
    )
    entry = data.class_split(
        full, 4, "toy", architecture="resnet_cifar_tiny", checkpoint=str(weights), paper_name="cifar10_c_8_2"
    )
    data.register_dataset(entry)
    try:
        yield entry, calls
    finally:
        data.DATASETS.pop("toy")


def test_a_new_dataset_is_one_registry_entry_and_runs_end_to_end(toy_dataset, tmp_path: Path) -> None:
    entry, calls = toy_dataset
    assert not calls  # registering reads nothing
    # every layer above knows it now: names, hyperparameter set, source model, streams, runs, plans, reports
    data.check_names("toy", "heldout_classes", ("fog",))
    assert data.hyperparameter_set_of("toy") == "cifar10_c" and data.num_classes("toy") == 4
    assert models.source_model("toy", progress=False).fc.out_features == 4
    stream = data.build_stream(data.CorruptionStreamSpec("toy", "heldout_classes", "contrast", max_id=40))
    assert stream.num_outliers == 10 and int(stream.labels.max()) == 3 and calls
    for method in ("stamp", "eata"):  # EATA also reads the source-training images
        spec = RunSpec(
            method=method,
            dataset="toy",
            outlier_set="heldout_classes",
            corruptions=("none", "gaussian_noise"),
            profile="smoke",
        )
        record = stamplib.run(spec, context_for(tmp_path / "results"))
        assert all(0 <= m.h <= 100 and m.n_outliers > 0 for m in record.per_corruption.values())
    plan = registry.plan("04_table3_class_split", datasets="toy", methods="source")
    assert [c.spec.dataset for c in plan.cells] == ["toy"]
    assert paper.paper_dataset("toy") == "cifar10_c_8_2"  # its numbers are compared with Table 3's
    assert "toy" in {name for name, _, _ in data.dataset_status(tmp_path)}


def test_unknown_names_are_refused_with_the_list_and_registration_is_checked() -> None:
    with pytest.raises(ValueError, match=r"unknown dataset 'mnist'; choose one of digits, .*npz:"):
        data.dataset("mnist")
    with pytest.raises(ValueError, match=r"unknown outlier set 'cifar'; choose one of .*svhn"):
        data.outlier_set("cifar")
    with pytest.raises(ValueError, match="needs a class-split dataset"):
        data.outlier_set("heldout_classes", data.dataset("cifar10_c"))
    with pytest.raises(ValueError, match="taken"):
        data.register_dataset(data.dataset("digits"))
    with pytest.raises(ValueError, match="reserved"):
        data.register_outlier_set(data.OutlierSet("none", lambda root, limit=None: torch.zeros(0)))


def test_every_entry_names_a_hyperparameter_set_the_methods_know_and_a_source_model() -> None:
    for name, entry in data.DATASETS.items():
        assert entry.hyperparameter_set in methods.HYPERPARAMETER_SETS, name
        assert entry.architecture in models.ARCHITECTURES and entry.checkpoint, name
        assert 2 <= entry.known <= entry.classes
        assert (entry.heldout is not None) == (entry.known < entry.classes), name
        assert not entry.paper_name or entry.paper_name in paper.DATASET_LABELS, name
    assert data.dataset("cifar100_c_80_20").base == "cifar100_c" and data.num_classes("cifar100_c_80_20") == 80


def test_missing_files_of_a_templated_npz_dataset_are_listed(tmp_path: Path) -> None:
    np.savez(tmp_path / "fog-5.npz", images=images(4), labels=np.arange(4))
    name = f"npz:{tmp_path}/{{corruption}}-{{severity}}.npz"
    data.check_available(name, ("fog",))
    with pytest.raises(loaders.DatasetNotFound, match="snow-5.npz"):
        data.check_available(name, ("fog", "snow"))
    assert data.hyperparameter_set_of(name) == ""  # a path names no hyperparameter set
