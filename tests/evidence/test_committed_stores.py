"""The committed stores hold what the page says they hold: every record one of a benchmark's planned
cells (the notebooks' headline tables, a design's claim cells, Table 6's rows, the reference run's
own cells), made by the network its spec names (network k's SHA-256 as shipped or as its sidecar
vouches), under today's hyperparameters, by a command that computes them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from stamplib.data import builtin_cifar10
from stamplib.evaluation.store import ResultsStore, current_config
from stamplib.evidence import benchmarks
from stamplib.models import checkpoints
from tests.support import load_script

REPO = Path(__file__).resolve().parents[2]
#: The reference run's networks: the SHA-256 their sidecars record (shared/models/README.md; network 2,
#: `ResNet18_10_jpeg_seed2`, trained for issue 70, is not in shared/models: its sidecar is the trainer's).
REFERENCE_NETWORKS = {"ResNet18_10_jpeg": "e64c2f32f6ce63f7741f7f5d046b1dd70169aa99cd2bfa8c4724df34682b9de7",
                      "ResNet18_10_jpeg_seed1": "4166959318f7e3a07f1124307cbdadc5febac2a74de59634cfdf101fe3a7d4fa",
                      "ResNet18_10_jpeg_seed2": "5f49fba0c4a20438953f72e0581ab5a9c0c4d2140a192896c88d79e295256844",
                      "ResNet18_8_jpeg": "57eba0b52d0749f8efb27ab3c6af743a6fffdc192193353bfef4279e8f014149"}
COMMANDS = ("python -m stamplib grid --profile quick", "python -m stamplib benchmark compute --",
            "python -m stamplib claims compute --", "python -m stamplib reference compute")


def _planned(benchmark: benchmarks.Benchmark) -> set[str]:
    """Every cell the benchmark plans, as the seal tool (which lists only those) reads them."""
    return load_script("tools/seal_evidence.py").planned_keys(benchmark)


def _records(benchmark: benchmarks.Benchmark) -> list:
    return ResultsStore(REPO / benchmark.store).records()


def test_every_builtin_record_is_a_planned_cell_made_by_its_shipped_network() -> None:
    records = _records(benchmarks.BUILTIN)
    planned = _planned(benchmarks.BUILTIN)
    assert {r.key for r in records} <= planned, sorted({r.key for r in records} - planned)[:5]
    sums = builtin_cifar10.recorded_sums()
    for record in records:
        made = record.provenance
        assert made.command.startswith(COMMANDS), made.command
        assert made.git["commit"], record.key
        name = made.checkpoint.name
        assert name == checkpoints.network_name(checkpoints.base_name(name), record.spec.network)
        assert made.checkpoint.sha256 == sums[f"{name}.pt"], record.key  # the network the package ships


def test_every_reference_record_is_a_reference_cell_made_by_its_network() -> None:
    records = _records(benchmarks.REFERENCE)
    planned = _planned(benchmarks.REFERENCE)
    assert {r.key for r in records} <= planned, sorted({r.key for r in records} - planned)[:5]
    for record in records:
        checkpoint = record.provenance.checkpoint
        assert checkpoint.name == checkpoints.network_name(checkpoints.base_name(checkpoint.name), record.spec.network)
        if checkpoint.name in REFERENCE_NETWORKS:
            assert checkpoint.sha256 == REFERENCE_NETWORKS[checkpoint.name], record.key
        assert record.provenance.git["dirty"] is False, record.key


def test_no_committed_record_was_made_under_other_hyperparameters() -> None:
    """A changed config default makes a record stale (the store treats it as absent); the stale
    file must go, so that nothing committed shows numbers the code no longer gives."""
    stale = [r.key for b in benchmarks.BENCHMARKS for r in _records(b) if r.config != current_config(r.spec)]
    assert not stale, f"stale records (recompute them with `python -m stamplib claims compute`): {stale}"


def _kept_corruption_problems(root: Path, specs: dict, stored: set[str]) -> list[str]:
    """What is wrong with the finished corruptions a store keeps for its unfinished cells
    (``.grid/partial/<key>/``): each must belong to a planned cell that has no record yet, name its
    key and corruption, have its outputs, and be current (a stale one would be computed again, so
    committing it keeps dead files)."""
    problems = []
    folder = ResultsStore(root).grid_dir / "partial"
    for cell in sorted(folder.iterdir()) if folder.is_dir() else []:
        if cell.name not in specs:
            problems.append(f"{cell.name}: no planned cell has this key")
            continue
        if cell.name in stored:
            problems.append(f"{cell.name}: the cell has its record; its kept corruptions should have gone")
        spec = specs[cell.name]
        for entry_file in sorted(cell.glob("*.json")):
            entry = json.loads(entry_file.read_text())
            corruption = entry_file.stem
            if entry.get("key") != cell.name or entry.get("corruption") != corruption:
                problems.append(f"{entry_file}: names {entry.get('key')}/{entry.get('corruption')}")
            if corruption not in spec.corruptions:
                problems.append(f"{entry_file}: {corruption} is not one of the cell's corruptions")
            if not (cell / f"{corruption}.outputs.npz").is_file():
                problems.append(f"{entry_file}: its outputs file is missing")
            if entry.get("config") != current_config(spec):
                problems.append(f"{entry_file}: made under other hyperparameters (stale)")
            if entry.get("checkpoint_sha256") not in REFERENCE_NETWORKS.values():
                problems.append(f"{entry_file}: from a checkpoint that is none of the reference networks")
    return problems


def _reference_specs() -> dict:
    from stamplib.experiments import reference

    empty = ResultsStore(Path("/nonexistent"))  # every cell counts as missing, so every one is listed
    planned = [s for design in benchmarks.REFERENCE.designs for s in benchmarks.evidence_cells(design, empty, "cpu")]
    return {s.key(): s for s in planned + reference.specs() + reference.extra_specs()}


def test_the_reference_stores_kept_corruptions_are_of_unfinished_cells_and_current() -> None:
    root = REPO / benchmarks.REFERENCE.store
    stored = {r.key for r in ResultsStore(root).records()}
    assert not _kept_corruption_problems(root, _reference_specs(), stored)


def test_a_kept_corruption_of_a_finished_or_unknown_cell_is_reported(tmp_path: Path) -> None:
    specs = _reference_specs()
    spec = next(s for s in specs.values() if len(s.corruptions) == 15)
    cell = tmp_path / ".grid" / "partial" / spec.key()
    cell.mkdir(parents=True)
    entry = {"key": spec.key(), "corruption": spec.corruptions[0], "config": current_config(spec),
             "checkpoint_sha256": REFERENCE_NETWORKS["ResNet18_10_jpeg"]}
    (cell / f"{spec.corruptions[0]}.json").write_text(json.dumps(entry))
    (cell / f"{spec.corruptions[0]}.outputs.npz").write_bytes(b"")
    assert _kept_corruption_problems(tmp_path, specs, set()) == []
    assert "should have gone" in _kept_corruption_problems(tmp_path, specs, {spec.key()})[0]
    (tmp_path / ".grid" / "partial" / "made_up__key").mkdir()
    assert "no planned cell" in _kept_corruption_problems(tmp_path, specs, set())[0]
    (cell / f"{spec.corruptions[0]}.json").write_text(json.dumps({**entry, "config": {"lr": -1}}))
    assert any("stale" in p for p in _kept_corruption_problems(tmp_path, specs, set()))


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git checkout")
def test_git_keeps_the_reference_stores_finished_corruptions_and_ignores_its_claims() -> None:
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0

    assert not ignored("results/reference/.grid/partial/k/gaussian_noise.json")
    assert not ignored("results/reference/.grid/partial/k/gaussian_noise.outputs.npz")
    assert ignored("results/reference/.grid/running/k.json")
    assert ignored("results/reference/.grid/claims.lock")
    assert ignored("results/reference/.grid/partial/k/.tmp-12-gaussian_noise.json")
