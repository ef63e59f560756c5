"""How sure a verdict is: tie as a verdict of its own, k of n seeds, corruptions held, yes / no only
where the interval excludes zero, the interval's coverage under a null effect, the CPU rule, the
fifteen-corruption evidence preferred, the paper's stream length, and the paper quoted exactly
(each number of a claim's row checked against paper_numbers.csv)."""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import pytest

from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation.record import Record
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import judge as J
from stamplib.evidence import ledger as C
from stamplib.experiments import plans
from stamplib.report.paper import paper_value

T1 = plans.TABLE1.notebook
TENT, BN = C.Arm(T1, "tent"), C.Arm(T1, "bn_stats")
STAMP = C.Arm(T1, "stamp")
ABOVE = C.Claim("tent_above_bn", "Tent above BN Stats", "Table 1a", "acc", (C.Difference(TENT, BN),), "72.9 → 77.4",
                quote="Table 1a")
STAMP_ABOVE = C.Claim("stamp_above_bn", "STAMP above BN Stats", "Table 1a", "h", (C.Difference(STAMP, BN),), "p",
                      quote="Table 1a")


def _record(spec, per_corruption: Mapping[str, float], cpu: str | None = None) -> Record:
    per = {c: {"acc": v, "auroc": v, "h": v} for c, v in per_corruption.items()}
    mean = float(np.mean(list(per_corruption.values())))
    body = {"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
            "mean": {"acc": mean, "auroc": mean, "h": mean}, "seconds": 60.0, "device": "cpu"}
    if cpu:
        body["provenance"] = {"checkpoint": {"name": "x", "sha256": None, "clean_test_accuracy": None}, "data": {},
                              "git": {}, "command": "test", "cpu": {"model": cpu, "extensions": ["avx2"]}}
    return Record.from_json(body)


def _records(values: Mapping[C.Arm, Mapping[int, float | Mapping[str, float]]], bench: C.Benchmark,
             cpu: str | None = None) -> dict[str, Record]:
    out = {}
    for arm, by_seed in values.items():
        for seed, value in by_seed.items():
            spec = C.spec(arm, bench, seed)
            per = value if isinstance(value, Mapping) else {c: float(value) for c in spec.corruptions}
            out[spec.key()] = _record(spec, per, cpu)
    return out


def test_every_seed_rounding_to_zero_is_a_tie_of_its_own() -> None:
    tied = J.judge(ABOVE, C.REFERENCE, _records({TENT: {0: 70.02, 1: 69.98, 2: 70.04}, BN: {0: 70, 1: 70, 2: 70}},
                                                C.REFERENCE))
    assert tied.verdict == J.TIE == tied.answer and tied.seed_counts() == "0 of 3 seeds hold, 3 tie"
    one_ties = J.judge(ABOVE, C.REFERENCE, _records({TENT: {0: 75, 1: 76, 2: 70.02}, BN: {0: 70, 1: 70, 2: 70}},
                                                    C.REFERENCE))
    assert one_ties.verdict == J.NOISE and one_ties.seed_counts() == "2 of 3 seeds hold, 1 ties"


def test_k_of_n_seeds_hold_and_yes_needs_the_interval_above_zero() -> None:
    bench = C.BUILTIN_QUICK  # five seeds
    mixed = J.judge(ABOVE, bench, _records({TENT: {0: 75, 1: 76, 2: 74, 3: 77, 4: 66}, BN: dict.fromkeys(range(5), 70)},
                                           bench))
    assert mixed.verdict == J.NOISE and mixed.seed_counts() == "4 of 5 seeds hold, 1 fails"
    # Every seed holds, but barely and unevenly: the t-interval over five seeds reaches below zero.
    shaky = J.judge(ABOVE, bench, _records({TENT: {0: 70.2, 1: 70.2, 2: 70.2, 3: 70.2, 4: 79}, BN: dict.fromkeys(range(5), 70)},
                                           bench))
    assert len(shaky.decision.held) == 5 and shaky.interval[0] < 0 and shaky.verdict == J.NOISE
    steady = J.judge(ABOVE, bench, _records({TENT: {0: 75, 1: 76, 2: 74, 3: 75, 4: 75}, BN: dict.fromkeys(range(5), 70)},
                                            bench))
    assert steady.verdict == "yes" and steady.interval[0] > 0 and "5 of 5 seeds hold" in steady.sureness()
    failed = J.judge(ABOVE, bench, _records({TENT: dict.fromkeys(range(5), 60), BN: {0: 70, 1: 71, 2: 70, 3: 72, 4: 70}},
                                            bench))
    assert failed.verdict == "no" and failed.interval[1] < 0


def test_corruptions_held_are_counted_from_the_per_corruption_margins() -> None:
    bench = C.BUILTIN_QUICK
    corruptions = C.spec(TENT, bench, 0).corruptions
    up = {corruptions[0]: 80.0, corruptions[1]: 78.0, corruptions[2]: 60.0}  # the third corruption drives a loss
    verdict = J.judge(ABOVE, bench, _records({TENT: dict.fromkeys(range(5), up), BN: dict.fromkeys(range(5), 70)},
                                             bench))
    assert verdict.corruption_counts() == "2 of 3 corruptions hold"
    assert verdict.corruption_margins == {corruptions[0]: 10.0, corruptions[1]: 8.0, corruptions[2]: -10.0}
    assert verdict.sureness() == "5 of 5 seeds hold; 2 of 3 corruptions hold"
    assert verdict.evidence() == "3 corruptions (gaussian noise, defocus blur and contrast), seeds 0–4"


def test_the_fifteen_corruption_interval_reflects_the_choice_of_corruptions() -> None:
    """Seeds that agree exactly, corruptions that disagree: over three corruptions held fixed the
    interval is a point; over fifteen it is as wide as the corruptions' spread says."""
    rng = np.random.default_rng(1)
    effects = dict(zip(CORRUPTIONS, rng.normal(1.0, 5.0, len(CORRUPTIONS))))
    same = {c: 70.0 + effects[c] for c in CORRUPTIONS}
    values = {TENT: dict.fromkeys(range(3), same), BN: dict.fromkeys(range(3), dict.fromkeys(CORRUPTIONS, 70.0))}
    wide = J.judge(ABOVE, C.REFERENCE_ALL, _records(values, C.REFERENCE_ALL))
    low, high = wide.interval
    sem = np.std(list(effects.values()), ddof=1) / np.sqrt(len(CORRUPTIONS))
    assert high - low == pytest.approx(2 * 2.145 * sem, rel=0.02)  # t on 14 degrees of freedom
    three = {c: same[c] for c in C.REFERENCE.corruptions}
    fixed = J.judge(ABOVE, C.REFERENCE, _records({TENT: dict.fromkeys(range(3), three),
                                                  BN: dict.fromkeys(range(3), dict.fromkeys(three, 70.0))}, C.REFERENCE))
    assert fixed.interval[0] == pytest.approx(fixed.interval[1])
    assert "held fixed" in J.interval_words(C.REFERENCE) and "choice of corruptions" in J.interval_words(C.BUILTIN)


#: The noise of the committed records, per (seed, corruption) of STAMP − BN Stats in H with Noise
#: outliers (two-way decomposition of the margins): on the built-in benchmark's three corruptions
#: over seeds 0–4, a corruption effect of sd 16.9, a seed effect of about 3.2 and a residual of
#: 11.4; on the reference run's, 2.3, 0 and 2.7.
MEASURED = {"builtin": (16.9, 3.2, 11.4), "reference": (2.3, 0.0, 2.7)}


@pytest.mark.parametrize("noise", sorted(MEASURED))
@pytest.mark.parametrize(("n_seeds", "n_corruptions"), [(3, 15), (5, 15), (3, 3), (5, 3)])
def test_a_null_effect_is_covered_and_rarely_read_yes(noise: str, n_seeds: int, n_corruptions: int) -> None:
    """1,000 made-up benchmarks whose true mean margin is zero (over a population of corruptions
    on fifteen; over the three held fixed on three): the 95 % interval covers zero in at least
    90 % of them, and *yes* is read in at most 5 %."""
    corruption_sd, seed_sd, residual_sd = MEASURED[noise]
    draws = 1000
    rng = np.random.default_rng(61 + n_seeds + n_corruptions)
    effect = rng.normal(0.0, corruption_sd, (draws, 1, n_corruptions))
    if n_corruptions <= 3:  # the three are the population: their own mean effect is zero
        effect -= effect.mean(axis=-1, keepdims=True)
    margin = effect + rng.normal(0.0, seed_sd, (draws, n_seeds, 1)) + rng.normal(0.0, residual_sd,
                                                                                  (draws, n_seeds, n_corruptions))
    base = 70.0 + rng.normal(0.0, 5.0, (draws, n_seeds, n_corruptions))
    values = np.stack([base + margin, base], axis=1)  # (draws, arms, seeds, corruptions)
    point, low, high = J.mean_margin_interval(lambda arms: arms[0] - arms[1], values, n_corruptions > 3)
    covered = np.mean((low <= 0) & (high >= 0))
    per_seed = np.round(margin.mean(axis=-1), 1)
    yes = np.mean((per_seed > 0).all(axis=-1) & (low > 0))
    assert covered >= 0.90, covered
    assert yes <= 0.05, yes


def test_a_verdict_that_changes_with_the_cpu_behind_stamps_records_is_within_the_noise(tmp_path) -> None:
    bench = C.REFERENCE
    ours = {STAMP: {0: 75, 1: 76, 2: 75.5}, BN: {0: 70, 1: 70, 2: 70}}
    store = ResultsStore(tmp_path)
    for record in _records(ours, bench, cpu="AMD EPYC 7B13").values():
        store.put(record)
    alone = J.judge_all(store, bench, [STAMP_ABOVE])[0]
    assert alone.verdict == "yes" and not alone.cpu_note and alone.cpus == ("AMD EPYC 7B13",)
    (tmp_path / J.OTHER_CPUS).mkdir()
    other = ResultsStore(tmp_path / J.OTHER_CPUS)
    for record in _records({STAMP: {0: 75, 1: 68, 2: 75.5}}, bench, cpu="Intel Xeon").values():
        other.put(record)
    judged = J.judge_all(store, bench, [STAMP_ABOVE])[0]
    assert judged.verdict == J.NOISE and "Intel Xeon" in judged.cpu_note and "within the noise" in judged.cpu_note
    assert J.cpu_kinds(store) == f"6 on AMD EPYC 7B13 (no AVX-512); 3 more in `{J.OTHER_CPUS}/` on Intel Xeon"
    # A second CPU kind whose records leave the verdict as it is changes nothing.
    for record in _records({STAMP: {0: 75.3, 1: 76.1, 2: 75.2}}, bench, cpu="Intel Xeon").values():
        other.put(record)
    assert J.judge_all(store, bench, [STAMP_ABOVE])[0].verdict == "yes"


def test_the_fifteen_corruptions_decide_once_three_seeds_have_them() -> None:
    quick = {TENT: dict.fromkeys(range(5), 75.0), BN: dict.fromkeys(range(5), 70.0)}
    records = {**_records(quick, C.BUILTIN_QUICK),
               **_records({TENT: {0: 69.0, 1: 69.5}, BN: {0: 70.0, 1: 70.0}}, C.BUILTIN)}
    two = J.best_evidence(ABOVE, C.BUILTIN_EVIDENCE, records)
    assert two.benchmark == C.BUILTIN_QUICK and two.verdict == "yes"  # two seeds of fifteen: not yet
    records.update(_records({TENT: {2: 69.2}, BN: {2: 70.0}}, C.BUILTIN))
    three = J.best_evidence(ABOVE, C.BUILTIN_EVIDENCE, records)
    assert three.benchmark == C.BUILTIN and three.answer == "3 of 5 seeds (seeds 0–2: no)"
    assert three.evidence() == "15 corruptions, seeds 0–2" and "missing: " in J.ours_text(three)


def test_the_step_decay_claims_need_the_paper_stream_length() -> None:
    for key in ("ablation_step_decay_acc", "ablation_step_decay_auroc", "ablation_decay_with_sam_h",
                "ablation_sam_softens_decay_auroc"):
        claim = C.BY_KEY[key]
        for bench in (C.BUILTIN, C.BUILTIN_QUICK, C.REFERENCE, C.REFERENCE_ALL):
            verdict = J.judge(claim, bench, {})
            assert verdict.answer == J.NEEDS_STREAM and C.cells(claim, bench) == []
        assert C.cells(claim, C.full_benchmark()) and J.judge(claim, C.full_benchmark(), {}).answer == "pending"
    assert not any(c.stream for c in C.LEDGER if not c.key.startswith("ablation_"))


def test_the_stream_section_names_the_scale_that_decides_and_the_benchmark_still_waiting() -> None:
    claim = C.BY_KEY["ablation_step_decay_acc"]
    reference = [J.judge(claim, C.REFERENCE, {})]
    waiting = "\n".join(J.stream_section([J.judge(claim, C.BUILTIN, {})], reference))
    assert "to be decided by the compact network" in waiting and "--paper-stream" in waiting
    assert "too slow for three seeds on a CPU" in waiting
    decay, plain = claim.margins[0].higher, claim.margins[0].lower
    records = _records({decay: {0: 61.0, 1: 60.5, 2: 61.2}, plain: {0: 59.0, 1: 59.1, 2: 58.7}}, C.STREAM)
    decided = J.best_evidence(claim, C.BUILTIN_EVIDENCE, records)
    assert decided.benchmark == C.STREAM and decided.verdict == "yes" and "the paper's stream length" in decided.sureness()
    text = "\n".join(J.stream_section([decided], reference))
    assert "are decided at that length, by the compact network" in text and "to be decided" not in text
    assert "The reference run (real images) reads *needs the paper's stream length*" in text
    assert J.stream_section([J.judge(ABOVE, C.BUILTIN, {})], [J.judge(ABOVE, C.REFERENCE, {})]) == []


def test_a_stand_in_row_says_so_in_the_row() -> None:
    claim = C.BY_KEY["ablation_memory_acc"]
    assert J.claim_text(claim).endswith("(paper: CIFAR100-C + SVHN-C; here: CIFAR-10 + Noise)")
    for c in C.LEDGER:  # every claim whose arms are the paper's CIFAR100-C + SVHN-C at a small scale
        small = any(a.dataset == "cifar100_c" and a.outliers == "svhn" for a in c.arms) and c.scales == C.SCALES
        assert bool(c.stand_in) == small, c.key
    table = J.side_by_side([J.judge(claim, C.BUILTIN, {})], [J.judge(claim, C.REFERENCE, {})])
    assert "here: CIFAR-10 + Noise" in table


def _fmt(value: float) -> str:
    return f"{value:.1f}"


#: Each claim's paper numbers: (table, data set, outlier set, method, metric, variant) of every
#: value its ``paper`` text must print (paper_numbers.csv's mean over the 15 corruptions).
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
ROW = {name: plans.ablation_label(*r) for name, r in zip(("plain", "ds", "sa", "sads", "sw", "rbm", "full"),
                                                          plans.ABLATION_ROWS)}
ABLATION = {
    "ablation_decay_with_sam_h": [("sads", "h"), ("sa", "h"), ("ds", "h")],
    "ablation_sam_softens_decay_auroc": [("sa", "auroc"), ("sads", "auroc"), ("plain", "auroc"), ("ds", "auroc")],
    "ablation_step_decay_acc": [("plain", "acc"), ("ds", "acc")],
    "ablation_memory_acc": [("full", "acc"), ("sw", "acc")],
    "ablation_self_weight_with_memory_auroc": [("full", "auroc"), ("rbm", "auroc")],
}


def test_every_paper_number_is_the_cited_tables_value() -> None:
    for key, cells in PAPER.items():
        for table, dataset, outliers, method, metric in cells:
            value = paper_value(table, dataset, outliers, method, metric)
            assert value is not None and _fmt(value) in C.BY_KEY[key].paper, (key, method, metric, value)
    for key, cells in ABLATION.items():
        for row, metric in cells:
            value = paper_value("5", "cifar100_c", "svhn", "stamp", metric, variant=ROW[row])
            assert value is not None and _fmt(value) in C.BY_KEY[key].paper, (key, row, metric, value)
    assert "second best SAR 61.7" in C.BY_KEY["cifar100_closed_best_acc"].paper
    assert all(c.quote for c in C.LEDGER)


def test_the_closed_set_rows_give_both_of_the_papers_figures() -> None:
    """Table 4a's average of the fifteen corruptions beside its own mean over the corruptions we run."""
    ours = C.BUILTIN_QUICK.corruptions
    means = {m: np.mean([paper_value("4a", "cifar10_c", "none", m, "acc", corruption=c) for c in ours])
             for m in ("stamp", "eata", "sotta", "source", "bn_stats", "tent", "cotta", "sar", "rotta", "owttt")}
    best_other = max((m for m in means if m != "stamp"), key=means.get)
    for key in ("c_best_acc", "c_lead_size"):
        claim = C.BY_KEY[key]
        assert "Avg of the 15 corruptions" in claim.paper and "on our three corruptions" in claim.paper_here
        assert _fmt(paper_value("4a", "cifar10_c", "none", "stamp", "acc")) in claim.paper
        assert _fmt(means["stamp"]) in claim.paper_here and best_other == "eata"
        assert _fmt(means[best_other]) in claim.paper_here
        assert claim.paper in J.paper_text(claim) and claim.paper_here in J.paper_text(claim)
    lead = C.BY_KEY["c_lead_size"].margins[0]
    assert lead.by == pytest.approx(paper_value("4a", "cifar10_c", "none", "stamp", "acc")
                                    - paper_value("4a", "cifar10_c", "none", "sotta", "acc"))


def test_a_stated_size_is_judged_as_a_size() -> None:
    claim = C.BY_KEY["a_auroc_lead_size"]
    assert claim.margins[0].by == pytest.approx(5.1)
    values = {a: {0: 70.0, 1: 70.0, 2: 70.0} for a in claim.arms}
    values[STAMP] = {0: 74.0, 1: 74.2, 2: 73.9}  # leads by about 4: positive, but short of +5.1
    verdict = J.judge(claim, C.REFERENCE, _records(values, C.REFERENCE))
    assert verdict.verdict == "no" and "the paper's size +5.1 subtracted" in J.ours_text(verdict)


def test_the_ledger_has_no_claim_the_paper_does_not_make() -> None:
    text = json.dumps([c.words for c in C.LEDGER])
    assert "drops least" not in text and "adds to the one before" not in text
