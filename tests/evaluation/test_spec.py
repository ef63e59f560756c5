"""RunSpec: every name and number refused before any file or model is touched, stable keys."""

from __future__ import annotations

import json

import pytest

from stamplib.evaluation.spec import RunSpec


def test_runspec_validates_and_hashes_stably():
    spec = RunSpec.make("tent", corruptions=("gaussian_noise",), overrides={"lr": 0.01})
    assert spec.key() == RunSpec.from_dict(json.loads(json.dumps(spec.to_dict()))).key()
    assert spec.key() != spec.with_(seed=1).key()
    for bad, match in [(dict(severity=6), "severity"), (dict(outlier_ratio=1.0), "ratio"),
                       (dict(corruptions=("fog2",)), "corruption"), (dict(profile="huge"), "profile")]:
        with pytest.raises(ValueError, match=match):
            RunSpec.make("tent", **bad)
    with pytest.raises(ValueError, match="unknown method"):
        RunSpec(method="nope")


def test_the_realistic_protocol_keeps_every_older_key() -> None:
    older = RunSpec(method="tent", dataset="digits", outliers="noise", corruptions=("gaussian_noise", "contrast"),
                    profile="smoke", setting="imagenet_c", overrides=(("lr", 0.01),))
    assert older.with_(realistic=False, relative_speed=0).key() == "afdd9fd681a664f5"
    measured, fixed = older.with_(realistic=True), older.with_(realistic=True, relative_speed=17)
    assert len({older.key(), measured.key(), fixed.key()}) == 3
    assert fixed.to_dict()["relative_speed"] == 17 and "relative_speed" not in measured.to_dict()
    assert RunSpec.from_dict(fixed.to_dict()) == fixed
    with pytest.raises(ValueError, match="give realistic=True"):
        older.with_(relative_speed=3)
    with pytest.raises(ValueError, match="relative_speed is C"):
        older.with_(realistic=True, relative_speed=-1)
    with pytest.raises(ValueError, match="realistic is True or False"):
        older.with_(realistic="yes")



@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(dataset="mnist"), r"unknown dataset 'mnist'; choose one of .*digits"),
        (dict(outliers="cifar"), r"unknown outlier set 'cifar'; choose one of .*svhn.*none"),
        (dict(dataset="cifar10_c", outliers="heldout_classes"), r"needs a class-split dataset \(.*cifar10_c_8_2"),
        (dict(corruptions=("gaussian_noise", "fogg")), r"unknown corruption\(s\) 'fogg'; choose from .*contrast"),
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



def test_the_setting_comes_from_the_dataset_registry_or_is_named() -> None:
    assert RunSpec(method="tent").hyperparameter_setting() == "cifar10_c"  # the digits entry's
    assert RunSpec(method="tent", dataset="cifar100_c_80_20").hyperparameter_setting() == "cifar100_c_80_20"
    assert RunSpec(method="tent", setting="imagenet_c").hyperparameter_setting() == "imagenet_c"
    with pytest.raises(ValueError, match="has no hyperparameter setting of its own; give setting="):
        RunSpec(method="tent", dataset="npz:/nowhere/x.npz")
    assert RunSpec(method="tent", dataset="npz:/nowhere/x.npz", setting="cifar10_c").dataset == "npz:/nowhere/x.npz"
    with pytest.raises(ValueError, match="unknown hyperparameter setting 'digits'"):
        RunSpec(method="tent", setting="digits")


def test_keys_of_specs_written_before_the_stream_options_are_unchanged() -> None:
    # Computed by the code before `continual`, `dirichlet` and `outlier_burst` existed.
    assert RunSpec(method="stamp").key() == "8c92a55947dd4606"
    older = RunSpec(method="tent", dataset="digits", outliers="noise", corruptions=("gaussian_noise", "contrast"),
                    profile="smoke", setting="imagenet_c", overrides=(("lr", 0.01),))
    assert older.key() == "afdd9fd681a664f5"
    harder = older.with_(continual=True, dirichlet=0.1, outlier_burst=16)
    assert harder.key() != older.key() and RunSpec.from_dict(harder.to_dict()) == harder
    assert {"continual", "dirichlet", "outlier_burst"} <= set(harder.to_dict())
    with pytest.raises(ValueError, match="dirichlet"):
        older.with_(dirichlet=float("inf"))
    with pytest.raises(ValueError, match="continual"):
        older.with_(continual="yes")
