"""The ledger judged on made-up records: the verdict words (yes, no, tie, smaller than the paper's,
undecided with what it could detect), replicates that draw the source network anew, the fixed
fifteen corruptions against a sampled subset, what drives each verdict, the designs a benchmark
prefers, the paper's stream length, and the paper quoted and sized from its printed numbers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation.record import Record
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import benchmarks as B
from stamplib.evidence import judge as J
from stamplib.evidence import ledger as C
from stamplib.evidence import pages
from stamplib.evidence import statistics as S
from stamplib.experiments import plans
from stamplib.methods import PAPER_ORDER
from stamplib.report.paper import paper_value

T1 = plans.TABLE1.notebook
TENT, BN, SOURCE, STAMP = (C.Arm(T1, m) for m in ("tent", "bn_stats", "source", "stamp"))
ABOVE = C.Claim("tent_above_bn", "Tent above BN Stats", "Table 1a", "acc", (C.Difference(TENT, BN),), "72.9 → 77.4",
                quote="Table 1a")
STAMP_ABOVE = C.Claim("stamp_above_bn", "STAMP above BN Stats", "Table 1a", "h", (C.Difference(STAMP, BN),), "p",
                      quote="Table 1a")
NETWORKS = B.BUILTIN.design("networks")  # networks 0–4, fifteen corruptions
STREAMS = B.BUILTIN.design("streams")  # network 0, seeds 0–4, fifteen corruptions
THREE = B.REFERENCE.design("three")  # network 0, seeds 0–2, three corruptions
REF_NETWORKS = B.REFERENCE.design("networks")


def _record(spec, per_corruption: Mapping[str, float], cpu: str | None = None, seconds: float = 60.0) -> Record:
    per = {c: {"acc": v, "auroc": v, "h": v} for c, v in per_corruption.items()}
    mean = float(np.mean(list(per_corruption.values())))
    body = {"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
            "mean": {"acc": mean, "auroc": mean, "h": mean}, "seconds": seconds, "device": "cpu"}
    if cpu:
        body["provenance"] = {"checkpoint": {"name": "x", "sha256": None, "clean_test_accuracy": None}, "data": {},
                              "git": {}, "command": "test", "cpu": {"model": cpu, "extensions": ["avx2"]}}
    return Record.from_json(body)


def _records(values: Mapping[C.Arm, Mapping[int, float | Mapping[str, float]]], design: B.Design,
             cpu: str | None = None) -> dict[str, Record]:
    """Records of ``values``: per arm, per replicate index into the design's replicates, one value
    for every corruption or one per corruption."""
    out = {}
    for arm, by_replicate in values.items():
        for index, value in by_replicate.items():
            spec = B.spec(arm, design, design.replicates[index])
            per = value if isinstance(value, Mapping) else {c: float(value) for c in spec.corruptions}
            out[spec.key()] = _record(spec, per, cpu)
    return out


def test_a_replicate_is_a_network_with_its_own_stream_seed_and_network_0_keeps_every_key() -> None:
    assert [(r.network, r.seed) for r in NETWORKS.replicates] == [(k, k) for k in range(5)]
    zero, two = B.spec(TENT, NETWORKS, NETWORKS.replicates[0]), B.spec(TENT, NETWORKS, NETWORKS.replicates[2])
    assert zero == B.spec(TENT, STREAMS, STREAMS.replicates[0]) and "network" not in zero.to_dict()
    assert (two.network, two.seed) == (2, 2) and two.to_dict()["network"] == 2 and two.key() != zero.key()
    assert NETWORKS.replicates_text() == "networks 0–4 (network k with stream seed k)"
    assert STREAMS.replicates_text() == "network 0, seeds 0–4"
    # The reference run's networks have setting (a)'s cells only.
    assert B.spec(C.Arm(plans.CLASS_SPLIT.notebook, "stamp", dataset="cifar10_c_8_2", outlier_set="heldout_classes"),
                  REF_NETWORKS, REF_NETWORKS.replicates[1]) is None


def test_every_replicate_rounding_to_zero_is_a_tie_of_its_own() -> None:
    tied = J.judge(ABOVE, THREE, _records({TENT: {0: 70.02, 1: 69.98, 2: 70.04}, BN: {0: 70, 1: 70, 2: 70}}, THREE))
    assert tied.verdict == S.TIE == tied.label and tied.replicate_counts() == "0 of 3 seeds hold, 3 tie"


def test_yes_and_no_come_from_the_interval_alone() -> None:
    steady = J.judge(ABOVE, NETWORKS, _records({TENT: {0: 75, 1: 76, 2: 74, 3: 75, 4: 75},
                                                BN: dict.fromkeys(range(5), 70)}, NETWORKS))
    assert steady.verdict == "yes" and steady.interval.low > 0 and steady.replicate_counts() == "5 of 5 networks hold"
    # Four of five networks fail, one holds: the interval still lies below zero, so the claim fails.
    failed = J.judge(ABOVE, NETWORKS, _records({TENT: {0: 66, 1: 65, 2: 67, 3: 64, 4: 70.4},
                                                BN: dict.fromkeys(range(5), 70)}, NETWORKS))
    assert failed.verdict == "no" and failed.replicate_counts() == "1 of 5 networks hold, 4 fail"
    # Every network holds, but barely and unevenly: the interval reaches below zero.
    shaky = J.judge(ABOVE, NETWORKS, _records({TENT: {0: 70.2, 1: 70.2, 2: 70.2, 3: 70.2, 4: 79},
                                               BN: dict.fromkeys(range(5), 70)}, NETWORKS))
    assert len(shaky.held) == 5 and shaky.interval.low < 0 and shaky.verdict == S.UNDECIDED
    assert shaky.label == f"undecided (could detect ≥ {shaky.interval.detectable:.1f})"


def test_zero_fits_but_the_papers_size_does_not_reads_smaller_than_the_papers() -> None:
    claim = C.BY_KEY["tent_acc_over_bn_stats"]  # the paper: +4.5 (72.9 → 77.4)
    assert C.paper_margin(claim) == pytest.approx(4.5)
    small = J.judge(claim, STREAMS, _records({TENT: {0: 70.3, 1: 69.9, 2: 70.4, 3: 69.8, 4: 70.1},
                                              BN: dict.fromkeys(range(5), 70)}, STREAMS))
    assert small.interval.low < 0 < small.interval.high < 4.5
    assert small.verdict == S.SMALLER and small.size_relation() == S.ABOVE
    assert small.size_text() == "the paper's +4.5 lies above"
    wide = J.judge(claim, STREAMS, _records({TENT: {0: 80, 1: 62, 2: 75, 3: 66, 4: 71},
                                             BN: dict.fromkeys(range(5), 70)}, STREAMS))
    assert wide.verdict == S.UNDECIDED and wide.size_relation() == S.INSIDE


def test_the_fifteen_corruptions_are_held_fixed_and_three_are_a_sample_of_them() -> None:
    """Replicates that agree exactly, corruptions that disagree: over the fifteen the interval is a
    point (the spread between them is the estimand's own); over three of them it is as wide as
    sampling three of fifteen says, with the finite-population factor 1 − 3/15."""
    rng = np.random.default_rng(1)
    effects = dict(zip(CORRUPTIONS, rng.normal(1.0, 5.0, len(CORRUPTIONS))))
    same = {c: 70.0 + effects[c] for c in CORRUPTIONS}
    fifteen = J.judge(ABOVE, STREAMS, _records({TENT: dict.fromkeys(range(5), same),
                                                BN: dict.fromkeys(range(5), dict.fromkeys(CORRUPTIONS, 70.0))},
                                               STREAMS))
    assert fifteen.interval.low == pytest.approx(fifteen.interval.high) and fifteen.interval.finite_population is None
    three = {c: same[c] for c in THREE.corruptions}
    sampled = J.judge(ABOVE, THREE, _records({TENT: dict.fromkeys(range(3), three),
                                              BN: dict.fromkeys(range(3), dict.fromkeys(three, 70.0))}, THREE))
    spread = np.std([effects[c] for c in THREE.corruptions], ddof=1)
    assert sampled.interval.finite_population == pytest.approx(0.8)
    assert sampled.interval.se == pytest.approx(np.sqrt(0.8) * spread / np.sqrt(3), rel=1e-6)
    assert "3 of 15 corruptions sampled, factor 0.80" in sampled.difference_text()


def test_corruptions_held_are_counted_from_each_replicates_margin_on_that_corruption() -> None:
    corruptions = THREE.corruptions
    up = {corruptions[0]: 80.0, corruptions[1]: 78.0, corruptions[2]: 60.0}
    verdict = J.judge(ABOVE, THREE, _records({TENT: dict.fromkeys(range(3), up), BN: dict.fromkeys(range(3), 70)},
                                             THREE))
    assert verdict.corruption_counts() == "2 of 3 corruptions hold"
    assert verdict.corruption_margins == {corruptions[0]: 10.0, corruptions[1]: 8.0, corruptions[2]: -10.0}


def test_missing_replicates_are_named_and_one_replicate_is_a_reading() -> None:
    two = J.judge(ABOVE, NETWORKS, _records({TENT: {0: 75, 1: 76, 2: 77}, BN: {0: 70, 1: 70}}, NETWORKS))
    assert two.label.startswith("2 of 5 replicates so far: ") and not two.complete
    assert "Tent (a) network 3 × seed 3, network 4 × seed 4" in two.missing_text()
    one = J.judge(ABOVE, NETWORKS, _records({TENT: {0: 75}, BN: {0: 70}}, NETWORKS))
    assert one.label == "one replicate (network 0 × seed 0): yes" and one.interval is None


def test_a_claim_no_cifar10_scale_can_test_needs_data() -> None:
    claim = C.BY_KEY["cifar100_best_h"]
    verdict = J.judge(claim, NETWORKS, {})
    assert verdict.label == "needs data" and verdict.needs_data and B.cells(claim, NETWORKS) == []
    full = B.full_benchmark((0,)).designs[0]
    assert len(B.cells(claim, full)) == 4 * len(PAPER_ORDER)


def test_a_lead_is_over_the_best_other_under_each_replicate() -> None:
    claim = C.BY_KEY["a_best_h"]
    values = {a: {0: 50.0, 1: 50.0, 2: 50.0} for a in claim.arms}
    values[STAMP] = {0: 80.0, 1: 70.0, 2: 75.0}
    values[C.Arm(T1, "cotta")] = {0: 78.0, 1: 72.0, 2: 50.0}
    values[C.Arm(T1, "rotta")] = {0: 50.0, 1: 50.0, 2: 74.0}
    verdict = J.judge(claim, THREE, _records(values, THREE))
    assert list(verdict.margins.values()) == [2.0, -2.0, 1.0]
    assert "best other CoTTA (a) 66.7 (50.0–78.0)" in J.ours_text(verdict)


def _store(tmp_path: Path, records: Mapping[str, Record]) -> ResultsStore:
    store = ResultsStore(tmp_path)
    for record in records.values():
        store.put(record)
    return store


def test_what_drives_it_names_the_networks_the_corruption_left_out_and_the_other_design(tmp_path: Path) -> None:
    """Five networks: four hold on every corruption but contrast, where all fail badly; network 3
    fails. Network 0's five streams all hold. The page says which networks, which corruption and
    what the other design reads."""
    def per(gain: float) -> dict[str, float]:
        return {c: 70.0 + (gain if c != "contrast" else -8.0) for c in CORRUPTIONS}

    nets = {TENT: {0: per(3.0), 1: per(2.5), 2: per(3.5), 3: per(-2.0), 4: per(3.0)},
            BN: dict.fromkeys(range(5), dict.fromkeys(CORRUPTIONS, 70.0))}
    streams = {TENT: {k: per(3.0) for k in range(5)}, BN: dict.fromkeys(range(5), dict.fromkeys(CORRUPTIONS, 70.0))}
    store = _store(tmp_path, {**_records(nets, NETWORKS), **_records(streams, STREAMS)})
    (verdict,) = J.judge_benchmark(B.BUILTIN, store, [ABOVE])
    assert verdict.design == NETWORKS  # five networks decide once three replicates have the cells
    assert "holds on 4 of 5 networks (0, 1, 2, 4)" in verdict.drivers
    assert any(d.startswith("reads ") and "without contrast" in d for d in verdict.drivers), verdict.drivers
    assert any(d.startswith("one network, five streams: ") for d in verdict.drivers) or \
        J.judge(ABOVE, STREAMS, store.records_by_key()).verdict == verdict.verdict


def test_the_networks_design_decides_once_three_replicates_have_the_cells(tmp_path: Path) -> None:
    streams = {TENT: dict.fromkeys(range(5), 75.0), BN: dict.fromkeys(range(5), 70.0)}
    records = {**_records(streams, STREAMS), **_records({TENT: {1: 69.0}, BN: {1: 70.0}}, NETWORKS)}
    (two,) = J.judge_benchmark(B.BUILTIN, _store(tmp_path / "a", records), [ABOVE])
    assert two.design == STREAMS and two.verdict == "yes"  # networks 0 and 1: not yet
    records.update(_records({TENT: {2: 69.2}, BN: {2: 70.0}}, NETWORKS))
    (three,) = J.judge_benchmark(B.BUILTIN, _store(tmp_path / "b", records), [ABOVE])
    assert three.design == NETWORKS and three.label.startswith("3 of 5 replicates so far: ")
    assert "one network, five streams: yes" in three.drivers


def test_a_network_that_trusts_noise_is_named(tmp_path: Path) -> None:
    claim = C.BY_KEY["tent_auroc_below_source"]
    values = {SOURCE: {0: 51.0, 1: 85.0, 2: 84.0}, TENT: {0: 34.0, 1: 60.0, 2: 58.0}}
    store = _store(tmp_path, _records(values, REF_NETWORKS))
    (verdict,) = J.judge_benchmark(B.REFERENCE, store, [claim])
    assert verdict.design == REF_NETWORKS
    # A fact of the benchmark, said once on the page, not in every row's drivers.
    assert J.trusting_networks(REF_NETWORKS, store.records_by_key()) == (
        "network 0 trusts Noise: Source AUROC 51 vs the paper's 70")
    assert not any("trust" in d for d in verdict.drivers)


def test_another_cpu_kind_that_changes_the_verdict_is_named_but_does_not_decide(tmp_path: Path) -> None:
    ours = {STAMP: {0: 79, 1: 80.5, 2: 79.5}, BN: {0: 70, 1: 70, 2: 70}}  # the paper's +9.5 inside the interval
    store = _store(tmp_path, _records(ours, THREE, cpu="AMD EPYC 7B13"))
    (alone,) = J.judge_benchmark(B.REFERENCE, store, [STAMP_ABOVE])
    assert alone.verdict == "yes" and not any("records from" in d for d in alone.drivers)
    (tmp_path / J.OTHER_CPUS).mkdir()
    _store(tmp_path / J.OTHER_CPUS, _records({STAMP: {0: 79, 1: 68, 2: 79.5}}, THREE, cpu="Intel Xeon"))
    (judged,) = J.judge_benchmark(B.REFERENCE, store, [STAMP_ABOVE])
    assert judged.verdict == "yes"  # the interval decides
    assert any("with STAMP's records from Intel Xeon" in d for d in judged.drivers), judged.drivers
    assert pages.cpu_kinds(store) == f"6 on AMD EPYC 7B13 (no AVX-512); 3 more in `{J.OTHER_CPUS}/` on Intel Xeon"


def test_the_step_decay_claims_need_the_paper_stream_length_and_say_what_the_quick_stream_reads(tmp_path: Path
                                                                                                ) -> None:
    claim = C.BY_KEY["ablation_step_decay_acc"]
    for design in (NETWORKS, STREAMS, THREE, REF_NETWORKS):
        assert J.judge(claim, design, {}).verdict in (J.NEEDS_STREAM, J.NEEDS_DATA) and B.cells(claim, design) == []
    stream = B.BUILTIN.design("stream")
    decay, plain = claim.margins[0].higher, claim.margins[0].lower
    records = {**_records({decay: {0: 61.0, 1: 60.5, 2: 61.2}, plain: {0: 59.0, 1: 59.1, 2: 58.7}}, stream),
               **_records({decay: dict.fromkeys(range(5), 59.0), plain: dict.fromkeys(range(5), 59.0)}, STREAMS)}
    (decided,) = J.judge_benchmark(B.BUILTIN, _store(tmp_path, records), [claim])
    assert decided.design == stream and decided.verdict == "yes"
    assert "the quick stream (one network, five streams) reads tie" in decided.drivers
    assert not any(c.stream for c in C.LEDGER if not c.key.startswith("ablation_"))


def test_the_papers_size_is_computed_from_its_printed_numbers() -> None:
    assert C.paper_margin(C.BY_KEY["a_best_h"]) == pytest.approx(80.1 - 75.6)
    assert C.paper_margin(C.BY_KEY["a_auroc_lead_size"]) == pytest.approx(83.2 - 74.3 - 5.1)
    assert C.paper_margin(C.BY_KEY["views_16_over_1"]) is None  # Fig. 4 prints no values
    assert C.paper_margin(C.BY_KEY["ablation_memory_acc"]) == pytest.approx(63.7 - 59.3)
    # Table 4a on the corruptions we run: the unrounded means, 85.23 − 84.67 = +0.57, not +0.5.
    text = C.paper_here_text(C.BY_KEY["c_lead_size"], THREE.corruptions)
    assert text == "STAMP 85.23, best other EATA 84.67 (+0.57)"
    assert "on our 3 corruptions: STAMP 85.23" in J.paper_text(C.BY_KEY["c_best_acc"], THREE)


def test_a_stand_in_row_says_so_in_the_row() -> None:
    claim = C.BY_KEY["ablation_memory_acc"]
    assert J.claim_text(claim).endswith("(paper: CIFAR100-C + SVHN-C; here: CIFAR-10 + Noise)")
    for c in C.LEDGER:
        small = any(a.dataset == "cifar100_c" and a.outlier_set == "svhn" for a in c.arms) and c.scales == C.SCALES
        assert bool(c.stand_in) == small, c.key


def test_a_stated_size_is_judged_as_a_size() -> None:
    claim = C.BY_KEY["a_auroc_lead_size"]
    values = {a: {0: 70.0, 1: 70.0, 2: 70.0, 3: 70.0, 4: 70.0} for a in claim.arms}
    values[STAMP] = {0: 74.0, 1: 74.2, 2: 73.9, 3: 74.1, 4: 74.0}  # leads by about 4: short of +5.1
    verdict = J.judge(claim, STREAMS, _records(values, STREAMS))
    assert verdict.verdict == "no" and "the paper's size +5.1 subtracted" in J.ours_text(verdict)


#: Each claim's paper numbers: (table, data set, outlier set, method, metric) of every value its
#: ``paper`` text must print (paper_numbers.csv's mean over the 15 corruptions).
PAPER = {
    "a_best_h": [("1a", "cifar10_c", "noise", m, "h") for m in ("stamp", "rotta")],
    "a_best_auroc": [("1a", "cifar10_c", "noise", m, "auroc") for m in ("stamp", "rotta")],
    "a_auroc_lead_size": [("1a", "cifar10_c", "avg", m, "auroc") for m in ("stamp", "rotta")],
    "a_best_acc": [("1a", "cifar10_c", "noise", m, "acc") for m in ("stamp", "sotta")],
    "tta_auroc_over_source": [("1a", "cifar10_c", "noise", m, "auroc") for m in ("stamp", "source")],
    "b_best_h": [("3", "cifar10_c_8_2", "heldout_classes", m, "h") for m in ("stamp", "eata")],
    "b_best_acc": [("3", "cifar10_c_8_2", "heldout_classes", m, "acc") for m in ("stamp", "sotta")],
    "b_best_auroc": [("3", "cifar10_c_8_2", "heldout_classes", m, "auroc") for m in ("stamp", "eata")],
    "c_best_acc": [("4a", "cifar10_c", "none", m, "acc") for m in ("stamp", "sotta")],
    "cifar100_closed_best_acc": [("4b", "cifar100_c", "none", m, "acc") for m in ("stamp", "sar")],
    "cifar100_split_best_h": [("3", "cifar100_c_80_20", "heldout_classes", m, "h") for m in ("stamp", "sar")],
}


def test_every_paper_number_is_the_cited_tables_value() -> None:
    for key, cells in PAPER.items():
        for table, dataset, outliers, method, metric in cells:
            value = paper_value(table, dataset, outliers, method, metric)
            assert value is not None and f"{value:.1f}" in C.BY_KEY[key].paper, (key, method, metric, value)
    assert "second best SAR 61.7" in C.BY_KEY["cifar100_closed_best_acc"].paper
    assert all(c.quote for c in C.LEDGER)


def test_the_ledger_has_no_claim_the_paper_does_not_make() -> None:
    text = json.dumps([c.words for c in C.LEDGER])
    assert "drops least" not in text and "adds to the one before" not in text


def test_the_ledger_plans_its_cells_cheapest_claim_first(tmp_path: Path) -> None:
    assert len(C.BY_KEY) == len(C.LEDGER) >= 20
    for claim in C.LEDGER:
        assert B.testable(claim, B.full_benchmark().designs[0]), claim.key
        assert B.testable(claim, STREAMS) == (not claim.needs), claim.key
    store = ResultsStore(tmp_path)
    cheap = C.Claim("cheap", "w", "x", "acc", (C.Difference(TENT, BN),), "p", quote="q")
    costly = C.Claim("dear", "w", "x", "acc", (C.Difference(C.Arm(T1, "cotta"), BN),), "p", quote="q")
    for arm, seconds in ((TENT, 10.0), (BN, 10.0), (C.Arm(T1, "cotta"), 5000.0)):
        spec = B.spec(arm, THREE, THREE.replicates[0])
        store.put(_record(spec, dict.fromkeys(spec.corruptions, 70.0), seconds=seconds))
    order = B.cheapest_first(THREE, store, "cpu", ledger=(costly, cheap))
    assert [(s.method, s.seed) for s in order] == [("tent", 1), ("bn_stats", 1), ("tent", 2), ("bn_stats", 2),
                                                   ("cotta", 1), ("cotta", 2)]
    nets = B.evidence_cells(NETWORKS, ResultsStore(tmp_path / "empty"), "cpu", B.chosen_replicates(NETWORKS, "3"))
    assert {(s.network, s.seed) for s in nets} == {(3, 3)} and len(nets) == len(B.ledger_cells(NETWORKS, [
        NETWORKS.replicates[3]]))
    assert B.parse_numbers("0-2,5") == (0, 1, 2, 5)
    for bad in ("", "a", "3-1"):
        with pytest.raises(ValueError, match="seeds"):
            B.parse_numbers(bad)
    with pytest.raises(ValueError, match="has no network 7"):
        B.chosen_replicates(NETWORKS, "7")


# ------------------------------------------------------------------------------- words that carry the size


def test_a_yes_short_of_the_papers_size_says_so(tmp_path: Path) -> None:
    # Tent above BN Stats by +1.1 to +1.3 on three networks and all fifteen corruptions: the interval
    # lies above 0 and wholly below the paper's +4.5 (Table 1a, CIFAR10-C).
    values = {TENT: {0: 71.2, 1: 71.1, 2: 71.3}, BN: {0: 70.0, 1: 70.0, 2: 70.0}}
    (verdict,) = J.judge_benchmark(B.REFERENCE, _store(tmp_path, _records(values, REF_NETWORKS)), [ABOVE])
    assert verdict.design == REF_NETWORKS and verdict.interval.low > 0 and verdict.interval.high < 4.5
    assert verdict.verdict == S.YES_SMALLER == "yes, smaller than the paper's" == verdict.label
    assert verdict.size_text() == "the paper's +4.5 lies above"


def test_a_size_the_paper_measured_on_another_data_set_is_shown_and_sets_no_word(tmp_path: Path) -> None:
    elsewhere = C.Claim("tent_above_bn_c100", "Tent above BN Stats", "Table 5", "acc", (C.Difference(TENT, BN),),
                        "72.9 → 77.4", quote="Table 5", stand_in="paper: CIFAR100-C + SVHN-C; here: CIFAR-10 + Noise")
    assert C.paper_margin(elsewhere) == 4.5 and C.paper_data_set(elsewhere) == "CIFAR100-C + SVHN-C"
    values = {TENT: {0: 71.2, 1: 71.1, 2: 71.3}, BN: {0: 70.0, 1: 70.0, 2: 70.0}}
    (verdict,) = J.judge_benchmark(B.REFERENCE, _store(tmp_path, _records(values, REF_NETWORKS)), [elsewhere])
    assert verdict.verdict == S.YES and not verdict.size_sets_word
    assert verdict.size_text() == "the paper's +4.5 (on CIFAR100-C + SVHN-C, so it sets no word) lies above"
    # Zero inside the interval: undecided, not "smaller than the paper's".
    shaky = {TENT: {0: 71.0, 1: 69.5, 2: 70.9}, BN: {0: 70.0, 1: 70.0, 2: 70.0}}
    (verdict,) = J.judge_benchmark(B.REFERENCE, _store(tmp_path / "shaky", _records(shaky, REF_NETWORKS)),
                                   [elsewhere])
    assert verdict.verdict == S.UNDECIDED and verdict.size_relation() == S.ABOVE


def test_leaving_one_of_three_corruptions_out_holds_the_other_two_fixed(tmp_path: Path) -> None:
    # Three networks × the notebooks' three corruptions: Tent leads on every network and corruption.
    # Sampling 2 of 15 corruptions (one or two degrees of freedom) would read undecided without any
    # one of them; holding the two left fixed keeps the verdict, so no corruption is named.
    three = B.REFERENCE.design("networks_three")
    gains = {"gaussian_noise": 11.0, "defocus_blur": 14.0, "contrast": 17.0}
    values = {TENT: {k: {c: 70.0 + g + 0.4 * k for c, g in gains.items()} for k in range(3)},
              SOURCE: {k: {c: 70.0 for c in gains} for k in range(3)}}
    claim = C.Claim("tent_over_source", "Tent above Source", "Table 1a", "acc", (C.Difference(TENT, SOURCE),), "p",
                    quote="Table 1a")
    records = _records(values, three)
    verdict = J.judge(claim, three, records)
    assert verdict.verdict == S.YES
    sampled = J.judge(claim, three, records, corruptions=["gaussian_noise", "contrast"])
    assert sampled.verdict == S.UNDECIDED  # what the old driver read, and named every corruption for
    assert J._leave_one_out(verdict, records) == ""  # no corruption named
    # Gaussian noise and contrast swing against each other from network to network, defocus blur
    # does not: without either swinging one the two left straddle 0 (named); without defocus blur
    # they still cancel (not named).
    swing = {0: -12.0, 1: 0.0, 2: 12.0}
    swung = {TENT: {k: {"gaussian_noise": 74.0 + e, "defocus_blur": 74.0, "contrast": 76.0 - e}
                    for k, e in swing.items()}, SOURCE: {k: {c: 70.0 for c in gains} for k in range(3)}}
    records = _records(swung, three)
    verdict = J.judge(claim, three, records)
    assert verdict.verdict.startswith(S.YES)
    assert J._leave_one_out(verdict, records) == "reads smaller than the paper's without gaussian noise or contrast"


def test_a_corruption_whose_removal_strengthens_the_verdict_is_never_named() -> None:
    assert J.weakens(S.YES, S.UNDECIDED) and J.weakens(S.YES, S.SMALLER) and J.weakens(S.YES, S.NO)
    assert not J.weakens(S.UNDECIDED, S.YES) and not J.weakens(S.YES, S.YES_SMALLER)
    assert not J.weakens(S.SMALLER, S.YES) and J.weakens(S.SMALLER, S.UNDECIDED)


def test_two_checkpoints_under_one_network_index_are_refused_naming_both(tmp_path: Path) -> None:
    from stamplib.evaluation.manifest import EvidenceError

    values = {TENT: {0: 71.2, 1: 71.1, 2: 71.3}, BN: {0: 70.0, 1: 70.0, 2: 70.0}}
    records = _records(values, REF_NETWORKS)
    old, new = "5f49fba0" + "0" * 56, "a1b2c3d4" + "0" * 56
    for record in records.values():
        if record.spec.network == 2:
            sha = old if record.spec.method == "tent" else new
            object.__setattr__(record, "provenance", _provenance(sha))
    store = _store(tmp_path, records)
    with pytest.raises(EvidenceError) as refused:
        J.judge_benchmark(B.REFERENCE, store, [ABOVE])
    message = str(refused.value)
    assert old in message and new in message and "network 2 of cifar10_jpeg" in message and "\n" not in message
    # One file under each index is fine.
    for record in records.values():
        object.__setattr__(record, "provenance", _provenance(old))
    J.judge_benchmark(B.REFERENCE, _store(tmp_path / "one", records), [ABOVE])


def _provenance(sha: str):  # noqa: ANN202 - a record's provenance naming one checkpoint file
    from stamplib.evaluation.record import Provenance

    return Provenance.from_json({"checkpoint": {"name": "ResNet18_10_jpeg_seed2", "sha256": sha,
                                                "clean_test_accuracy": None}, "data": {}, "git": {}, "command": "test"})


# noqa: ANN001
def test_claims_judge_refuses_two_checkpoints_under_one_network_in_one_line(tmp_path: Path, capsys) -> None:
    from stamplib import cli

    records = _records({TENT: {0: 71.2, 1: 71.1, 2: 71.3}, BN: {0: 70.0, 1: 70.0, 2: 70.0}}, REF_NETWORKS)
    for record in records.values():
        if record.spec.network == 2:
            object.__setattr__(record, "provenance", _provenance(("ab" if record.spec.method == "tent" else "cd") * 32))
    _store(tmp_path, records)
    assert cli.main(["claims", "judge", "--benchmark", "reference", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ab" * 32 in err and "cd" * 32 in err
