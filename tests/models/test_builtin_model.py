"""The digits source model is the same file on every x86-64 machine of one CPU vendor: trained on
one thread with PyTorch, oneDNN and MKL held to their AVX2 kernels, whatever the CPU's vector
width (AMD and Intel CPUs give two different files)."""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path

import pytest
import torch

from stamplib import paths
from stamplib.models import builtin

#: SHA-256 of the digits model per CPU vendor (/proc/cpuinfo's vendor_id). With ATen, oneDNN and
#: MKL pinned to AVX2 and one thread, an AVX2-only AMD EPYC and an AVX-512 one gave the first file
#: (2026-11-25); an Intel Xeon with AVX-512 gives another, the same in two trainings (2026-11-27:
#: the suite, and a clean clone of 3b8a432), so some kernel below the pins still chooses by vendor.
#: A change of the recipe, the data or the network changes them: then update them here and the
#: README's numbers of the built-in benchmark with them.
DIGITS_SHA256 = {"AuthenticAMD": "3b5f70851ac712b555f0cd5a03d75c046a4b0c0b4be93e365b30177cf2ead873",
                 "GenuineIntel": "219686abe05892b40ec9e73218256cd97bfb636360cb2bc76b8dd1a7437613fe"}


def _cpu_vendor() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    found = re.search(r"^vendor_id\s*:\s*(\S+)", text, flags=re.M)
    return found.group(1) if found else "unknown"


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the AVX2 pin exists on x86-64 only")
def test_the_digits_model_is_a_known_file(digits_model: torch.nn.Module) -> None:
    """The model in use is the shipped one, or one this machine trained pinned (a checkout whose
    cache predates the shipped file keeps its own)."""
    sidecar = json.loads((paths.checkpoints_dir() / f"{builtin.DIGITS_CHECKPOINT}.json").read_text())
    assert sidecar["train_log"]["cpu_capability"] == builtin.PINNED_CAPABILITY
    assert sidecar["train_log"]["threads"] == builtin.TRAINING_THREADS
    assert sidecar["sha256"] in DIGITS_SHA256.values(), sidecar["sha256"]


def test_the_shipped_digits_model_is_the_amd_file_and_its_sidecar_vouches_for_it() -> None:
    import hashlib

    payload = (builtin.SHIPPED / f"{builtin.DIGITS_CHECKPOINT}.pt").read_bytes()
    sidecar = json.loads((builtin.SHIPPED / f"{builtin.DIGITS_CHECKPOINT}.json").read_text())
    assert hashlib.sha256(payload).hexdigest() == sidecar["sha256"] == builtin.SHIPPED_SHA256 \
        == DIGITS_SHA256["AuthenticAMD"]
    assert sidecar["recipe"] == builtin._recipe_json()  # else it is retrained, not used


def test_a_fresh_home_gets_the_shipped_model_without_training(home, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_training(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("trained although the shipped model fits")

    monkeypatch.setattr(builtin.subprocess, "run", no_training)
    model = builtin.digits_source_model(progress=False)
    cached = paths.checkpoints_dir() / f"{builtin.DIGITS_CHECKPOINT}.pt"
    assert cached.read_bytes() == (builtin.SHIPPED / cached.name).read_bytes() and not model.training


def test_a_shipped_model_of_another_recipe_is_not_used(home, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    monkeypatch.setattr(builtin, "DIGITS_RECIPE", dataclasses.replace(builtin.DIGITS_RECIPE, epochs=31))
    assert builtin._install_shipped() is False and not paths.checkpoints_dir().exists()


def test_training_refuses_a_process_that_is_not_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    with pytest.raises(RuntimeError, match="ATEN_CPU_CAPABILITY"):
        builtin._train_pinned(progress=False)


def test_a_cached_model_from_before_the_pin_is_not_trusted(home, digits_model: torch.nn.Module) -> None:
    """A sidecar without the AVX2 marker (an unpinned, possibly AVX-512 training) is retrained."""
    folder = paths.checkpoints_dir()
    folder.mkdir(parents=True)
    import hashlib
    import io

    buffer = io.BytesIO()
    torch.save(digits_model.state_dict(), buffer)
    (folder / f"{builtin.DIGITS_CHECKPOINT}.pt").write_bytes(buffer.getvalue())
    meta = {"sha256": hashlib.sha256(buffer.getvalue()).hexdigest(), "train_log": {"threads": 1}}
    (folder / f"{builtin.DIGITS_CHECKPOINT}.json").write_text(json.dumps(meta))
    fresh = builtin.resnet_cifar_tiny(8)
    assert builtin._cached(fresh) is None
    meta["train_log"]["cpu_capability"] = builtin.PINNED_CAPABILITY
    (folder / f"{builtin.DIGITS_CHECKPOINT}.json").write_text(json.dumps(meta))
    assert builtin._cached(fresh) is not None
