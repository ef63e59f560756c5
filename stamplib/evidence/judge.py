"""The ledger's claims judged on a results store: one verdict per claim and benchmark, how sure it
is, and the pages and figure that show them.

A claim (:mod:`stamplib.evidence.ledger`) has a margin under each seed: its smallest margin,
each read from that seed's records (positive where it holds), compared at the tables' precision
so that a margin that rounds to zero is a tie. Over the seeds that have every cell:

* *tie* where every seed's margin rounds to zero;
* *yes* where it holds under every seed **and** the 95 % interval of the mean margin lies above
  zero; *no* where it fails under every seed and the interval lies below zero;
* *within the noise* otherwise — the row says how many seeds hold, fail and tie, and on how
  many corruptions the mean margin holds; and also where the verdict changes when STAMP's
  records come from another CPU kind (:func:`judge`'s ``other_cpus``).

A benchmark that lacks some seeds' cells says how many it has (``2 of 3 seeds``) and names the
missing cells; a claim that its scale cannot test *needs data*; a claim on the step-size decay
*needs the paper's stream length* on a short stream.

**The interval.** The estimate is the mean over seeds of the claim's margin, each seed's margin
read from that seed's arms together (paired: the best other of a lead is found under each
seed). Its uncertainty has two sources, which the interval adds as variances:

* the seeds: the per-seed margins' variance over the number of seeds — a t-interval, exact for
  normal seed noise, where a bootstrap of 3 seeds has 10 distinct resamples and shrinks the
  variance by 2/3;
* the choice of corruptions, on the fifteen-corruption evidence only: the delete-one-corruption
  jackknife variance of the same estimate (each seed's arms still averaged together, so a lead's
  maximum and a range stay those of the mean). It treats the fifteen as a sample of corruptions
  like them, as the paper's average implicitly does. On three corruptions, a jackknife on two
  degrees of freedom would say little; the interval holds those three fixed and says so.

For a margin linear in the arms this is the crossed two-way (seeds × corruptions) random-effects
variance of the grand mean, ``(MS_seed + MS_corruption) / (S·C)`` — conservative by the
interaction's ``MS_e / (S·C)`` — with Welch–Satterthwaite degrees of freedom. No resampling, so
a page renders the same twice and the coverage test runs 1,000 draws in a blink.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from scipy import stats as scipy_stats

from stamplib import paths
from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import ledger
from stamplib.evidence.ledger import Arm, Benchmark, Claim, Difference, Lead, SmallerDrop, Within
from stamplib.experiments import plans
from stamplib.report import seeds
from stamplib.report.paper import dataset_label, method_label, outlier_label
from stamplib.report.reproduce import short_variant
from stamplib.report.tables import to_markdown

NEEDS_DATA = "needs data"
NEEDS_STREAM = "needs the paper's stream length"
TIE = "tie"
NOISE = "within the noise"
METRIC_LABELS = {"acc": "ACC", "auroc": "AUROC", "h": "H"}
CONFIDENCE = 0.95
#: Where a store keeps records of its cells computed on another CPU kind (the same keys as the
#: records beside it): the CPU rule re-judges STAMP's claims with them.
OTHER_CPUS = "other_cpus"

Records = Mapping[str, Record]


# ------------------------------------------------------------------------------- the interval


def mean_margin_interval(margin: Any, values: np.ndarray, across_corruptions: bool,
                         confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mean margin and its interval (module docstring) from ``values`` of shape
    ``(..., arms, seeds, corruptions)``: ``margin`` maps a tuple of per-arm arrays to the claim's
    margin. Leading dimensions are independent draws (the coverage test's); returns arrays of
    the leading shape: (estimate, low, high)."""
    values = np.asarray(values, dtype=float)
    n_seeds, n_corr = values.shape[-2], values.shape[-1]

    def estimate(v: np.ndarray) -> np.ndarray:  # (..., arms, seeds, corruptions') -> (..., seeds)
        by_arm = v.mean(axis=-1)
        return margin(tuple(np.moveaxis(by_arm, -2, 0)))

    per_seed = estimate(values)  # (..., seeds)
    point = per_seed.mean(axis=-1)
    v_seed = per_seed.var(axis=-1, ddof=1) / n_seeds if n_seeds > 1 else np.zeros_like(point)
    v_corr = np.zeros_like(point)
    if across_corruptions and n_corr > 2:
        total = values.sum(axis=-1, keepdims=True)
        # Leave one corruption out: the mean over the other C-1, for each left out at once.
        loo = (total - values) / (n_corr - 1)  # (..., arms, seeds, C): the mean without corruption c
        loo = np.moveaxis(loo, -1, 0)  # (C, ..., arms, seeds)
        jack = np.stack([margin(tuple(np.moveaxis(loo[c], -2, 0))).mean(axis=-1) for c in range(n_corr)])
        v_corr = (n_corr - 1) / n_corr * ((jack - jack.mean(axis=0)) ** 2).sum(axis=0)
    variance = v_seed + v_corr
    with np.errstate(divide="ignore", invalid="ignore"):
        df_terms = (v_seed ** 2 / max(n_seeds - 1, 1)) + (v_corr ** 2 / max(n_corr - 1, 1) if across_corruptions
                                                          else 0.0)
        df = np.where(df_terms > 0, variance ** 2 / np.where(df_terms > 0, df_terms, 1.0), max(n_seeds - 1, 1))
    half = scipy_stats.t.ppf(0.5 + confidence / 2, np.maximum(df, 1.0)) * np.sqrt(variance)
    return point, point - half, point + half


def interval_words(benchmark: Benchmark) -> str:
    """What the interval of ``benchmark``'s verdicts holds fixed, in words."""
    if len(benchmark.corruptions) > 3:
        return (f"95 % interval over the seeds and over the choice of corruptions (the {len(benchmark.corruptions)} "
                "taken as a sample of corruptions: t-interval, seed variance plus the jackknife over corruptions)")
    return (f"95 % t-interval over the seeds, the {len(benchmark.corruptions)} corruptions "
            f"({_corruption_names(benchmark.corruptions)}) held fixed")


def _corruption_names(corruptions: Sequence[str]) -> str:
    names = [c.replace("_", " ") for c in corruptions]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


# ------------------------------------------------------------------------------- a verdict


@dataclass(frozen=True)
class Verdict:
    """One claim judged on one benchmark's records."""

    claim: Claim
    benchmark: Benchmark
    decision: seeds.Decision  # on the seeds that have every cell (PENDING where none has)
    values: Mapping[Arm, Mapping[int, float]]  # each arm's metric under each seed stored
    margins: Mapping[int, float]  # the claim's smallest margin under each decided seed
    missing: tuple[tuple[Arm, int], ...] = ()  # (arm, seed) without a record, over the benchmark's seeds
    interval: tuple[float, float] | None = None  # 95 % interval of the mean margin (module docstring)
    needs_data: bool = False
    needs_stream: bool = False
    missing_specs: tuple[RunSpec, ...] = field(default=(), compare=False)
    corruption_margins: Mapping[str, float] = field(default_factory=dict)  # mean over the decided seeds
    cpu_note: str = ""  # where the verdict changes with the CPU kind behind STAMP's records
    cpus: tuple[str, ...] = ()  # the CPU kinds (or devices) behind the records read

    @property
    def decided_seeds(self) -> tuple[int, ...]:
        return self.decision.seeds

    @property
    def complete(self) -> bool:
        """Every seed of the benchmark has every cell."""
        return not self.needs_data and not self.needs_stream and not self.missing

    @property
    def tied(self) -> tuple[int, ...]:
        return tuple(s for s in self.decided_seeds if s not in self.decision.held and s not in self.decision.failed)

    @property
    def verdict(self) -> str:
        """The bare verdict over the decided seeds: yes, no, tie, within the noise, pending,
        needs data, needs the paper's stream length, or a single seed's yes / no / tie."""
        if self.needs_data:
            return NEEDS_DATA
        if self.needs_stream:
            return NEEDS_STREAM
        if self.decision.answer == seeds.PENDING:
            return seeds.PENDING
        if self.decision.answer == seeds.ONE_SEED:
            return self.decision.reading
        have = self.decided_seeds
        if len(self.tied) == len(have):
            return TIE
        if self.cpu_note:
            return NOISE
        low, high = self.interval if self.interval is not None else (math.nan, math.nan)
        if len(self.decision.held) == len(have) and low > 0:
            return seeds.YES
        if len(self.decision.failed) == len(have) and high < 0:
            return seeds.NO
        return NOISE

    @property
    def answer(self) -> str:
        """The verdict over all the benchmark's seeds; ``2 of 3 seeds (seeds 0 and 1: yes)`` over
        some; ``pending`` with none; ``needs data``; ``needs the paper's stream length``."""
        reading = self.verdict
        if self.needs_data or self.needs_stream or reading == seeds.PENDING:
            return reading
        have, of = len(self.decided_seeds), len(self.benchmark.seeds)
        if have >= of:
            return reading if of > 1 else f"{seeds.ONE_SEED} ({seeds.seeds_text(self.decided_seeds)}: {reading})"
        return f"{have} of {of} seeds ({seeds.seeds_text(self.decided_seeds)}: {reading})"

    def seed_counts(self) -> str:
        """``4 of 5 seeds hold, 1 fails`` (ties named where there are any)."""
        have = len(self.decided_seeds)
        if have < 2:  # a single seed's reading is the answer itself
            return ""
        held, failed, tied = len(self.decision.held), len(self.decision.failed), len(self.tied)
        parts = [f"{held} of {have} seeds hold"]
        if failed:
            parts.append(f"{failed} {'fails' if failed == 1 else 'fail'}")
        if tied:
            parts.append(f"{tied} {'ties' if tied == 1 else 'tie'}")
        return ", ".join(parts)

    def corruption_counts(self) -> str:
        """``12 of 15 corruptions hold`` (the mean margin over the decided seeds, per corruption)."""
        found = self.corruption_margins
        if not found:
            return ""
        held = sum(round(v, self.claim.digits) > 0 for v in found.values())
        return f"{held} of {len(found)} corruptions hold"

    def evidence(self) -> str:
        """``15 corruptions, seeds 0–4`` or ``3 corruptions (gaussian noise, …), seeds 0–2``."""
        corruptions = self.benchmark.corruptions
        which = "" if len(corruptions) > 3 else f" ({_corruption_names(corruptions)})"
        over = self.decided_seeds or self.benchmark.seeds
        stream = ", the paper's stream length (the compact network on 10,000 JPEG images + 2,500 outliers)" \
            if self.benchmark.scale == "stream" else ""
        return f"{len(corruptions)} corruptions{which}, {seeds.seeds_text(over)}{stream}"

    def sureness(self) -> str:
        """How sure: the seed counts, the corruptions held, the evidence and the CPU note."""
        if self.needs_data or self.needs_stream or not self.decided_seeds:
            return ""
        # The counts name how many seeds and corruptions the verdict rests on; the page names which.
        parts = [p for p in (self.seed_counts(), self.corruption_counts()) if p]
        if self.benchmark.scale == "stream":
            parts.append("the paper's stream length")
        text = "; ".join(parts)
        if self.cpu_note:
            text += f"; {self.cpu_note}"
        return text

    def difference(self) -> seeds.Spread:
        """The paired difference over the decided seeds: mean, min and max."""
        return seeds.Spread.of(self.margins)

    def difference_text(self) -> str:
        """``+1.2 (−0.5 to +2.1), 95 % CI +0.3 to +1.9`` (mean, then min to max over the seeds)."""
        spread = self.difference()
        if not spread.seeds:
            return "—"
        text = seeds.signed(spread.mean, 1)
        if len(spread.seeds) > 1:
            text += f" ({seeds.signed(spread.low, 1)} to {seeds.signed(spread.high, 1)})"
        if self.interval is not None:
            text += f", 95 % CI {seeds.signed(self.interval[0], 1)} to {seeds.signed(self.interval[1], 1)}"
        return text

    def missing_text(self) -> str:
        """The missing cells, arm by arm: ``CoTTA (a) seeds 1 and 2; STAMP (b) seed 2``."""
        by_arm: dict[Arm, list[int]] = {}
        for arm, seed in self.missing:
            by_arm.setdefault(arm, []).append(seed)
        shared = set(map(tuple, by_arm.values()))
        if len(by_arm) == len(self.claim.arms) > 2 and len(shared) == 1:
            (missed,) = shared
            return f"all {len(by_arm)} rows compared, {seeds.seeds_text(missed)} ({len(self.missing)} cells)"
        return "; ".join(f"{arm_label(a)} {seeds.seeds_text(s)}" for a, s in by_arm.items())


# ------------------------------------------------------------------------------- judging


def _metric(record: Record, metric: str) -> float:
    return float(record.mean.scores[metric])


def _per_corruption(record: Record, metric: str) -> dict[str, float]:
    return {c: float(row.scores[metric]) for c, row in record.per_corruption.items()}


def _combined(claim: Claim, value: Mapping[Arm, Any]) -> Any:
    """The claim's smallest margin (arrays allowed)."""
    return np.min(np.stack([np.asarray(m.margin(value), dtype=float) for m in claim.margins]), axis=0)


def _array(claim: Claim, records: Mapping[tuple[Arm, int], Record], decided: Sequence[int]
           ) -> tuple[np.ndarray, tuple[str, ...]] | None:
    """The decided seeds' per-corruption values, ``(arms, seeds, corruptions)``, over the
    corruptions every record has (None where they share none or one is not finite)."""
    arms = claim.arms
    shared = set.intersection(*(set(records[(a, s)].per_corruption) for a in arms for s in decided))
    corruptions = tuple(c for c in CORRUPTIONS if c in shared) + tuple(sorted(shared - set(CORRUPTIONS)))
    if not corruptions:
        return None
    table = np.array([[[_per_corruption(records[(a, s)], claim.metric)[c] for c in corruptions] for s in decided]
                      for a in arms])
    return (table, corruptions) if np.isfinite(table).all() else None


def _interval(claim: Claim, table: np.ndarray, benchmark: Benchmark) -> tuple[float, float] | None:
    arms = claim.arms
    if table.shape[1] < 2:
        return None

    def margin(by_arm: tuple[np.ndarray, ...]) -> np.ndarray:
        return _combined(claim, dict(zip(arms, by_arm)))

    _, low, high = mean_margin_interval(margin, table, across_corruptions=len(benchmark.corruptions) > 3)
    return float(low), float(high)


def _corruption_margins(claim: Claim, table: np.ndarray, corruptions: Sequence[str]) -> dict[str, float]:
    """Per corruption, the claim's margin under each seed, averaged over the seeds."""
    per = _combined(claim, dict(zip(claim.arms, table)))  # (seeds, corruptions)
    return {c: float(v) for c, v in zip(corruptions, np.mean(per, axis=0))}


def cpu_kind(record: Record) -> str:
    """The CPU model a record names (``provenance.cpu``), its GPU device, or ``CPU not recorded``."""
    device = str(record.device or "cpu")
    if device.startswith("cuda"):
        return "GPU (CUDA)"
    cpu = record.provenance.cpu if record.provenance is not None else None
    return str(cpu.get("model")) if cpu and cpu.get("model") else "CPU not recorded"


def judge(claim: Claim, benchmark: Benchmark, records: Records,
          other_cpus: Mapping[str, Sequence[Record]] | None = None) -> Verdict:
    """``claim`` on ``benchmark``, from ``records`` (by key). ``other_cpus``: records of the same
    keys computed on other CPU kinds; where substituting one kind's STAMP records changes the
    verdict, the verdict is *within the noise* (the float rounding of a CPU's kernels moves
    STAMP's Noise-outlier cells by points: its threshold decides which samples it adapts on)."""
    if not ledger.testable(claim, benchmark):
        return Verdict(claim, benchmark, seeds.Decision(seeds.PENDING), {}, {}, needs_data=True)
    if ledger.needs_stream(claim, benchmark):
        return Verdict(claim, benchmark, seeds.Decision(seeds.PENDING), {}, {}, needs_stream=True)
    found: dict[tuple[Arm, int], Record] = {}
    missing: list[tuple[Arm, int]] = []
    missing_specs: list[RunSpec] = []
    for seed in benchmark.seeds:
        for arm in claim.arms:
            spec = ledger.spec(arm, benchmark, seed)
            record = records.get(spec.key()) if spec is not None else None
            if record is None:
                missing.append((arm, seed))
                if spec is not None:
                    missing_specs.append(spec)
            else:
                found[(arm, seed)] = record
    values = {a: {s: _metric(found[(a, s)], claim.metric) for s in benchmark.seeds if (a, s) in found}
              for a in claim.arms}
    parts = []
    for margin in claim.margins:
        have = seeds.paired(*(values[a] for a in margin.arms))
        parts.append({s: float(margin.margin({a: values[a][s] for a in margin.arms})) for s in have})
    decision = seeds.decide_all(parts, claim.digits) if all(parts) else seeds.Decision(seeds.PENDING)
    decided = [s for s in decision.seeds if all(s in values[a] for a in claim.arms)]
    margins = {s: float(_combined(claim, {a: values[a][s] for a in claim.arms})) for s in decided}
    interval, by_corruption = None, {}
    shaped = _array(claim, found, decided) if decided else None
    if shaped is not None:
        table, corruptions = shaped
        interval = _interval(claim, table, benchmark)
        by_corruption = _corruption_margins(claim, table, corruptions)
    if decision.answer == seeds.NO and len(decided) < len(decision.seeds):
        # One part fails under all of its seeds while the parts share fewer: the claim's margin is
        # at most that part's, so that part alone, with its own interval, can decide *no*.
        for margin, part in zip(claim.margins, parts):
            if set(part) == set(decision.seeds):
                alone = judge(dataclasses.replace(claim, margins=(margin,)), benchmark, records, other_cpus)
                if alone.verdict == seeds.NO:
                    return dataclasses.replace(alone, claim=claim, missing=tuple(missing),
                                               missing_specs=tuple(missing_specs))
    cpus = tuple(sorted({cpu_kind(r) for r in found.values()}))
    verdict = Verdict(claim, benchmark, decision, values, margins, tuple(missing), interval,
                      missing_specs=tuple(missing_specs), corruption_margins=by_corruption, cpus=cpus)
    note = _cpu_note(verdict, records, other_cpus or {})
    return dataclasses.replace(verdict, cpu_note=note) if note else verdict


def _cpu_note(verdict: Verdict, records: Records, other_cpus: Mapping[str, Sequence[Record]]) -> str:
    """Where STAMP's records of another CPU kind change the verdict, which kind and what it reads."""
    claim = verdict.claim
    stamp_keys = {ledger.spec(a, verdict.benchmark, s).key() for a in claim.arms if a.method == "stamp"
                  for s in verdict.benchmark.seeds if ledger.spec(a, verdict.benchmark, s) is not None}
    by_kind: dict[str, dict[str, Record]] = {}
    for key in stamp_keys:
        for record in other_cpus.get(key, ()):
            by_kind.setdefault(cpu_kind(record), {})[key] = record
    changed = []
    for kind, swapped in sorted(by_kind.items()):
        again = judge(claim, verdict.benchmark, {**records, **swapped})
        if again.verdict != verdict.verdict:
            changed.append(f"reads *{again.verdict}* with STAMP's records from {kind}")
    return "; ".join(changed)


def other_cpu_records(store: ResultsStore) -> dict[str, list[Record]]:
    """The records of ``store``'s cells computed on another CPU kind, by key (its
    :data:`OTHER_CPUS` folder; empty where it has none)."""
    folder = Path(store.root) / OTHER_CPUS
    found: dict[str, list[Record]] = {}
    if folder.is_dir():
        for record in ResultsStore(folder).records():
            found.setdefault(record.key, []).append(record)
    return found


def judge_all(store: ResultsStore, benchmark: Benchmark | Sequence[Benchmark],
              claims: Sequence[Claim] = ledger.LEDGER) -> list[Verdict]:
    """Every claim of the ledger from ``store``'s records, on ``benchmark`` — or, given several
    (best evidence first, such as :data:`stamplib.evidence.ledger.BUILTIN_EVIDENCE`), on the
    first that has the claim's cells over :data:`stamplib.evidence.ledger.ENOUGH_SEEDS` seeds,
    else on the last."""
    records = store.records_by_key()
    others = other_cpu_records(store)
    choices = (benchmark,) if isinstance(benchmark, Benchmark) else tuple(benchmark)
    return [best_evidence(c, choices, records, others) for c in claims]


def best_evidence(claim: Claim, choices: Sequence[Benchmark], records: Records,
                  other_cpus: Mapping[str, Sequence[Record]] | None = None) -> Verdict:
    """``claim`` judged on the first of ``choices`` with enough seeds (:func:`judge_all`)."""
    judged = [judge(claim, b, records, other_cpus) for b in choices]
    for verdict in judged[:-1]:
        if len(verdict.decided_seeds) >= min(ledger.ENOUGH_SEEDS, len(verdict.benchmark.seeds)):
            return verdict
    return judged[-1]


# ------------------------------------------------------------------------------- words


_SETTINGS = {(plans.TABLE1.notebook, "cifar10_c", "noise"): "(a)",
             (plans.CLASS_SPLIT.notebook, "cifar10_c_8_2", "heldout_classes"): "(b)",
             (plans.CLOSED_SET.notebook, "cifar10_c", "none"): "(c)"}


def arm_label(arm: Arm) -> str:
    """``CoTTA (a)``, ``STAMP K=1``, ``STAMP S.A.+D.S.``, ``Tent at 5 %``, ``STAMP (CIFAR100-C + SVHN-C)``."""
    name = method_label(arm.method)
    if arm.variant.startswith("ratio="):
        return f"{name} at {100 * float(arm.variant.removeprefix('ratio=')):.0f} %"
    if arm.variant:
        return f"{name} {short_variant(arm.variant)}"
    setting = _SETTINGS.get((arm.experiment, arm.dataset, arm.outliers))
    if setting:
        return f"{name} {setting}"
    return f"{name} ({dataset_label(arm.dataset)} + {outlier_label(arm.outliers)})"


def _text(values: Mapping[int, float], over: Sequence[int]) -> str:
    return seeds.Spread.of({s: v for s, v in values.items() if s in over}).text()


def _best_other(verdict: Verdict, lead: Lead) -> Arm:
    over = verdict.decided_seeds
    return max(lead.others, key=lambda a: float(np.mean([verdict.values[a][s] for s in over])))


def ours_text(verdict: Verdict) -> str:
    """Our numbers behind a verdict over its decided seeds: the arms compared, the paired
    difference with its spread and interval, and the missing cells."""
    if verdict.needs_data:
        return f"needs {verdict.claim.needs}"
    if verdict.needs_stream:
        return NEEDS_STREAM
    over = verdict.decided_seeds
    metric = METRIC_LABELS[verdict.claim.metric]
    pieces = []
    if over:
        for margin in verdict.claim.margins:
            pieces.append(_margin_text(verdict, margin, over))
    text = f"{metric} " + "; ".join(pieces) if pieces else "—"
    if over:
        text += f" ({seeds.seeds_text(over)}); paired Δ {verdict.difference_text()}"
    if verdict.missing:
        text += f"; missing: {verdict.missing_text()}"
    return text


def _size_text(by: float) -> str:
    return f" (the paper's size {by:+.1f} subtracted)" if by else ""


def _margin_text(verdict: Verdict, margin: Any, over: Sequence[int]) -> str:
    v = verdict.values
    if isinstance(margin, Lead):
        best = _best_other(verdict, margin)
        return (f"{arm_label(margin.arm)} {_text(v[margin.arm], over)}, best other {arm_label(best)} "
                f"{_text(v[best], over)}" + _size_text(margin.by))
    if isinstance(margin, Difference):
        return f"{arm_label(margin.higher)} {_text(v[margin.higher], over)} vs {arm_label(margin.lower)} " \
               f"{_text(v[margin.lower], over)}" + _size_text(margin.by)
    if isinstance(margin, Within):
        widths = {s: max(v[a][s] for a in margin.arms) - min(v[a][s] for a in margin.arms) for s in over}
        return (", ".join(f"{arm_label(a)} {_text(v[a], over)}" for a in margin.arms)
                + f"; range {_text(widths, over)} (limit {margin.width:g})")
    assert isinstance(margin, SmallerDrop), margin
    drop = {s: v[margin.before][s] - v[margin.after][s] for s in over}
    other = {s: v[margin.other_before][s] - v[margin.other_after][s] for s in over}
    return (f"drop {method_label(margin.other_before.method)} {_text(other, over)} vs "
            f"{method_label(margin.before.method)} {_text(drop, over)}")


# ------------------------------------------------------------------------------- a notebook's claims


def notebook_verdicts(plan: plans.Plan, records: Records) -> list[Verdict]:
    """The ledger's claims that read ``plan``'s experiment, judged on its records at its profile,
    scale and seeds (a notebook's own cells: the quick profile's variants have seed 0 alone, so
    their verdicts are one seed's; ``docs/claims.md`` has the committed evidence over seeds)."""
    if not plan.cells:
        return []
    first = plan.cells[0].spec
    chosen = tuple(sorted({c.spec.seed for c in plan.cells}))
    benchmark = Benchmark(plan.notebook, first.profile, plan.scale, chosen, tuple(first.corruptions), plan.notebook,
                          paper_stream=first.profile == "full")
    mine = [c for c in ledger.LEDGER if any(a.experiment == plan.notebook for a in c.arms)]
    return [v for v in (judge(c, benchmark, records) for c in mine) if not v.needs_data]


def notebook_text(plan: plans.Plan, records: Records) -> str:
    """What a notebook prints under its table: each of the paper's claims it tests, the verdict
    on its own records and our numbers behind it (the ledger: docs/claims.md)."""
    found = notebook_verdicts(plan, records)
    if not found:
        return "The ledger has no claim on this notebook's cells (docs/claims.md lists every claim)."
    lines = [f"The paper's claims on these cells (the ledger, docs/claims.md; over {seeds.seeds_text(found[0].benchmark.seeds)}):"]
    lines += [f"- {v.claim.words} ({v.claim.where}): {v.answer}. {ours_text(v)}" for v in found]
    return "\n".join(lines)


# ------------------------------------------------------------------------------- tables and pages


RULE = ("decided seed by seed on the seeds that have every cell the claim compares (a margin that rounds to 0.0 "
        "is a tie): *tie* if every seed ties; *yes* if it holds under every seed and the 95 % interval of the mean "
        "margin lies above 0; *no* if it fails under every seed and the interval lies below 0; otherwise *within "
        "the noise*, and so too where STAMP's records from another CPU kind change the verdict. Each row says how "
        "many seeds hold, fail and tie, on how many corruptions the mean margin holds, and which corruptions and "
        "seeds it rests on; where some seeds' cells are missing it says how many seeds it has (*1 of 3 seeds*, "
        "with their reading) and names the missing cells. Paired Δ: the claim's smallest margin under each seed "
        "(positive where it holds; a stated size is subtracted first), its mean, its min to max and the 95 % "
        "interval of the mean: a t-interval over the seeds, on fifteen corruptions widened by the jackknife "
        "variance over the choice of corruptions, on three corruptions with those three held fixed")


def claim_text(claim: Claim) -> str:
    """The claim's words, with the stand-in data set named in the row where there is one."""
    return f"{claim.words} ({claim.stand_in})" if claim.stand_in else claim.words


def paper_text(claim: Claim) -> str:
    """The paper's numbers: the cited table's value with its data set and average, and where it
    prints per-corruption values, its values on the corruptions we run (labelled)."""
    return f"{claim.paper}; {claim.paper_here}" if claim.paper_here else claim.paper


def readme_table(verdicts: Sequence[Verdict]) -> str:
    """The README's table of the claims the reference run can test: claim, where, verdict (with
    how sure), the paper's numbers, ours."""
    rows = [{"claim": claim_text(v.claim), "paper": v.claim.where, "holds here": _verdict_cell(v),
             "paper's numbers": paper_text(v.claim), "ours": ours_text(v)} for v in verdicts if not v.needs_data]
    return to_markdown(_frame(rows, ("claim", "paper", "holds here", "paper's numbers", "ours")))


def _verdict_cell(verdict: Verdict) -> str:
    sure = verdict.sureness()
    return f"**{verdict.answer}**" + (f" ({sure})" if sure else "")


def _frame(rows: list[dict[str, str]], columns: Sequence[str]) -> Any:
    import pandas as pd

    return pd.DataFrame(rows, columns=list(columns))


def side_by_side(first: Sequence[Verdict], second: Sequence[Verdict], titles: Sequence[str] = ()) -> str:
    """``docs/claims.md``'s table: every claim with the paper's numbers and both benchmarks'
    verdicts, how sure each is, and the paired Δ."""
    assert [v.claim.key for v in first] == [v.claim.key for v in second]
    a, b = titles or (first[0].benchmark.title, second[0].benchmark.title)
    rows = []
    for x, y in zip(first, second):
        rows.append({"claim": claim_text(x.claim), "paper": x.claim.where, "the paper's numbers": paper_text(x.claim),
                     "metric": METRIC_LABELS[x.claim.metric],
                     a: _verdict_cell(x), f"{a}: paired Δ": _delta_cell(x),
                     b: _verdict_cell(y), f"{b}: paired Δ": _delta_cell(y)})
    columns = ("claim", "paper", "the paper's numbers", "metric", a, f"{a}: paired Δ", b, f"{b}: paired Δ")
    return to_markdown(_frame(rows, columns))


def _delta_cell(verdict: Verdict) -> str:
    if verdict.needs_data:
        return f"needs {verdict.claim.needs}"
    if verdict.needs_stream:
        return "—"
    text = verdict.difference_text()
    if verdict.missing:
        text += f"; missing: {verdict.missing_text()}"
    return text


PAGE = Path("docs") / "claims.md"
FIGURE = "claims"  # figures/claims.png, committed beside the page
PAGE_COMMAND = "python -m stamplib claims render"
BUILTIN_TITLE, REFERENCE_TITLE = "built-in benchmark", "reference run (real images)"


def cpu_kinds(store: ResultsStore) -> str:
    """Which CPU kinds (and GPUs) computed ``store``'s records, with how many each: the model
    and vector extensions a record's provenance names; records from before they were named are
    counted as such (their store's README.md says where they were computed)."""
    tally: dict[str, int] = {}
    for record in store.records():
        cpu = record.provenance.cpu if record.provenance is not None else None
        kind = cpu_kind(record)
        if cpu and cpu.get("model") and kind != "GPU (CUDA)":
            extensions = [e for e in cpu.get("extensions", ()) if e.startswith(("avx512", "amx"))]
            kind += f" ({', '.join(extensions) if extensions else 'no AVX-512'})"
        tally[kind] = tally.get(kind, 0) + 1
    order = sorted(tally, key=lambda k: (k in ("CPU not recorded", "GPU (CUDA)"), k))
    text = ", ".join(f"{tally[k]} on {k}" if k != "CPU not recorded" else f"{tally[k]} that do not name their CPU"
                     for k in order)
    others = [r for found in other_cpu_records(store).values() for r in found]
    if others:
        kinds = sorted({cpu_kind(r) for r in others})
        text += f"; {len(others)} more in `{OTHER_CPUS}/` on {', '.join(kinds)}"
    return text


def _three_corruption_list(verdicts: Sequence[Verdict]) -> str:
    found = [v.claim.key for v in verdicts if not v.needs_data and not v.needs_stream
             and len(v.benchmark.corruptions) <= 3]
    return ", ".join(f"`{k}`" for k in found) if found else "none"


STREAM_WHY = ("With T = 150 the cosine step size is still 0.96× its start at a quick stream's last batch (0.84× on "
              "the reference run's 40 batches) against 0.21× at the paper's 196: on these streams the decay has not "
              "acted, so these claims are decided only on streams of the paper's length (10,000 known-class images + "
              "2,500 outliers per corruption, all fifteen corruptions, seeds 0–2).")
STREAM_COMMAND = ("`python -m stamplib benchmark compute --paper-stream --seeds 0-2 --data-root <folder with "
                  "cifar10-jpeg.tar.gz>`")


def stream_section(first: Sequence[Verdict], second: Sequence[Verdict]) -> list[str]:
    """The page's section on the claims decided only at the paper's stream length: which scale
    decides them, and which benchmark still waits for it (none where no claim needs the length)."""
    claims = [v for v in first if v.claim.stream]
    if not claims:
        return []
    decided = any(v.benchmark.scale == "stream" for v in claims)
    lines = ["## Claims that need the paper's stream length", "", STREAM_WHY, ""]
    scale = ("the compact network of the built-in benchmark on the 10,000 JPEG test images of `shared/data` "
             f"({STREAM_COMMAND}, about 6.5–10 CPU-hours by `benchmarks/paper_stream_cost.py`)")
    if decided:
        lines.append(f"On the {BUILTIN_TITLE} they are decided at that length, by {scale}: its rows say "
                     "\"the paper's stream length\".")
    elif any(v.needs_stream for v in first):
        lines.append(f"On the {BUILTIN_TITLE} they are to be decided by {scale}; until its cells are in for "
                     f"{ledger.ENOUGH_SEEDS} seeds they read *{NEEDS_STREAM}*.")
    if any(v.needs_stream for v in second):
        lines.append(f"The {REFERENCE_TITLE} reads *{NEEDS_STREAM}*: its ResNet-18 keeps 16 views a sample, so at "
                     "the paper's length a seed would cost about 5× its 1,500–3,600 CPU-s of today's streams, too "
                     "slow for three seeds on a CPU, and no command computes its rows at that length yet.")
    lines.append("")
    lines += [f"- {claim_text(v.claim)} ({v.claim.where}; the paper: {v.claim.paper})." for v in claims]
    lines.append("")
    return lines


def page(first: Sequence[Verdict], second: Sequence[Verdict], cpus: Mapping[str, str] | None = None) -> str:
    """The whole of ``docs/claims.md`` (``cpus``: per benchmark title, :func:`cpu_kinds`)."""
    titles = (BUILTIN_TITLE, REFERENCE_TITLE)
    counts = {title: verdict_tally(vs) for title, vs in zip(titles, (first, second))}
    lines = [
        "# The paper's claims, decided", "",
        f"Generated by `{PAGE_COMMAND}` from `results/builtin_benchmark/` and `results/reference/`; do not edit. "
        "Each claim is written once, in `stamplib/evidence/ledger.py` (the ledger): its words, where the paper "
        "makes it, the paper's table cells or sentence it rests on, the paper's numbers with their data set and "
        "average, the metric and the margins that must be positive. The README, `docs/builtin_benchmark.md` and "
        "`docs/reference_run.md` read their verdicts from it.", "",
        f"- **{BUILTIN_TITLE}**: the quick profile's stream (1,024 photographs + 256 outliers per corruption) on "
        f"the built-in CIFAR-10 photographs, seeds 0–4. A claim is judged over the paper's fifteen corruptions "
        f"once it has their cells for {ledger.ENOUGH_SEEDS} seeds (`python -m stamplib benchmark compute --seeds "
        "0-2`, then `--seeds 3,4`), until then over the quick profile's three (`./run_all.sh`).",
        f"- **{REFERENCE_TITLE}**: the ResNet-18 run on the JPEG CIFAR-10 of `shared/data`, seeds 0–2. A claim is "
        "judged over the fifteen corruptions once it has their cells (`python -m stamplib reference compute "
        "--cells claims_all`; on a CPU only for the claims that read Source, BN Stats, Tent and EATA, on a GPU "
        "`benchmarks/gpu_session.sh` with `CELLS=claims_all`), until then over three "
        "(`python -m stamplib reference compute --cells claims`).", "",
        "**Which claims rest on three corruptions** (gaussian noise, defocus blur and contrast, where the "
        "paper averages fifteen; one corruption then weighs a third of the mean, not a fifteenth): on the "
        f"{BUILTIN_TITLE}, {_three_corruption_list(first)}; on the {REFERENCE_TITLE}, "
        f"{_three_corruption_list(second)}.", "",
    ]
    if cpus:
        lines += ["**Which CPUs computed them** (a record's provenance names its CPU model and vector extensions; "
                  "the float rounding of another CPU kind can move STAMP's Noise-outlier cells by points): "
                  + "; ".join(f"{title}: {text}" for title, text in cpus.items()) + ". A verdict that changes when "
                  f"STAMP's records come from another CPU kind reads *{NOISE}*; a store keeps such records in its "
                  f"`{OTHER_CPUS}/` folder, and where it has none for a claim's cells the rule cannot check it.", ""]
    lines += [
        "Verdicts are " + RULE + ".", "",
        "Verdicts: " + "; ".join(f"{title}: {text}" for title, text in counts.items()) + ".", "",
        side_by_side(first, second, titles), "",
        "![Per claim and corruption, the mean margin over the seeds on both benchmarks](../figures/claims.png)", "",
        "Each cell is the claim's margin on one corruption, the mean over the seeds (blue where the claim holds, "
        "red where it fails, white at 0; a cross marks a margin that rounds to 0). A row with three cells rests on "
        "the three corruptions; a blank row has no evidence yet. It shows which corruption drives which verdict.",
        "",
    ]
    lines += stream_section(first, second)
    lines += ["## What each claim rests on", "",
              "The paper's table cells (bold as printed) and, for the text, its sentence as transcribed in "
              "`docs/spec/paper_numbers.md` (paraphrased, with the numbers it quotes); where a section's reading "
              "of a table is not transcribed there, the row says so.", ""]
    lines += [f"- `{v.claim.key}` ({v.claim.where}): {v.claim.quote}." for v in first]
    lines.append("")
    needs = [v for v in first if v.needs_data]
    if needs:
        lines += ["## Claims that need other data", "",
                  "These hold for data sets neither benchmark has; a full-profile store with the data judges them "
                  "(`stamplib.evidence.judge.judge_all(store, ledger.full_benchmark(seeds))`).", ""]
        lines += [f"- {v.claim.words} ({v.claim.where}; the paper: {v.claim.paper}): needs {v.claim.needs}."
                  for v in needs]
        lines.append("")
    return "\n".join(lines)


def verdict_tally(verdicts: Sequence[Verdict]) -> str:
    """How many of ``verdicts`` read each verdict ("3 yes, 1 no, 4 within the noise"), in a fixed
    order; a claim still short of seeds counts as "not all seeds yet", whatever its partial reading."""
    tally: dict[str, int] = {}
    for v in verdicts:
        key = v.verdict if v.complete or v.needs_data or v.needs_stream else "not all seeds yet"
        tally[key] = tally.get(key, 0) + 1
    order = (seeds.YES, seeds.NO, TIE, NOISE, "not all seeds yet", seeds.PENDING, NEEDS_STREAM, NEEDS_DATA)
    return ", ".join(f"{tally[k]} {k}" for k in order if k in tally)


# ------------------------------------------------------------------------------- the figure


def figure(first: Sequence[Verdict], second: Sequence[Verdict]) -> plt.Figure:
    """Claims × corruptions: per testable claim and corruption, the claim's mean margin over the
    seeds on each benchmark, zero white, with the verdict beside each row."""
    from matplotlib.colors import SymLogNorm

    shown = [(x, y) for x, y in zip(first, second) if not x.needs_data and not x.needs_stream]
    fig, axes = plt.subplots(1, 2, figsize=(14, 0.34 * len(shown) + 2.2), sharey=True,
                             gridspec_kw={"wspace": 0.42})
    norm = SymLogNorm(linthresh=1.0, linscale=0.8, vmin=-40, vmax=40)
    image = None
    for ax, index, title in ((axes[0], 0, BUILTIN_TITLE), (axes[1], 1, REFERENCE_TITLE)):
        grid = np.full((len(shown), len(CORRUPTIONS)), np.nan)
        for row, pair in enumerate(shown):
            for column, corruption in enumerate(CORRUPTIONS):
                value = pair[index].corruption_margins.get(corruption)
                if value is not None:
                    grid[row, column] = value
        image = ax.imshow(grid, cmap="RdBu", norm=norm, aspect="auto", interpolation="nearest")
        ties = np.argwhere(np.round(np.nan_to_num(grid, nan=1.0), 1) == 0)
        ax.scatter(ties[:, 1], ties[:, 0], marker="x", color="black", s=10, lw=0.8)
        ax.set_xticks(range(len(CORRUPTIONS)), [c.replace("_", " ") for c in CORRUPTIONS], rotation=60, ha="right",
                      fontsize=7)
        ax.set_title(title, fontsize=9)
        for row, pair in enumerate(shown):
            ax.text(len(CORRUPTIONS) - 0.3, row, f" {pair[index].verdict}", va="center", fontsize=6.5,
                    clip_on=False)
    axes[0].set_yticks(range(len(shown)), [_short_words(x.claim) for x, _ in shown], fontsize=7)
    bar = fig.colorbar(image, ax=axes, shrink=0.6, pad=0.1)
    bar.set_label("margin, points (the claim holds above 0; symmetric log beyond ±1)", fontsize=8)
    ticks = [-30, -10, -3, -1, 0, 1, 3, 10, 30]
    bar.set_ticks(ticks, labels=[f"{t:+d}" if t else "0" for t in ticks])
    return fig


def _short_words(claim: Claim) -> str:
    words = claim.words if len(claim.words) <= 62 else claim.words[:59].rstrip() + "…"
    return f"{words} [{METRIC_LABELS[claim.metric]}]"


def render(builtin_store: ResultsStore, reference_store: ResultsStore, root: Path) -> list[Path]:
    """Write ``docs/claims.md`` and ``figures/claims.png`` under ``root`` (the checkout)."""
    first = judge_all(builtin_store, ledger.BUILTIN_EVIDENCE)
    second = judge_all(reference_store, ledger.REFERENCE_EVIDENCE)
    return write(first, second, builtin_store, reference_store, root)


def write(first: Sequence[Verdict], second: Sequence[Verdict], builtin_store: ResultsStore,
          reference_store: ResultsStore, root: Path) -> list[Path]:
    """:func:`render` for verdicts already judged on those stores (``first`` on the built-in
    benchmark's, ``second`` on the reference run's), so that a caller that needs them too judges once."""
    from stamplib.report.figures import save_figure, set_theme

    set_theme()  # the project's theme, whatever an earlier figure in this process set: the PNG is reproducible
    cpus = {BUILTIN_TITLE: cpu_kinds(builtin_store), REFERENCE_TITLE: cpu_kinds(reference_store)}
    path = root / PAGE
    paths.atomic_write_bytes(path, page(first, second, cpus).encode())  # as the pages that quote it are written
    written = save_figure(figure(first, second), FIGURE, root / "figures")
    return [path, *written]
