"""The README's reference-run section (issue 25): it equals what the committed records give, the
headline figure is redrawn from them byte for byte, and each claim answers yes / no / tie /
pending from the numbers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import reference
from stamplib.methods import PAPER_ORDER
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
    keys = {s.key() for s in reference.specs() + reference.extra_specs()}
    assert {r["key"] for r in records} <= keys  # nothing in the store that is not a reference cell


Row = tuple[float, float, float]


def _tables(a: dict[str, Row | dict[int, Row]], b: dict[str, float | dict[int, float]] | None = None,
            c: dict[str, float] | None = None) -> dict[str, pd.DataFrame]:
    """Setting tables with the paper's numbers equal to ours (enough for the verdicts). A method's
    numbers are one seed's (seed 0), or ``{seed: numbers}``."""
    def outlier_table(rows: dict[str, Row | dict[int, Row]]) -> pd.DataFrame:
        out = []
        for method, found in rows.items():
            per_seed = found if isinstance(found, dict) else {0: found}
            row = {"method": method}
            for k, name in enumerate(("ACC", "AUROC", "H")):
                values = {seed: numbers[k] for seed, numbers in per_seed.items()}
                mean = sum(values.values()) / len(values)
                row.update({f"{name} paper": mean, f"{name} ours": mean, f"{name} Δ": 0.0, f"{name} seeds": values,
                            f"{name} min": min(values.values()), f"{name} max": max(values.values())})
            out.append(row)
        return pd.DataFrame(out)

    def h_only(h: float | dict[int, float]) -> Row | dict[int, Row]:
        return {s: (0.0, 0.0, v) for s, v in h.items()} if isinstance(h, dict) else (0.0, 0.0, h)

    closed = pd.DataFrame([{"method": m, "ACC paper": v, "ACC ours": v, "ACC Δ": 0.0} for m, v in (c or {}).items()])
    return {"a": outlier_table(a), "b": outlier_table({m: h_only(h) for m, h in (b or {}).items()}), "c": closed}


def _verdicts(tables: dict[str, pd.DataFrame]) -> dict[str, str]:
    return {v.claim: v.answer for v in reference_run.claims(tables)}


BEST_H = "STAMP has the best H-score of the ten methods with Noise outliers"


def test_claims_answer_one_seed_with_its_reading_or_pending_from_a_single_seed() -> None:
    others = {m: (70.0, 70.0, 70.0) for m in PAPER_ORDER if m != "stamp"}
    tent_up = "Entropy minimisation raises accuracy: Tent above BN Stats"
    tent_below = "Tent's AUROC falls below the source model's"
    assert _verdicts(_tables({**others, "stamp": (71.0, 80.0, 75.0)}))[BEST_H] == "one seed (seed 0: yes)"
    assert _verdicts(_tables({**others, "stamp": (71.0, 80.0, 70.3)}))[BEST_H] == "one seed (seed 0: tie)"
    assert _verdicts(_tables({**others, "stamp": (71.0, 80.0, 60.0)}))[BEST_H] == "one seed (seed 0: no)"
    assert _verdicts(_tables(others))[BEST_H] == "pending"  # STAMP's record is missing

    rows = {**others, "stamp": (71.0, 80.0, 75.0), "source": (50.0, 60.0, 55.0), "bn_stats": (72.0, 75.0, 73.0),
            "tent": (75.0, 40.0, 52.0)}
    verdicts = _verdicts(_tables(rows))
    assert verdicts[tent_up] == "one seed (seed 0: yes)" and verdicts[tent_below] == "one seed (seed 0: yes)"
    rows["tent"] = (72.2, 65.0, 68.0)
    verdicts = _verdicts(_tables(rows))
    assert verdicts[tent_up] == "one seed (seed 0: tie)" and verdicts[tent_below] == "one seed (seed 0: no)"


def test_claims_over_seeds_are_decided_seed_by_seed() -> None:
    """yes only if STAMP beats the best other under every seed, no only if it loses under every
    seed, within the seed spread otherwise; a method without a seed leaves it out of the pairs."""
    others = {m: {0: (70.0, 70.0, 70.0), 1: (70.0, 70.0, 72.0), 2: (70.0, 70.0, 71.0)}
              for m in PAPER_ORDER if m != "stamp"}
    ahead = {0: (71.0, 80.0, 70.5), 1: (71.0, 80.0, 72.1), 2: (71.0, 80.0, 75.0)}  # by 0.5, 0.1 and 4 points
    assert _verdicts(_tables({**others, "stamp": ahead}))[BEST_H] == "yes"
    behind = {0: (71.0, 80.0, 69.0), 1: (71.0, 80.0, 60.0), 2: (71.0, 80.0, 70.9)}
    assert _verdicts(_tables({**others, "stamp": behind}))[BEST_H] == "no"
    # the mean (72.7) is above every other's (71.0), but under seed 1 STAMP loses: not decided
    mixed = {0: (71.0, 80.0, 75.0), 1: (71.0, 80.0, 71.0), 2: (71.0, 80.0, 72.0)}
    verdict = next(v for v in reference_run.claims(_tables({**others, "stamp": mixed})) if v.claim == BEST_H)
    assert verdict.answer == "within the seed spread"
    assert verdict.ours == ("STAMP 72.7 (71.0–75.0), best other Source 71.0 (70.0–72.0) (seeds 0–2; holds under "
                            "seeds 0 and 2, fails under seed 1)")
    # a tie at the tables' precision is neither a win nor a loss
    even = {0: (71.0, 80.0, 75.0), 1: (71.0, 80.0, 72.04), 2: (71.0, 80.0, 75.0)}
    assert _verdicts(_tables({**others, "stamp": even}))[BEST_H] == "within the seed spread"
    # CoTTA with seed 0 only: the ten share seed 0 alone
    lone = {**others, "stamp": ahead, "cotta": {0: (70.0, 70.0, 70.0)}}
    assert _verdicts(_tables(lone))[BEST_H] == "one seed (seed 0: tie)"


def test_the_closed_set_claim_and_the_both_settings_claim() -> None:
    others = {m: (70.0, 70.0, 70.0) for m in PAPER_ORDER if m != "stamp"}
    both = "STAMP improves the H-score of BN Stats (the statistics-only baseline) in both outlier settings"
    closed = "STAMP has the best closed-set accuracy"
    b = {m: 60.0 for m in PAPER_ORDER}
    verdicts = _verdicts(_tables({**others, "stamp": (71.0, 80.0, 75.0)}, b={**b, "stamp": 59.0},
                                 c={**{m: 80.0 for m in PAPER_ORDER}, "stamp": 82.0}))
    assert verdicts[both] == "one seed (seed 0: no)" and verdicts[closed] == "one seed (seed 0: yes)"
    # (a) over three seeds, (b) over one: a part that fails under each of its three seeds decides no alone
    seeded = {m: {s: (70.0, 70.0, 70.0) for s in (0, 1, 2)} for m in PAPER_ORDER}
    seeded["stamp"] = {s: (70.0, 70.0, 65.0) for s in (0, 1, 2)}
    assert _verdicts(_tables(seeded, b={**b, "stamp": 70.0}))[both] == "no"
    seeded["stamp"] = {s: (70.0, 70.0, 75.0) for s in (0, 1, 2)}
    assert _verdicts(_tables(seeded, b={**b, "stamp": 70.0}))[both] == "one seed (seed 0: yes)"
    b_seeded = {m: {s: 60.0 for s in (0, 1, 2)} for m in PAPER_ORDER}
    b_seeded["stamp"] = {0: 61.0, 1: 61.0, 2: 59.0}
    assert _verdicts(_tables(seeded, b=b_seeded))[both] == "within the seed spread"


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
    cells = reference.specs() + reference.extra_specs()
    for i, spec in enumerate(cells):
        best = spec.method == "stamp" and not spec.overrides
        store.put(_fake_record(spec, 80.0 + spec.seed * 0.2 if best else 70.0 + 0.01 * i, 85.0 if best else 60.0))
    block = reference_run.readme_block(store)
    details = reference_run.details_page(store)
    assert "**44 of 44 cells**" in block and "## Optional cells (`reference compute --extras`): 109 of 109" in details
    assert "| STAMP | 80.1 | 82.5 (82.4–82.6) | +2.4 |" in block  # the headline table: (a) H paper | ours | Δ first
    assert "`ResNet18_10_jpeg` 87.6 % clean accuracy" in block
    assert "STAMP over seeds 0, 1, 2 in (a), ACC / AUROC / H: 80.0 / 85.0 / 82.4, 80.2 / 85.0 / 82.5" in block
    assert "largest spread of a corruption's ACC or AUROC 0.40 pt" in block
    assert "| STAMP has the best H-score of the ten methods with Noise outliers | Table 1a | **yes** |" in block
    assert "Seeds: in (a) 10 of the paper's ten methods have seeds 0–2" in block
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
    assert (weight.answer, weight.ours) == ("one seed (seed 0: yes)", "H adaptive 80.0, H static 78.0, H eata 77.0 "
                                                                      "(seed 0)")
    assert steady.answer == "pending" and least.answer == "pending"
    records[weights["static"].key()] = _h_record(weights["static"], 80.3)
    assert reference_run.record_claims(records)[0].answer == "one seed (seed 0: tie)"
    # the adaptive weight over three seeds, the others over seed 0 only: still one seed
    for seed, h in ((1, 70.0), (2, 90.0)):
        records[weights["adaptive"].with_(seed=seed).key()] = _h_record(weights["adaptive"].with_(seed=seed), h)
    assert reference_run.record_claims(records)[0].answer == "one seed (seed 0: tie)"
    for seed in (1, 2):  # the static weight wins under seed 1, loses under seed 2
        for name, h in (("static", 75.0), ("eata", 60.0)):
            spec = weights[name].with_(seed=seed)
            records[spec.key()] = _h_record(spec, h)
    assert reference_run.record_claims(records)[0].answer == "within the seed spread"

    records = {}
    shares = reference_run._ratio_specs(reference.RATIO_BASELINES + ",stamp")
    for method, by_ratio in shares.items():
        for ratio, spec in by_ratio.items():  # STAMP loses 2 points from 5 % to 50 %, the others 10
            records[spec.key()] = _h_record(spec, (80.0 if method == "stamp" else 70.0)
                                            - (2.0 if method == "stamp" else 10.0) * ratio / 0.5)
    [_, steady, least] = reference_run.record_claims(records)
    assert steady.answer == "one seed (seed 0: yes)" and steady.ours.endswith("range 1.8 (seed 0)")
    assert least.answer == "one seed (seed 0: yes)" and "STAMP 1.8" in least.ours
    del records[shares["stamp"][0.1].key()]
    assert reference_run.record_claims(records)[1].answer == "pending"
    records[shares["stamp"][0.05].key()] = _h_record(shares["stamp"][0.05], 60.0)  # range 19.2 already: no
    steady = reference_run.record_claims(records)[1]
    assert steady.answer == "one seed (seed 0: no)" and steady.ours.endswith("range 19.2 (seed 0)")
