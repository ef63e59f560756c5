"""The committed stores hold what the page says they hold: every record one of a benchmark's planned
cells (the notebooks' headline tables, a design's claim cells, Table 6's rows, the reference run's
own cells), made by the network its spec names (network k's SHA-256 as shipped or as its sidecar
vouches), under today's hyperparameters, by a command that computes them."""

from __future__ import annotations

from pathlib import Path

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
