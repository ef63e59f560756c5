"""The reference run's page, docs/reference_run.md: it equals what the committed records give, the
headline figure is redrawn from them byte for byte (the claims' verdicts are the ledger's:
tests/evidence/test_claims.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import ledger as claims
from stamplib.evidence import pages
from stamplib.evidence import reference_page as reference_run
from stamplib.experiments import reference

REPO = Path(__file__).resolve().parents[2]
COMMITTED = ResultsStore(REPO / "results" / "reference")


def test_the_page_shows_exactly_what_the_committed_records_give() -> None:
    assert (REPO / reference_run.PAGE).read_text() == reference_run.page(COMMITTED) + "\n", (
        f"{reference_run.PAGE} differs from the committed records: run `{pages.COMMAND}` and commit it with "
        "figures/reference_run.png")


def test_the_headline_figure_is_drawn_from_the_committed_records(tmp_path: Path) -> None:
    png, _ = reference_run.write_figure(COMMITTED, tmp_path)
    assert png.read_bytes() == (REPO / "figures" / "reference_run.png").read_bytes(), (
        f"figures/reference_run.png is stale: run `{pages.COMMAND}`"
    )


def test_every_committed_record_names_the_checksum_of_its_shared_model() -> None:
    """The records' provenance is the SHA-256 that shared/models' sidecars vouch for (the sidecar
    files are read only where this checkout has them)."""
    expected = {"ResNet18_10_jpeg": "e64c2f32f6ce63f7741f7f5d046b1dd70169aa99cd2bfa8c4724df34682b9de7",
                "ResNet18_8_jpeg": "57eba0b52d0749f8efb27ab3c6af743a6fffdc192193353bfef4279e8f014149"}
    records = COMMITTED.records()
    for record in records:
        checkpoint = record.provenance.checkpoint
        assert checkpoint.sha256 == expected[checkpoint.name], record.key
        assert record.provenance.git["dirty"] is False, record.key
    keys = {s.key() for s in reference.specs() + reference.extra_specs() + claims.ledger_cells(claims.REFERENCE)
            + claims.ledger_cells(claims.REFERENCE_ALL) + claims.table6_rows(claims.REFERENCE)}
    assert {r.key for r in records} <= keys  # nothing in the store that is not a reference cell or a claim's


def _fake_record(spec, acc: float, auroc: float) -> Record:
    h = 2 * acc * auroc / (acc + auroc)
    row = {"acc": acc, "auroc": auroc, "h": h, "collapsed": False, "collapse_reason": None, "seconds": 60.0,
           "n_id": 2000, "n_outliers": 500}
    per = {c: dict(row) for c in spec.corruptions}
    if spec.stream.realistic:
        for c in per:  # the realistic protocol costs 5 points here; the mean follows from the rows
            per[c].update(acc=acc - 5, h=h - 5, relative_speed=3, adapted_batches=14, batches=40)
        realistic = {"relative_speed": 3, "measured": True, "adapted_batches": 42, "batches": 120}
        return Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
                                 "seconds": 60.0 * len(per), "mean": {"acc": acc - 5, "auroc": auroc, "h": h - 5,
                                                                      "collapsed": []},
                                 "realistic": realistic, "provenance": _PROVENANCE})
    return Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per, "seconds": 60.0 * len(per),
                             "mean": {"acc": acc, "auroc": auroc, "h": h, "collapsed": []}, "provenance": _PROVENANCE})


_PROVENANCE = {"checkpoint": {"name": "ResNet18_10_jpeg", "sha256": "ab" * 32, "clean_test_accuracy": 0.876},
               "data": {}, "git": {}, "command": "made up"}


def test_a_complete_store_renders_every_setting_the_seeds_and_the_optional_cells(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    cells = reference.specs() + reference.extra_specs()
    for i, spec in enumerate(cells):
        best = spec.method == "stamp" and not spec.overrides
        store.put(_fake_record(spec, 80.0 + spec.seed * 0.2 if best else 70.0 + 0.01 * i, 85.0 if best else 60.0))
    block = details = reference_run.page(store)
    assert "**44 of 44 cells**" in block and "## Optional cells (`reference compute --extras`): 109 of 109" in details
    assert "| STAMP | 80.1 | 82.5 (82.4–82.6) | +2.4 |" in block  # the headline table: (a) H paper | ours | Δ first
    assert "`ResNet18_10_jpeg` 87.6 % clean accuracy" in block
    assert "STAMP over seeds 0, 1, 2 in (a), ACC / AUROC / H: 80.0 / 85.0 / 82.4, 80.2 / 85.0 / 82.5" in block
    assert "largest spread of a corruption's ACC or AUROC 0.40 pt" in block
    assert "| STAMP has the best H-score of the ten methods with Noise outliers | Table 1a | **yes** (3 of 3 seeds hold" in block
    assert "| The full STAMP (S.A.+D.S.+RBM+S.W.) beats every ablated row (paper: CIFAR100-C + SVHN-C; here: " \
        "CIFAR-10 + Noise) | Table 5 | **1 of 3 seeds" in block  # the optional cells hold seed 0 of the ablation
    assert "missing: STAMP entropy min. seeds 1 and 2" in block
    assert "Seeds: in (a) all ten of the paper's methods have seeds 0–2" in block
    assert "*(a) over all 15 corruptions*" in details and "| K=1 |" in details and "| S.A.+D.S.+RBM |" in details
    assert "(no record yet)" not in details
    assert "*The realistic online protocol in (a)" in details and "best H under the paper's protocol STAMP" in details
    assert "| UniEnt | — | 64.7 | — |" in block  # the newer methods: ours only
    assert "Kendall's τ_b (1 = the same order; per seed that all ten have, with its range): (a) " in block
    assert "over H (seeds 0–2)" in block and "over ACC (seed 0)" in block
    assert "| Source | 62.3 | 65.0 (64.6–65.2) | +2.7 | 60.0 | 64.7 | +4.7 | 39.1 | 70.3 | +31.2 |" in block  # (c): the paper's
    # mean over our three corruptions (28.7, 57.3, 31.4), not its 15-corruption average (57.3)
    assert "(a) 0.8 h, (b) 0.7 h, (c) 0.7 h" in details  # 16 and 14 cells × 3 corruptions × 60 s


def test_the_machines_line_names_each_device_and_torch_with_its_cells_and_hours() -> None:
    spec = RunSpec(method="source", dataset="digits", profile="smoke")
    ran = [{"device": "cpu", "versions": {"torch": "2.14.1"}, "seconds": 3600.0},
           {"device": "cpu", "versions": {"torch": "2.14.1"}, "seconds": 1800.0},
           {"device": "cuda:0", "versions": {"torch": "2.11.0"}, "seconds": 36.0},
           {"device": "cuda", "versions": {"torch": "2.11.0"}, "seconds": 36.0}]
    records = [Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "mean": {}, **r}) for r in ran]
    assert reference_run.machines_line(records[:3]) == (
        "Computed on cpu with torch 2.14.1 (2 cells, 1.50 h); cuda with torch 2.11.0 (1 cell, 0.01 h).")
    assert reference_run.machines_line(records).endswith("cuda with torch 2.11.0 (2 cells, 0.02 h).")


def test_no_committed_record_was_made_under_other_hyperparameters() -> None:
    """A changed config default makes a record stale (the store then treats it as absent); the
    stale file must go, so that `reference compute` writes its replacement and nothing in
    results/reference shows numbers the code no longer gives."""
    import json

    from stamplib.evaluation.spec import RunSpec
    from stamplib.evaluation.store import current_config

    stale = []
    for path in sorted((REPO / "results" / "reference").glob("*.json")):
        record = json.loads(path.read_text())
        if "spec" in record and record.get("config") != current_config(RunSpec.from_dict(record["spec"])):
            stale.append(path.name)
    assert not stale, f"stale records (recompute them with `python -m stamplib reference compute`): {stale}"


def test_the_readme_points_at_the_claims_compute_only_while_a_claim_misses_cells() -> None:
    decided = [SimpleNamespace(missing=()), SimpleNamespace(missing=())]
    waiting = [SimpleNamespace(missing=()), SimpleNamespace(missing=(("CoTTA (b)", 1),))]
    assert reference_run._missing_cells_sentence(decided) == ""
    assert "reference compute --cells claims" in reference_run._missing_cells_sentence(waiting)
