"""The README's reference-run section (issue 25): it equals what the committed records give, the
headline figure is redrawn from them byte for byte, and each claim answers yes / no / tie /
pending from the numbers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import reference
from stamplib.report import reference_run

REPO = Path(__file__).resolve().parents[2]
COMMITTED = ResultsStore(REPO / "results" / "reference")


def test_the_readme_shows_exactly_what_the_committed_records_give() -> None:
    readme = (REPO / "README.md").read_text()
    expected = reference_run.readme_block(COMMITTED)
    advice = ("differs from the committed records: run `python -m stamplib reference readme --write` and commit "
              f"README.md, {reference_run.DETAILS} and figures/reference_run.png")
    assert reference_run.current_block(readme) == expected, f"README.md's reference-run section {advice}"
    assert (REPO / reference_run.DETAILS).read_text() == reference_run.details_page(COMMITTED), \
        f"{reference_run.DETAILS} {advice}"


def test_the_headline_figure_is_drawn_from_the_committed_records(tmp_path: Path) -> None:
    png, _ = reference_run.write_figure(COMMITTED, tmp_path)
    assert png.read_bytes() == (REPO / "figures" / "reference_run.png").read_bytes(), (
        "figures/reference_run.png is stale: run `python -m stamplib reference readme --write`"
    )


def test_every_committed_record_names_the_checksum_of_its_shared_model() -> None:
    """The records' provenance is the SHA-256 that shared/models' sidecars vouch for (the sidecar
    files are read only where this checkout has them)."""
    expected = {"ResNet18_10_jpeg": "e64c2f32f6ce63f7741f7f5d046b1dd70169aa99cd2bfa8c4724df34682b9de7",
                "ResNet18_8_jpeg": "57eba0b52d0749f8efb27ab3c6af743a6fffdc192193353bfef4279e8f014149"}
    records = COMMITTED.records()
    for record in records:
        checkpoint = record["provenance"]["checkpoint"]
        assert checkpoint["sha256"] == expected[checkpoint["name"]], record["key"]
        assert record["provenance"]["git"]["dirty"] is False, record["key"]
    keys = {s.key() for s in reference.specs("reference") + reference.extra_specs("reference")}
    assert {r["key"] for r in records} <= keys  # nothing in the store that is not a reference cell


def _tables(a: dict[str, tuple[float, float, float]], b: dict[str, float] | None = None,
            c: dict[str, float] | None = None) -> dict[str, pd.DataFrame]:
    """Setting tables with the paper's numbers equal to ours (enough for the verdicts)."""
    def outlier_table(rows: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
        out = []
        for method, (acc, auroc, h) in rows.items():
            row = {"method": method}
            for name, value in (("ACC", acc), ("AUROC", auroc), ("H", h)):
                row.update({f"{name} paper": value, f"{name} ours": value, f"{name} Δ": 0.0})
            out.append(row)
        return pd.DataFrame(out)

    closed = pd.DataFrame([{"method": m, "ACC paper": v, "ACC ours": v, "ACC Δ": 0.0} for m, v in (c or {}).items()])
    return {"a": outlier_table(a), "b": outlier_table({m: (0, 0, h) for m, h in (b or {}).items()}), "c": closed}


def _verdicts(tables: dict[str, pd.DataFrame]) -> dict[str, str]:
    return {v.claim: v.answer for v in reference_run.claims(tables)}


def test_claims_answer_yes_no_tie_or_pending_from_the_numbers() -> None:
    others = {m: (70.0, 70.0, 70.0) for m in reference_run.PAPER_METHODS if m != "stamp"}
    best_h = "STAMP has the best H-score of the ten methods with Noise outliers"
    tent_up = "Entropy minimisation raises accuracy: Tent above BN Stats"
    tent_below = "Tent's AUROC falls below the source model's"
    assert _verdicts(_tables({**others, "stamp": (71.0, 80.0, 75.0)}))[best_h] == "yes"
    assert _verdicts(_tables({**others, "stamp": (71.0, 80.0, 70.3)}))[best_h] == "tie"
    assert _verdicts(_tables({**others, "stamp": (71.0, 80.0, 60.0)}))[best_h] == "no"
    assert _verdicts(_tables(others))[best_h] == "pending"  # STAMP's record is missing

    rows = {**others, "stamp": (71.0, 80.0, 75.0), "source": (50.0, 60.0, 55.0), "bn_stats": (72.0, 75.0, 73.0),
            "tent": (75.0, 40.0, 52.0)}
    verdicts = _verdicts(_tables(rows))
    assert verdicts[tent_up] == "yes" and verdicts[tent_below] == "yes"
    rows["tent"] = (72.2, 65.0, 68.0)
    verdicts = _verdicts(_tables(rows))
    assert verdicts[tent_up] == "tie" and verdicts[tent_below] == "no"


def test_the_closed_set_claim_and_the_both_settings_claim() -> None:
    others = {m: (70.0, 70.0, 70.0) for m in reference_run.PAPER_METHODS if m != "stamp"}
    both = "STAMP improves the H-score of BN Stats (the statistics-only baseline) in both outlier settings"
    closed = "STAMP has the best closed-set accuracy"
    b = {m: 60.0 for m in reference_run.PAPER_METHODS}
    verdicts = _verdicts(_tables({**others, "stamp": (71.0, 80.0, 75.0)}, b={**b, "stamp": 59.0},
                                 c={**{m: 80.0 for m in reference_run.PAPER_METHODS}, "stamp": 82.0}))
    assert verdicts[both] == "no" and verdicts[closed] == "yes"


def test_the_section_is_replaced_between_its_markers_only() -> None:
    text = f"intro\n{reference_run.BEGIN}\nold\n{reference_run.END}\noutro\n"
    new = reference_run.replace_block(text, f"{reference_run.BEGIN}\nnew\n{reference_run.END}")
    assert new == f"intro\n{reference_run.BEGIN}\nnew\n{reference_run.END}\noutro\n"
    with pytest.raises(ValueError, match="no reference-run section"):
        reference_run.replace_block("no markers", "x")


def _fake_record(spec, acc: float, auroc: float) -> dict:
    h = 2 * acc * auroc / (acc + auroc)
    row = {"acc": acc, "auroc": auroc, "h": h, "collapsed": False, "collapse_reason": None, "seconds": 60.0,
           "n_id": 2000, "n_outliers": 500}
    per = {c: dict(row) for c in spec.corruptions}
    if spec.stream.realistic:
        for c in per:
            per[c].update(relative_speed=3, adapted_batches=14, batches=40)
        realistic = {"relative_speed": 3, "adapted_batches": 42, "batches": 120}
        return {"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per, "seconds": 60.0 * len(per),
                "mean": {"acc": acc - 5, "auroc": auroc, "h": h - 5, "collapsed": []}, "realistic": realistic,
                "provenance": {"checkpoint": {"name": "ResNet18_10_jpeg", "sha256": "ab" * 32,
                                              "clean_test_accuracy": 0.876}}}
    return {"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per, "seconds": 60.0 * len(per),
            "mean": {"acc": acc, "auroc": auroc, "h": h, "collapsed": []},
            "provenance": {"checkpoint": {"name": "ResNet18_10_jpeg", "sha256": "ab" * 32,
                                          "clean_test_accuracy": 0.876}}}


def test_a_complete_store_renders_every_setting_the_seeds_and_the_optional_cells(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    cells = reference.specs("reference") + reference.extra_specs("reference")
    for i, spec in enumerate(cells):
        best = spec.method == "stamp" and not spec.overrides
        store.put(_fake_record(spec, 80.0 + spec.seed * 0.2 if best else 70.0 + 0.01 * i, 85.0 if best else 60.0))
    block = reference_run.readme_block(store)
    details = reference_run.details_page(store)
    assert "**44 of 44 cells**" in block and "## Optional cells (`reference compute --extras`): 109 of 109" in details
    assert "| STAMP | 80.1 | 82.4 | +2.3 |" in block  # the headline table: (a) H paper | ours | Δ first
    assert "`ResNet18_10_jpeg` 87.6 % clean accuracy" in block
    assert "STAMP over seeds 0, 1, 2 in (a), ACC / AUROC / H: 80.0 / 85.0 / 82.4, 80.2 / 85.0 / 82.5" in block
    assert "largest spread of a corruption's ACC or AUROC 0.40 pt" in block
    assert "| STAMP has the best H-score of the ten methods with Noise outliers | Table 1a | **yes** |" in block
    assert "*(a) over all 15 corruptions*" in details and "| K=1 |" in details and "| S.A.+D.S.+RBM |" in details
    assert "(no record yet)" not in details
    assert "*The realistic online protocol in (a)" in details and "best H under the paper's protocol STAMP" in details
    assert "| UniEnt | — | 64.7 | — |" in block  # the newer methods: ours only
    assert "Kendall's τ_b (1 = the same order): (a) " in block and "(c) " in block
    assert "| Source | 62.3 | 64.6 | +2.3 | 60.0 | 64.7 | +4.7 | 39.1 | 70.3 | +31.2 |" in block  # (c): the paper's
    # mean over our three corruptions (28.7, 57.3, 31.4), not its 15-corruption average (57.3)
    assert "(a) 0.8 h, (b) 0.7 h, (c) 0.7 h" in details  # 16 and 14 cells × 3 corruptions × 60 s


def test_the_machines_line_names_each_device_and_torch_with_its_cells_and_hours() -> None:
    records = [{"device": "cpu", "versions": {"torch": "2.14.1"}, "seconds": 3600.0},
               {"device": "cpu", "versions": {"torch": "2.14.1"}, "seconds": 1800.0},
               {"device": "cuda:0", "versions": {"torch": "2.11.0"}, "seconds": 36.0}]
    assert reference_run.machines_line(records) == (
        "Computed on cpu with torch 2.14.1 (2 cells, 1.50 h); cuda with torch 2.11.0 (1 cell, 0.01 h).")
    records.append({"device": "cuda", "versions": {"torch": "2.11.0"}, "seconds": 36.0})
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


def _h_record(spec, h: float) -> dict:
    return {"key": spec.key(), "spec": spec.to_dict(), "mean": {"acc": h, "auroc": h, "h": h}}


def test_the_weight_and_outlier_share_claims_read_stamps_variants() -> None:
    weights = reference_run._weight_specs()
    records = {s.key(): _h_record(s, h) for s, h in zip(weights.values(), (80.0, 78.0, 77.0))}
    [weight, steady, least] = reference_run.record_claims(records)
    assert (weight.answer, weight.ours) == ("yes", "H adaptive 80.0, H static 78.0, H eata 77.0")
    assert steady.answer == "pending" and least.answer == "pending"
    records[weights["static"].key()] = _h_record(weights["static"], 80.3)
    assert reference_run.record_claims(records)[0].answer == "tie"

    shares = reference_run._ratio_specs(reference.RATIO_BASELINES + ",stamp")
    for method, by_ratio in shares.items():
        for ratio, spec in by_ratio.items():  # STAMP loses 2 points from 5 % to 50 %, the others 10
            records[spec.key()] = _h_record(spec, (80.0 if method == "stamp" else 70.0)
                                            - (2.0 if method == "stamp" else 10.0) * ratio / 0.5)
    [_, steady, least] = reference_run.record_claims(records)
    assert steady.answer == "yes" and steady.ours.endswith("range 1.8")
    assert least.answer == "yes" and "STAMP 1.8" in least.ours
    del records[shares["stamp"][0.1].key()]
    assert reference_run.record_claims(records)[1].answer == "pending"
    records[shares["stamp"][0.05].key()] = _h_record(shares["stamp"][0.05], 60.0)  # range 19.2 already: no
    steady = reference_run.record_claims(records)[1]
    assert steady.answer == "no" and steady.ours.endswith("range 19.2 over 4 of 5 shares")
