"""The ledger of the paper's claims: claims written once as data, judged on made-up records — yes,
no, within the noise, k of n seeds with the missing cells named, needs data — with paired
differences and an interval; the committed page and figure are what the committed records give
(tests/report/test_claims_rules.py: ties, counts, the interval's coverage, the CPU rule)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from stamplib.evaluation.record import Record
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import judge as J
from stamplib.evidence import ledger as C
from stamplib.experiments import plans
from stamplib.methods import PAPER_ORDER, TABLE_ORDER

REPO = Path(__file__).resolve().parents[2]
BENCH = C.REFERENCE  # the quick profile on real images, seeds 0–2: planning reads no file
T1 = plans.TABLE1.notebook


def _record(spec, value: float, per_corruption: Mapping[str, float] | None = None, seconds: float = 60.0) -> Record:
    per = {c: {"acc": v, "auroc": v, "h": v} for c, v in
           (per_corruption or {c: value for c in spec.corruptions}).items()}
    mean = float(np.mean([row["h"] for row in per.values()]))
    return Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
                             "mean": {"acc": mean, "auroc": mean, "h": mean}, "seconds": seconds, "device": "cpu"})


def _records(values: Mapping[C.Arm, Mapping[int, float]], bench: C.Benchmark = BENCH) -> dict[str, Record]:
    out = {}
    for arm, by_seed in values.items():
        for seed, value in by_seed.items():
            spec = C.spec(arm, bench, seed)
            out[spec.key()] = _record(spec, value)
    return out


TENT, BN, SOURCE = C.Arm(T1, "tent"), C.Arm(T1, "bn_stats"), C.Arm(T1, "source")
ABOVE = C.Claim("tent_above_bn", "Tent above BN Stats", "Table 1a", "acc", (C.Difference(TENT, BN),), "72.9 → 77.4",
                quote="Table 1a")


def test_yes_no_and_within_the_noise_are_decided_seed_by_seed() -> None:
    held = J.judge(ABOVE, BENCH, _records({TENT: {0: 75, 1: 76, 2: 77}, BN: {0: 70, 1: 70, 2: 70}}))
    assert held.answer == "yes" and held.complete and held.margins == {0: 5.0, 1: 6.0, 2: 7.0}
    assert held.difference_text().startswith("+6.0 (+5.0 to +7.0), 95 % CI ")
    low, high = held.interval  # a t-interval on two degrees of freedom: 6 ± 4.303 · 1 / √3
    assert (low, high) == pytest.approx((6.0 - 4.303 / 3 ** 0.5, 6.0 + 4.303 / 3 ** 0.5), abs=1e-3)
    failed = J.judge(ABOVE, BENCH, _records({TENT: {0: 65, 1: 66, 2: 67}, BN: {0: 70, 1: 70, 2: 70}}))
    assert failed.answer == "no" and failed.verdict == "no"
    mixed = J.judge(ABOVE, BENCH, _records({TENT: {0: 75, 1: 66, 2: 70.02}, BN: {0: 70, 1: 70, 2: 70}}))
    assert mixed.answer == "within the noise"
    assert mixed.decision.held == (0,) and mixed.decision.failed == (1,)  # seed 2's +0.02 rounds to a tie


def test_missing_seeds_say_k_of_n_and_name_the_missing_cells() -> None:
    two = J.judge(ABOVE, BENCH, _records({TENT: {0: 75, 1: 76, 2: 77}, BN: {0: 70, 1: 70}}))
    # Both seeds hold, but a t-interval on one degree of freedom reaches below zero.
    assert two.answer == "2 of 3 seeds (seeds 0 and 1: within the noise)" and not two.complete
    assert two.missing == ((BN, 2),) and two.missing_text() == "BN Stats (a) seed 2"
    assert [s.seed for s in two.missing_specs] == [2]
    assert "missing: BN Stats (a) seed 2" in J.ours_text(two)
    one = J.judge(ABOVE, BENCH, _records({TENT: {0: 75}, BN: {0: 70}}))
    assert one.answer == "1 of 3 seeds (seed 0: yes)" and one.interval is None
    assert "one seed" not in one.answer
    assert J.judge(ABOVE, BENCH, _records({TENT: {0: 70.3}, BN: {0: 70}})).answer == "1 of 3 seeds (seed 0: tie)"
    pending = J.judge(ABOVE, BENCH, _records({TENT: {0: 75}}))
    assert pending.answer == "pending" and pending.missing_text() == "BN Stats (a) seeds 0–2; Tent (a) seeds 1 and 2"


def test_a_claim_no_cifar10_scale_can_test_needs_data() -> None:
    claim = C.BY_KEY["cifar100_best_h"]
    verdict = J.judge(claim, BENCH, {})
    assert verdict.answer == "needs data" and verdict.needs_data and not verdict.missing
    assert C.cells(claim, BENCH) == [] and C.cells(claim, C.BUILTIN) == []
    assert J.ours_text(verdict) == "needs CIFAR100-C with Noise, SVHN-C, LSUN-C and TinyImageNet-C"
    full = C.full_benchmark((0,))
    assert len(C.cells(claim, full)) == 4 * len(PAPER_ORDER)  # the paper's ten, four outlier sets


def test_a_lead_is_over_the_best_other_under_each_seed() -> None:
    claim = C.BY_KEY["a_best_h"]
    values = {a: {0: 50.0, 1: 50.0, 2: 50.0} for a in claim.arms}
    values[C.Arm(T1, "stamp")] = {0: 80.0, 1: 70.0, 2: 75.0}
    values[C.Arm(T1, "cotta")] = {0: 78.0, 1: 72.0, 2: 50.0}
    values[C.Arm(T1, "rotta")] = {0: 50.0, 1: 50.0, 2: 74.0}
    verdict = J.judge(claim, BENCH, _records(values))
    assert verdict.margins == {0: 2.0, 1: -2.0, 2: 1.0} and verdict.answer == "within the noise"
    assert "best other CoTTA (a) 66.7 (50.0–78.0)" in J.ours_text(verdict)  # the best by its mean


def test_every_part_must_hold_and_a_part_failing_under_all_its_seeds_decides_no() -> None:
    claim = C.BY_KEY["stamp_over_bn_stats"]
    split = {"dataset": "cifar10_c_8_2", "outliers": "heldout_classes"}
    stamp_b, bn_b = C.Arm(plans.CLASS_SPLIT.notebook, "stamp", **split), C.Arm(plans.CLASS_SPLIT.notebook,
                                                                               "bn_stats", **split)
    a = {C.Arm(T1, "stamp"): {0: 80, 1: 81, 2: 82}, C.Arm(T1, "bn_stats"): {0: 70, 1: 70, 2: 70}}
    only_seed_0 = J.judge(claim, BENCH, _records({**a, stamp_b: {0: 75}, bn_b: {0: 70}}))
    assert only_seed_0.answer == "1 of 3 seeds (seed 0: yes)"
    assert only_seed_0.missing_text() == "STAMP (b) seeds 1 and 2; BN Stats (b) seeds 1 and 2"
    a_fails = {C.Arm(T1, "stamp"): {0: 60, 1: 61, 2: 62}, C.Arm(T1, "bn_stats"): {0: 70, 1: 70, 2: 70}}
    assert J.judge(claim, BENCH, _records({**a_fails, stamp_b: {0: 75}, bn_b: {0: 70}})).verdict == "no"
    everything = J.judge(claim, BENCH, _records({**a, stamp_b: {0: 75, 1: 69, 2: 75}, bn_b: {0: 70, 1: 70, 2: 70}}))
    assert everything.answer == "within the noise" and everything.margins[1] == -1.0


def test_the_steadiness_of_table_6() -> None:
    steady = C.BY_KEY["ratio_steady"]
    values = {}
    for arm in steady.arms:
        share = float(arm.variant.removeprefix("ratio="))
        values[arm] = {0: 80.0 - 2.0 * share / 0.5}  # STAMP loses 2 points from 5 % to 50 %
    assert J.judge(steady, BENCH, _records(values)).answer == "1 of 3 seeds (seed 0: yes)"
    values[C.Arm(plans.RATIOS.notebook, "stamp", "ratio=0.05", "cifar100_c", "svhn", C._RATIO_METHODS)] = {0: 60.0}
    assert J.judge(steady, BENCH, _records(values)).verdict == "no"


def test_the_interval_is_paired_and_repeatable() -> None:
    """Paired arms whose seeds differ per corruption: the interval covers the mean margin and is
    repeatable; one value under every seed gives a zero-width interval."""
    corruptions = C.spec(TENT, BENCH, 0).corruptions
    records = {}
    rng = np.random.default_rng(3)
    for seed in (0, 1, 2):
        for arm, base in ((TENT, 75.0), (BN, 70.0)):
            spec = C.spec(arm, BENCH, seed)
            records[spec.key()] = _record(spec, 0.0, {c: base + rng.normal(0, 2) for c in corruptions})
    first, again = J.judge(ABOVE, BENCH, records), J.judge(ABOVE, BENCH, records)
    assert first.interval == again.interval
    mean = float(np.mean(list(first.margins.values())))
    assert first.interval[0] <= mean <= first.interval[1]
    flat = J.judge(ABOVE, BENCH, _records({TENT: {0: 75, 1: 75, 2: 75}, BN: {0: 70, 1: 70, 2: 70}}))
    assert flat.interval == (5.0, 5.0)


def test_the_ledger_plans_its_cells_on_every_benchmark_cheapest_claim_first(tmp_path: Path) -> None:
    assert len(C.BY_KEY) == len(C.LEDGER) >= 20
    for claim in C.LEDGER:  # every claim is testable on the paper's data; the small scales lack some
        assert C.testable(claim, C.full_benchmark()), claim.key
        assert C.testable(claim, C.BUILTIN) == (not claim.needs), claim.key
    store = ResultsStore(tmp_path)
    cheap, dear = C.Claim("cheap", "w", "x", "acc", (C.Difference(TENT, BN),), "p", quote="q"), ABOVE
    costly = C.Claim("dear", "w", "x", "acc", (C.Difference(C.Arm(T1, "cotta"), BN),), "p", quote="q")
    for arm, seconds in ((TENT, 10.0), (BN, 10.0), (C.Arm(T1, "cotta"), 5000.0)):
        store.put(_record(C.spec(arm, BENCH, 0), 70.0, seconds=seconds))
    order = C.cheapest_first(BENCH, store, "cpu", ledger=(costly, cheap, dear))
    assert [(s.method, s.seed) for s in order] == [("tent", 1), ("bn_stats", 1), ("tent", 2), ("bn_stats", 2),
                                                   ("cotta", 1), ("cotta", 2)]
    evidence = C.evidence_cells(C.BUILTIN, ResultsStore(tmp_path / "empty"), "cpu", (3,))
    assert {s.seed for s in evidence} == {3} and len({s.method for s in evidence}) == len(TABLE_ORDER)
    assert C.parse_seeds("0-2,5") == (0, 1, 2, 5) and C.parse_seeds("3") == (3,)
    for bad in ("", "a", "3-1"):
        with pytest.raises(ValueError, match="seeds"):
            C.parse_seeds(bad)


def test_the_claims_page_and_figure_are_what_the_committed_records_give(tmp_path: Path) -> None:
    builtin, reference = ResultsStore(REPO / "results" / "builtin_benchmark"), ResultsStore(REPO / "results" / "reference")
    first, second = J.judge_all(builtin, C.BUILTIN_EVIDENCE), J.judge_all(reference, C.REFERENCE_EVIDENCE)
    cpus = {J.BUILTIN_TITLE: J.cpu_kinds(builtin), J.REFERENCE_TITLE: J.cpu_kinds(reference)}
    assert (REPO / J.PAGE).read_text() == J.page(first, second, cpus), \
        f"docs/claims.md is stale: run `{J.PAGE_COMMAND}`"
    (tmp_path / "docs").mkdir()
    J.render(builtin, reference, tmp_path)
    assert (tmp_path / "figures" / "claims.png").read_bytes() == (REPO / "figures" / "claims.png").read_bytes(), \
        f"figures/claims.png is stale: run `{J.PAGE_COMMAND}`"


def test_reference_compute_can_take_the_cells_of_named_claims(tmp_path: Path) -> None:
    from stamplib.evidence import needs

    cells = needs.claim_cells(ResultsStore(tmp_path), "cpu", ["views_16_over_1"])
    assert sorted((s.seed, dict(s.overrides).get("num_views", 16)) for s in cells) == [
        (0, 1), (0, 16), (1, 1), (1, 16), (2, 1), (2, 16)]  # an empty store: every seed of both arms
    with pytest.raises(ValueError, match="no claim"):
        needs.claim_cells(ResultsStore(tmp_path), "cpu", ["no_such_claim"])
