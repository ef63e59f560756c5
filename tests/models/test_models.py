"""Source models: strict loading with the authors' key names, the checkpoint registry,
torchvision's offline path, the §4.2 recipes and resumable source training."""

from __future__ import annotations

import dataclasses
import json
import urllib.error
import warnings
from pathlib import Path

import pytest
import torch

from stamplib import data, models
from stamplib.blocks.bn import count_parameters, norm_affine_parameters
from stamplib.models import checkpoints
from stamplib.models.recipes import RECIPES, spread_subset, train_source, train_source_for
from stamplib.models.training import TrainRecipe, _augment, fit, make_scheduler
from tests.data.files import write_cifar10


def authors_state_dict(num_classes: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """A state_dict laid out as the authors' src/models/Res.py names it (protocol.md §4.1),
    built from the spec rather than from our module, with random values."""
    g = torch.Generator().manual_seed(seed)
    sd: dict[str, torch.Tensor] = {}

    def conv(key, cout, cin, k):
        sd[f"{key}.weight"] = torch.randn(cout, cin, k, k, generator=g)

    def bn(key, c):
        sd[f"{key}.weight"] = torch.rand(c, generator=g)
        sd[f"{key}.bias"] = torch.randn(c, generator=g)
        sd[f"{key}.running_mean"] = torch.randn(c, generator=g)
        sd[f"{key}.running_var"] = torch.rand(c, generator=g) + 0.5
        sd[f"{key}.num_batches_tracked"] = torch.tensor(1000)

    conv("conv1.0", 64, 3, 3)
    bn("conv1.1", 64)
    cin = 64
    for stage, width in zip((2, 3, 4, 5), (64, 128, 256, 512)):
        for block in range(2):
            prefix = f"conv{stage}_x.{block}"
            conv(f"{prefix}.residual_function.0", width, cin, 3)
            bn(f"{prefix}.residual_function.1", width)
            conv(f"{prefix}.residual_function.3", width, width, 3)
            bn(f"{prefix}.residual_function.4", width)
            if block == 0 and cin != width:
                conv(f"{prefix}.shortcut.0", width, cin, 1)
                bn(f"{prefix}.shortcut.1", width)
            cin = width
    sd["fc.weight"] = torch.randn(num_classes, 512, generator=g)
    sd["fc.bias"] = torch.randn(num_classes, generator=g)
    return sd


# ---------------------------------------------------------------- strict loading


def test_authors_state_dict_loads_strictly(tmp_path):
    sd = authors_state_dict(10)
    for key in ("conv2_x.0.residual_function.0.weight", "conv3_x.0.shortcut.1.running_mean", "fc.weight"):
        assert key in sd
    path = tmp_path / "ResNet18_10.pt"
    torch.save(sd, path)
    model = models.create("resnet18_cifar", 10, weights=path)
    loaded = model.state_dict()
    assert set(loaded) == set(sd)
    assert all(torch.equal(loaded[k], sd[k]) for k in sd)
    with torch.no_grad():
        assert model.eval()(torch.rand(2, 3, 32, 32)).shape == (2, 10)


def test_dataparallel_prefix_is_stripped(tmp_path):
    sd = {f"module.{k}": v for k, v in authors_state_dict(10).items()}
    torch.save({"state_dict": sd}, tmp_path / "wrapped.pt")
    model = models.create("resnet18_cifar", 10, weights=tmp_path / "wrapped.pt")
    assert torch.equal(model.fc.bias, sd["module.fc.bias"])


def test_wrong_class_count_is_one_clear_error(tmp_path):
    torch.save(authors_state_dict(10), tmp_path / "ten.pt")
    with pytest.raises(models.CheckpointMismatchError) as err:
        models.create("resnet18_cifar", 100, weights=tmp_path / "ten.pt")
    msg = str(err.value)
    assert "fc.weight expected [100, 512] found [10, 512]" in msg
    assert "num_classes=10" in msg


def test_wrong_keys_name_missing_and_unexpected(tmp_path):
    sd = {k.replace("conv5_x", "layer4"): v for k, v in authors_state_dict(10).items()}
    torch.save(sd, tmp_path / "renamed.pt")
    with pytest.raises(models.CheckpointMismatchError) as err:
        models.create("resnet18_cifar", 10, weights=tmp_path / "renamed.pt")
    msg = str(err.value)
    assert "missing" in msg and "conv5_x.0.residual_function.0.weight" in msg
    assert "unexpected" in msg and "layer4.0.residual_function.0.weight" in msg


def test_missing_file_and_unknown_name(tmp_path, home):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        models.create("resnet18_cifar", 10, weights=tmp_path / "nope.pt")
    with pytest.raises(models.MissingCheckpointError, match="neither a registered checkpoint"):
        models.create("resnet18_cifar", 10, weights="ResNet18_11")


def test_stamp_parameter_selection_sees_conv5_x_as_last_stage():
    model = models.create("resnet18_cifar", 10)
    names = {id(p): n for n, p in model.named_parameters()}
    adapted = norm_affine_parameters(model, exclude_last_stage=True)
    assert count_parameters(adapted) == 4_480
    assert not any("conv5_x" in names[id(p)] for p in adapted)
    everything = norm_affine_parameters(model, exclude_last_stage=False)
    # conv5_x: 4 block BNs + 1 shortcut BN, 512 channels, weight + bias
    assert count_parameters(everything) - count_parameters(adapted) == 5 * 512 * 2


# ---------------------------------------------------------------- registry


def test_missing_registered_checkpoint_names_three_ways(home):
    with pytest.raises(models.MissingCheckpointError) as err:
        models.create("resnet18_cifar", 10, weights="ResNet18_10")
    msg = str(err.value)
    assert str(home / "checkpoints" / "ResNet18_10.pt") in msg
    assert "train_source('cifar10'" in msg and "01_source_models.ipynb" in msg
    assert "Google Drive" in msg
    assert "IMAGENET1K_V1" in msg
    with pytest.raises(models.MissingCheckpointError, match="ResNet18_100"):
        models.source_model("cifar100_c")


def test_registry_entry_must_match_architecture(home):
    with pytest.raises(models.CheckpointMismatchError, match="create\\('resnet18_cifar', 10"):
        models.create("resnet18_cifar", 100, weights="ResNet18_10")


def test_user_supplied_checkpoint_hash_recorded_then_verified(home):
    path = checkpoints.checkpoint_path("ResNet18_8")
    path.parent.mkdir(parents=True)
    torch.save(authors_state_dict(8, seed=1), path)
    with pytest.warns(UserWarning, match="recorded its SHA-256"):
        model = models.source_model("cifar10_c_8_2")
    assert not model.training
    sidecar = json.loads(path.with_suffix(".json").read_text())
    assert sidecar["sha256"] == checkpoints.sha256_bytes(path.read_bytes())
    present = {row["checkpoint"]: row["present"] for row in checkpoints.status()}
    assert present["ResNet18_8"] and not present["ResNet18_10"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second load is verified silently
        models.create("resnet18_cifar", 8, weights="ResNet18_8")
    sd = authors_state_dict(8, seed=1)
    sd["fc.bias"] += 1.0
    torch.save(sd, path)
    with pytest.raises(models.ChecksumMismatchError, match="SHA-256"):
        models.create("resnet18_cifar", 8, weights="ResNet18_8")


def test_sidecar_beside_a_plain_path_is_checked(tmp_path):
    path = tmp_path / "m.pt"
    checkpoints.save_checkpoint(path, authors_state_dict(10), {"note": "test"})
    models.create("resnet18_cifar", 10, weights=path)
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(models.ChecksumMismatchError):
        models.create("resnet18_cifar", 10, weights=path)


def test_source_models_come_from_the_dataset_registry(home):
    def source(name: str) -> tuple[str, int, str]:
        entry = data.dataset(name)
        return entry.architecture, entry.num_classes, entry.checkpoint

    assert source("cifar10_c") == source("cifar10") == ("resnet18_cifar", 10, "ResNet18_10")
    assert source("cifar100_c_80_20") == ("resnet18_cifar", 80, "ResNet18_80")
    assert source("imagenet_c") == ("resnet50", 1000, "IMAGENET1K_V1")
    with pytest.raises(models.MissingCheckpointError, match="ResNet18_8"):
        models.source_model("cifar10_8_2")
    with pytest.raises(ValueError, match="unknown dataset 'svhn'"):
        models.source_model("svhn")


def test_train_source_for_a_dataset_uses_its_entry(home, data_root):
    """The CLI's train-source and notebook 01 call this: the entry's checkpoint, recipe,
    training images (known classes of a split) and clean test images."""
    write_cifar10(data_root, n_test=20, n_train_batch=10)  # labels 0–9 in every split
    result = train_source_for("cifar10_8_2", profile="smoke", progress=False, data_root=data_root)
    side = result.sidecar
    assert result.complete and result.checkpoint.name == "ResNet18_8.smoke.pt"  # never the registry name
    assert side["num_classes"] == 8 and side["recipe_name"] == "cifar10_8" and side["epochs"] == 1
    assert side["n_train"] == 40 and side["n_test"] == 16  # labels 8 and 9 left out
    again = train_source_for("cifar10_8_2", profile="smoke", progress=False, data_root=data_root)
    assert again.sidecar["fingerprint"] == side["fingerprint"]  # reused, not retrained
    assert train_source_for("cifar10_8_2", profile="smoke", recipe="fast", progress=False,
                            data_root=data_root).sidecar["recipe_name"] == "cifar10_8_fast"
    with pytest.raises(ValueError, match="no trainable source model for 'imagenet_c'; choose one of"):
        train_source_for("imagenet_c", data_root=data_root)


# ---------------------------------------------------------------- torchvision (offline only)


def test_resnet50_imagenet_weights_from_torch_cache(tmp_path, monkeypatch):
    from torchvision.models import ResNet50_Weights, resnet50

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setattr(torch.hub, "download_url_to_file", _no_network)
    with pytest.raises(models.MissingCheckpointError) as err:
        models.create("resnet50", 1000, weights="IMAGENET1K_V1")
    cached = tmp_path / "torch" / "hub" / "checkpoints" / "resnet50-0676ba61.pth"
    assert str(cached) in str(err.value) and "TORCH_HOME" in str(err.value)
    assert Path(ResNet50_Weights.IMAGENET1K_V1.url).name == cached.name

    with torch.device("meta"):  # shapes only: no 25M-parameter initialisation
        shapes = {k: v.shape for k, v in resnet50().state_dict().items()}
    g = torch.Generator().manual_seed(0)
    # The 2017 IMAGENET1K_V1 file predates BatchNorm's num_batches_tracked; mimic that.
    sd = {k: torch.rand(s, generator=g) for k, s in shapes.items() if not k.endswith("num_batches_tracked")}
    cached.parent.mkdir(parents=True, exist_ok=True)
    torch.save(sd, cached)
    model = models.create("resnet50", 1000, weights="IMAGENET1K_V1")
    assert isinstance(model, models.InputNormalization)
    assert torch.equal(model.net.fc.weight, sd["fc.weight"])
    assert torch.equal(model.net.layer4[2].bn3.running_var, sd["layer4.2.bn3.running_var"])


def _no_network(*args, **kwargs):
    raise urllib.error.URLError("no network in tests")


def test_corrupt_torchvision_cache_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    cached = tmp_path / "torch" / "hub" / "checkpoints" / "resnet50-0676ba61.pth"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"not a checkpoint")
    with pytest.raises(models.CheckpointMismatchError, match="delete the file"):
        models.create("resnet50", 1000, weights="IMAGENET1K_V1")


# ---------------------------------------------------------------- recipes and augmentation


def test_recipes_follow_protocol_4_2():
    c10, c100 = RECIPES["cifar10"].train, RECIPES["cifar100"].train
    assert (c10.epochs, c10.lr, c10.momentum, c10.weight_decay, c10.nesterov, c10.batch_size) == (200, 0.1, 0.9, 2e-4,
                                                                                                  False, 128)
    assert (c10.schedule, c10.milestones, c10.gamma, c10.rotation_degrees) == ("multistep", (60, 120, 160), 0.2, 0.0)
    assert (c100.weight_decay, c100.nesterov, c100.schedule, c100.rotation_degrees) == (5e-4, True, "cosine", 15.0)
    assert RECIPES["cifar10_8"].train == c10 and RECIPES["cifar10_8"].num_classes == 8
    assert RECIPES["cifar100_80"].train == c100 and RECIPES["cifar100_80"].checkpoint == "ResNet18_80"
    assert c10.with_epochs(20).milestones == (6, 12, 16)
    assert c10.with_epochs(1).milestones == (1, 1, 1)  # never a decay before the first epoch

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    sched = make_scheduler(opt, c10)
    lrs = []
    for _ in range(200):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[59] == pytest.approx(0.1) and lrs[60] == pytest.approx(0.02)
    assert lrs[120] == pytest.approx(0.004) and lrs[199] == pytest.approx(0.0008)


def test_rotation_augmentation_is_batched_and_centred():
    recipe = TrainRecipe(epochs=1, crop_padding=0, hflip=False, rotation_degrees=15.0)
    x = torch.ones(64, 3, 32, 32)
    out = _augment(x, recipe, torch.Generator().manual_seed(0))
    assert out.shape == x.shape
    assert torch.all(out[:, :, 14:18, 14:18] == 1)  # the centre stays
    corner_zeroed = out[:, 0, 0, 0] == 0
    assert 0.7 < corner_zeroed.float().mean() < 1.0  # most angles expose the corners, tiny ones don't
    again = _augment(x, recipe, torch.Generator().manual_seed(0))
    assert torch.equal(out, again)
    still = _augment(x, dataclasses.replace(recipe, rotation_degrees=0.0), torch.Generator().manual_seed(0))
    assert torch.equal(still, x)


def test_spread_subset_is_class_balanced():
    labels = torch.tensor([0] * 50 + [1] * 30 + [2] * 20)
    idx = spread_subset(labels, 30)
    assert idx.numel() == 30 and torch.equal(labels[idx].bincount(), torch.tensor([10, 10, 10]))
    assert torch.equal(spread_subset(labels, None), torch.arange(100))


# ---------------------------------------------------------------- source training


def _tiny_data(n: int, classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % classes
    # class-dependent brightness so that a few steps learn something
    base = (labels.view(-1, 1, 1, 1).float() * 60 + 20).expand(n, 16, 16, 3)
    noise = torch.randint(-20, 21, (n, 16, 16, 3), generator=g)
    return (base + noise).clamp(0, 255).to(torch.uint8), labels


def _tiny_recipe(name: str, num_classes: int = 4):
    base = RECIPES[name]
    return dataclasses.replace(base, num_classes=num_classes, architecture="resnet_cifar_tiny",
                               train=dataclasses.replace(base.train, batch_size=16))


@pytest.mark.parametrize("recipe_name", ["cifar10", "cifar100"])
def test_fit_resumes_to_the_uninterrupted_state(tmp_path, recipe_name):
    x, y = _tiny_data(48, 4, seed=0)
    xt, yt = _tiny_data(16, 4, seed=1)
    recipe = RECIPES[recipe_name].train
    recipe = dataclasses.replace(recipe, batch_size=16).with_epochs(3)

    def fresh(seed):
        torch.manual_seed(seed)
        return models.create("resnet_cifar_tiny", 4)

    full = fresh(0)
    log_full = fit(full, x, y, recipe, seed=3, test_images=xt, test_labels=yt, progress=False)
    state = tmp_path / "resume.pt"
    part = fresh(0)
    log1 = fit(part, x, y, recipe, seed=3, test_images=xt, test_labels=yt, resume_path=state,
               fingerprint="f", stop_after=1, progress=False)
    assert (log1.epochs_done, log1.complete) == (1, False) and state.is_file()
    resumed = fresh(123)  # different init: everything must come from the state file
    log2 = fit(resumed, x, y, recipe, seed=3, test_images=xt, test_labels=yt, resume_path=state,
               fingerprint="f", progress=False)
    assert log2.complete and log2.epochs_done == 3
    a, b = full.state_dict(), resumed.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in log_full.history]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in log2.history]
    assert log2.best_epoch == log_full.best_epoch
    assert all(torch.equal(log_full.best_state[k], log2.best_state[k]) for k in a)
    with pytest.raises(ValueError, match="another run"):
        fit(fresh(0), x, y, recipe, resume_path=state, fingerprint="other", progress=False)


def test_train_source_resume_sidecar_and_registry(home):
    x, y = _tiny_data(60, 5, seed=0)  # label 4 is an "outlier" class for a 4-class recipe
    xt, yt = _tiny_data(20, 5, seed=1)
    recipe = _tiny_recipe("cifar10", num_classes=4)
    kw = dict(epochs=3, seed=7, progress=False)

    first = train_source(recipe, x, y, xt, yt, name="A", stop_after=1, **kw)
    assert not first.complete and first.checkpoint is None
    assert (home / "checkpoints" / "A.resume.pt").is_file()
    resumed = train_source(recipe, x, y, xt, yt, name="A", **kw)
    straight = train_source(recipe, x, y, xt, yt, name="B", **kw)
    assert resumed.complete and resumed.checkpoint == home / "checkpoints" / "A.pt"
    assert not (home / "checkpoints" / "A.resume.pt").exists()
    sa, sb = resumed.model.state_dict(), straight.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)

    side = json.loads((home / "checkpoints" / "A.json").read_text())
    assert side == resumed.sidecar
    assert side["recipe_name"] == "cifar10" and side["recipe"]["weight_decay"] == 2e-4
    assert side["recipe"]["milestones"] == [1, 2, 2] and side["epochs"] == 3
    assert (side["n_train"], side["n_test"], side["num_classes"]) == (48, 16, 4)
    accs = [r["test_accuracy"] for r in side["history"]]
    assert side["clean_test_accuracy"] == max(accs) and accs[side["best_epoch"] - 1] == max(accs)
    assert side["seconds"] > 0
    assert side["sha256"] == checkpoints.sha256_bytes((home / "checkpoints" / "A.pt").read_bytes())
    assert side["clean_test_accuracy"] == straight.sidecar["clean_test_accuracy"]

    # the stored checkpoint reproduces the recorded accuracy
    from stamplib.models.training import evaluate_accuracy

    keep = yt < 4
    reloaded = models.create("resnet_cifar_tiny", 4, weights=resumed.checkpoint)
    assert evaluate_accuracy(reloaded, xt[keep], yt[keep]) == side["clean_test_accuracy"]

    again = train_source(recipe, x, y, xt, yt, name="A", **kw)  # finished: no retraining
    assert again.sidecar["created"] == side["created"]


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



def test_train_source_of_the_digits_model_says_it_is_built_on_first_use(home, data_root):
    """Not advice about the CIFAR-10 photographs (issue 83)."""
    with pytest.raises(ValueError, match=r"digits's source network digits_resnet_cifar_tiny is not trained by "
                                         r"train-source: it is built on first use") as caught:
        models.train_source_for("digits", recipe="compact", data_root=data_root)
    assert "CIFAR" not in str(caught.value) and "photographs" not in str(caught.value)
