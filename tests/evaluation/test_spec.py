"""RunSpec: every name and number refused before any file or model is touched, stable keys."""

from __future__ import annotations

import dataclasses
import json

import pytest

from stamplib.data import StreamSpec
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
    older = RunSpec(method="tent", dataset="digits", outlier_set="noise", corruptions=("gaussian_noise", "contrast"),
                    profile="smoke", hyperparameter_set="imagenet_c", overrides=(("lr", 0.01),))
    assert older.with_stream(realistic=False, relative_speed=0).key() == "afdd9fd681a664f5"
    measured, fixed = older.with_stream(realistic=True), older.with_stream(realistic=True, relative_speed=17)
    assert len({older.key(), measured.key(), fixed.key()}) == 3
    assert fixed.to_dict()["relative_speed"] == 17 and "relative_speed" not in measured.to_dict()
    assert RunSpec.from_dict(fixed.to_dict()) == fixed
    with pytest.raises(ValueError, match="give realistic=True"):
        older.with_stream(relative_speed=3)
    with pytest.raises(ValueError, match="relative_speed is C"):
        older.with_stream(realistic=True, relative_speed=-1)
    with pytest.raises(ValueError, match="realistic is True or False"):
        older.with_stream(realistic="yes")



@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(dataset="mnist"), r"unknown dataset 'mnist'; choose one of .*digits"),
        (dict(outlier_set="cifar"), r"unknown outlier set 'cifar'; choose one of .*svhn.*none"),
        (dict(dataset="cifar10_c", outlier_set="heldout_classes"), r"needs a class-split dataset \(.*cifar10_c_8_2"),
        (dict(corruptions=("gaussian_noise", "fogg")), r"unknown corruption\(s\) 'fogg'; choose from .*contrast"),
        (dict(severity=0), r"severity must be an integer from 1 to 5"),
        (dict(outlier_ratio=-0.1), r"must be in \[0, 1\)"),
        (dict(outlier_ratio=float("nan")), r"must be in \[0, 1\)"),
        (dict(seed=-1), r"seed must be a non-negative integer"),
        # issue 83: a corruption named twice was computed twice under a new cell key
        (dict(corruptions=("gaussian_noise", "gaussian_noise")), r"'gaussian_noise' named twice: a cell runs each"),
        # issue 83: the built-in benchmark ships networks 0-4; network 99 was accepted and failed at its load
        (dict(dataset="cifar10_builtin", network=99), r"ships source networks 0–4; network=99 is none of them"),
        (dict(dataset="cifar10_builtin_8_2", network=5), r"ships source networks 0–4; network=5 is none of them"),
        # where a data set has one network, the line names how to train another
        (dict(dataset="digits", network=1), r"has one source network .*`python -m stamplib train-source --dataset NAME "
                                            r"--seed 1 --data-root DIR`"),
        (dict(dataset="cifar10_builtin", network=7), r"train it with `python -m stamplib train-source --dataset "
                                                     r"cifar10_jpeg --recipe compact --seed 7 .*maintain "
                                                     r"build-benchmark"),
    ],
)
def test_runspec_refuses_bad_names_and_values(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RunSpec(method="tent", **kwargs)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), "inf", "nan", 1e400])
def test_a_hyperparameter_that_is_not_finite_is_refused_from_python_too(value: object) -> None:
    """The command line's rule (stamplib.flags) holds for RunSpec.make and explore, which pass
    their overrides through the same coercion."""
    with pytest.raises(ValueError, match="'lr' of 'tent' takes a finite number, got .*: give a finite value"):
        RunSpec.make("tent", {"lr": value}, profile="smoke")
    assert RunSpec.make("tent", {"lr": 2e-3}, profile="smoke").config.lr == 2e-3


def test_runspec_takes_a_single_corruption_name() -> None:
    # "fog" must not become ('f', 'o', 'g') and then fail as three unknown corruptions.
    assert RunSpec(method="tent", corruptions="fog").corruptions == ("fog",)



def test_the_hyperparameter_set_comes_from_the_dataset_registry_or_is_named() -> None:
    assert RunSpec(method="tent").resolved_hyperparameter_set() == "cifar10_c"  # the digits entry's
    assert RunSpec(method="tent", dataset="cifar100_c_80_20").resolved_hyperparameter_set() == "cifar100_c_80_20"
    assert RunSpec(method="tent", hyperparameter_set="imagenet_c").resolved_hyperparameter_set() == "imagenet_c"
    with pytest.raises(ValueError, match="has no hyperparameter set of its own; give hyperparameter_set="):
        RunSpec(method="tent", dataset="npz:/nowhere/x.npz")
    spec = RunSpec(method="tent", dataset="npz:/nowhere/x.npz", hyperparameter_set="cifar10_c")
    assert spec.dataset == "npz:/nowhere/x.npz"
    with pytest.raises(ValueError, match="unknown hyperparameter set 'digits'"):
        RunSpec(method="tent", hyperparameter_set="digits")


def test_keys_of_specs_written_before_the_stream_options_are_unchanged() -> None:
    # Computed by the code before `continual`, `dirichlet` and `outlier_burst` existed.
    assert RunSpec(method="stamp").key() == "8c92a55947dd4606"
    older = RunSpec(method="tent", dataset="digits", outlier_set="noise", corruptions=("gaussian_noise", "contrast"),
                    profile="smoke", hyperparameter_set="imagenet_c", overrides=(("lr", 0.01),))
    assert older.key() == "afdd9fd681a664f5"
    harder = older.with_stream(schedule="continual", dirichlet=0.1, outlier_burst=16)
    assert harder.key() != older.key() and RunSpec.from_dict(harder.to_dict()) == harder
    assert {"continual", "dirichlet", "outlier_burst"} <= set(harder.to_dict())
    with pytest.raises(ValueError, match="dirichlet"):
        older.with_stream(dirichlet=float("inf"))
    with pytest.raises(ValueError, match="unknown schedule 'often'"):
        older.with_stream(schedule="often")
    with pytest.raises(ValueError, match="continual is True or False"):
        RunSpec.from_dict({**older.to_dict(), "continual": "yes"})


def test_the_stream_is_one_object_whose_fields_the_key_names_as_before() -> None:
    """A RunSpec holds one StreamSpec; its key holds the stream's fields not at their defaults
    under the names keys have always had (the schedule as continual, mixed_domains, gradual)."""
    spec = RunSpec(method="tent", corruptions=("fog", "snow"), stream=StreamSpec(schedule="mixed", batch_size=16))
    assert spec.to_dict()["mixed_domains"] is True and spec.to_dict()["batch_size"] == 16
    assert "stream" not in spec.to_dict() and "schedule" not in spec.to_dict()
    assert RunSpec.from_dict(spec.to_dict()) == spec
    assert spec.with_stream(schedule="episodic", batch_size=64) == RunSpec(method="tent", corruptions=("fog", "snow"))
    assert not spec.resets_per_corruption and RunSpec(method="tent").resets_per_corruption
    with pytest.raises(ValueError, match="stream is a StreamSpec"):
        RunSpec(method="tent", stream={"batch_size": 4})
    with pytest.raises(TypeError):
        RunSpec(method="tent", continual=True)  # a stream option is the stream's, not a field of its own
    with pytest.raises(ValueError, match="the mixed schedule mixes the cell's corruptions"):
        RunSpec(method="tent", corruptions=("fog",), stream=StreamSpec(schedule="mixed"))


def test_a_stream_option_given_as_text_is_read_as_its_field_says() -> None:
    stream = StreamSpec.parse({"schedule": "gradual", "dirichlet": "0.1", "outlier_burst": "8", "batch_size": "16"})
    assert stream == StreamSpec(schedule="gradual", dirichlet=0.1, outlier_burst=8, batch_size=16)
    with pytest.raises(ValueError, match="unknown stream option"):
        StreamSpec.parse({"batchsize": "16"})
    with pytest.raises(ValueError, match="stream option 'batch_size' takes an integer, got 'many'"):
        StreamSpec.parse({"batch_size": "many"})
    assert StreamSpec(schedule="continual", realistic=True).building() == StreamSpec()  # the cache's key


def test_building_a_method_from_a_spec_resolves_its_config_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 50, item 4: the spec resolves the config (overrides typed once, the config made
    once) and everyone who builds its method takes it: EATA's source data and methods.create.
    Counted where it cannot be missed: every config EATA is given runs EATAConfig.__post_init__,
    every typed value passes validation.coerce."""
    from stamplib.evaluation.assembly import build_method
    from stamplib.methods import base
    from stamplib.methods.eata import EATAConfig

    made, typed = [], []
    checks, coerce = EATAConfig.__post_init__, base.coerce
    monkeypatch.setattr(EATAConfig, "__post_init__", lambda config: (made.append(config), checks(config))[1])
    monkeypatch.setattr(base, "coerce", lambda *args: (typed.append(args[0]), coerce(*args))[1])
    # Text, as a command line gives it; 64 source images keep the Fisher information quick.
    spec = RunSpec.make("eata", overrides={"lr": "0.001", "fisher_samples": "64"})
    method = build_method(spec, "cpu")
    assert len(made) == 1 and sorted(typed) == ["hyperparameter 'fisher_samples' of 'eata'",
                                                "hyperparameter 'lr' of 'eata'"]
    assert method.config is spec.config and spec.config.lr == 0.001
    assert spec.overrides == (("fisher_samples", 64), ("lr", 0.001))
    assert spec.with_(seed=1).config == spec.config  # a changed spec resolves its own, equal here
    # the config is no field: keys and equality as before
    assert spec == RunSpec.make("eata", overrides={"lr": 0.001, "fisher_samples": 64})


def test_an_execution_option_is_no_hyperparameter_of_the_spec() -> None:
    """Speed options are given to build_method, never to the spec: its config has none of
    them, and an override naming one is refused, as any unknown hyperparameter is."""
    from stamplib import methods
    from stamplib.evaluation.assembly import build_method

    spec = RunSpec.make("stamp", overrides={"num_views": 2})
    fields = {f.name for f in dataclasses.fields(spec.config)}
    assert not fields & set(methods.Execution.names()) and "num_views" in fields
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['bf16_autocast'\]"):
        RunSpec.make("stamp", overrides={"bf16_autocast": True})
    method = build_method(spec, "cpu", execution=methods.Execution(view_chunk=2, channels_last=True))
    assert method.config is spec.config and method.execution.view_chunk == 2
    assert build_method(spec, "cpu").execution == methods.Execution()  # what records run


def test_a_network_of_our_own_recipes_is_taken_and_its_absence_names_its_training() -> None:
    """Network k of the JPEG CIFAR-10 can be trained (train-source --seed k), so it is a valid spec;
    its missing file names that command, not the authors' release, ImageNet or an unseeded recipe."""
    from stamplib.models import checkpoints

    assert RunSpec(method="source", dataset="cifar10_jpeg", network=99).network == 99
    assert RunSpec(method="source", dataset="cifar10_builtin", network=4).network == 4
    advice = checkpoints.how_to_get("ResNet18_10_jpeg_seed99")
    assert "python -m stamplib train-source --dataset cifar10_jpeg --seed 99" in advice
    assert "Google Drive" not in advice and "ImageNet" not in advice and "train_source(" not in advice
    assert "--recipe compact --seed 3" in checkpoints.how_to_get("ResNetTiny_8_jpeg_seed3")
