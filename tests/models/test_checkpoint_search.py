"""Where checkpoints are found (issue 25): the writable checkpoints folder first, then
``shared/models`` beside the checkout or ``$STAMPLIB_CHECKPOINT_PATH``; ``checkpoints import``
copies a folder of them only after each file's SHA-256 equals its sidecar's; the doctor names
where each one was found."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from stamplib import models, paths
from stamplib.models import checkpoints
from tests.models.test_models import authors_state_dict

REPO = Path(__file__).resolve().parents[2]


def _shared_folder(root: Path, name: str = "ResNet18_8_jpeg", seed: int = 0) -> Path:
    """A read-only-style model folder as shared/models is: <name>.pt and the trainer's sidecar."""
    root.mkdir(parents=True, exist_ok=True)
    checkpoints.save_checkpoint(root / f"{name}.pt", authors_state_dict(8, seed=seed),
                                {"name": name, "clean_test_accuracy": 0.865})
    return root


@pytest.fixture
def shared(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = _shared_folder(tmp_path / "shared" / "models")
    monkeypatch.setenv(paths.CHECKPOINT_PATH_ENV, str(folder))
    return folder


def test_the_default_search_path_is_the_home_then_shared_models_beside_the_checkout(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(paths.CHECKPOINT_PATH_ENV, raising=False)
    assert paths.checkpoint_search_path() == [home / "checkpoints", REPO.parent / "shared" / "models"]
    monkeypatch.setenv(paths.CHECKPOINT_PATH_ENV, "")
    assert paths.checkpoint_search_path() == [home / "checkpoints"]  # empty: search nowhere else


def test_a_model_in_the_shared_folder_is_found_and_loaded_without_a_copy(shared: Path, home: Path) -> None:
    assert checkpoints.checkpoint_path("ResNet18_8_jpeg") == shared / "ResNet18_8_jpeg.pt"
    model = models.source_model("cifar10_jpeg_8_2")
    assert torch.equal(model.state_dict()["fc.bias"], authors_state_dict(8)["fc.bias"])
    assert not (home / "checkpoints").exists()  # nothing was copied or written
    row = next(r for r in checkpoints.status(verify=True) if r["checkpoint"] == "ResNet18_8_jpeg")
    assert row["present"] and row["verified"] and row["path"] == str(shared / "ResNet18_8_jpeg.pt")


def test_the_writable_folder_comes_first(shared: Path, home: Path) -> None:
    _shared_folder(home / "checkpoints", seed=1)
    assert checkpoints.checkpoint_path("ResNet18_8_jpeg") == home / "checkpoints" / "ResNet18_8_jpeg.pt"


def test_a_shared_model_whose_hash_differs_from_its_sidecar_is_refused(shared: Path) -> None:
    state = authors_state_dict(8)
    state["fc.bias"] += 1.0
    torch.save(state, shared / "ResNet18_8_jpeg.pt")
    with pytest.raises(models.ChecksumMismatchError, match="SHA-256"):
        models.source_model("cifar10_jpeg_8_2")
    row = next(r for r in checkpoints.status(verify=True) if r["checkpoint"] == "ResNet18_8_jpeg")
    assert row["present"] and not row["verified"]


def test_a_missing_model_names_the_folders_searched(home: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(paths.CHECKPOINT_PATH_ENV, str(tmp_path / "elsewhere"))
    with pytest.raises(models.MissingCheckpointError) as err:
        models.source_model("cifar10_jpeg")
    assert str(tmp_path / "elsewhere") in str(err.value) and "checkpoints import" in str(err.value)


def test_import_copies_verified_models_and_refuses_a_changed_one(shared: Path, home: Path, monkeypatch) -> None:
    monkeypatch.setenv(paths.CHECKPOINT_PATH_ENV, "")
    copied = checkpoints.import_dir(shared)
    target = home / "checkpoints" / "ResNet18_8_jpeg.pt"
    assert copied == [target]
    assert target.read_bytes() == (shared / "ResNet18_8_jpeg.pt").read_bytes()
    assert json.loads(target.with_suffix(".json").read_text())["sha256"] == checkpoints.sha256_bytes(
        target.read_bytes()
    )

    target.unlink()
    target.with_suffix(".json").unlink()
    torch.save(authors_state_dict(8, seed=5), shared / "ResNet18_8_jpeg.pt")
    with pytest.raises(models.ChecksumMismatchError):
        checkpoints.import_dir(shared)
    assert not target.exists()  # nothing half-imported
    with pytest.raises(models.MissingCheckpointError, match="none of the registered"):
        checkpoints.import_dir(home)


def test_the_cli_lists_imports_and_the_doctor_names_where_each_model_was_found(shared: Path, home: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "stamplib", *args], capture_output=True, text=True, cwd=REPO, timeout=600
        )

    doctor = cli("doctor")
    assert doctor.returncode == 0, doctor.stderr
    line = next(x for x in doctor.stdout.splitlines() if "ResNet18_8_jpeg" in x)
    assert "found" in line and "86.50%" in line and str(shared / "ResNet18_8_jpeg.pt") in line
    assert str(shared) in doctor.stdout.split("checkpoints:", 1)[1].splitlines()[0]  # the search path

    imported = cli("checkpoints", "import", str(shared))
    assert imported.returncode == 0 and "imported" in imported.stdout
    listed = cli("checkpoints", "list")
    assert str(home / "checkpoints" / "ResNet18_8_jpeg.pt") in listed.stdout


def test_a_network_seed_names_its_own_checkpoint_and_seed_0_keeps_the_registered_name() -> None:
    from stamplib.models import checkpoints

    assert checkpoints.network_name("ResNetTiny_10_jpeg", 0) == "ResNetTiny_10_jpeg"
    assert checkpoints.network_name("ResNetTiny_10_jpeg", 3) == "ResNetTiny_10_jpeg_seed3"
    assert checkpoints.base_name("ResNet18_10_jpeg_seed2") == "ResNet18_10_jpeg"
    assert checkpoints.base_name("ResNet18_10_jpeg") == "ResNet18_10_jpeg"
    assert checkpoints.base_name("nothing_seed2") == "nothing_seed2"  # not registered: left as it is
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="training seed"):
            checkpoints.network_name("ResNetTiny_10_jpeg", bad)
