"""The ledger's claims judged on a benchmark's records: one verdict per claim, the words for it, and
what drives it. The numbers come from :mod:`stamplib.evidence.statistics` (pure functions over
arrays); this module reads records into those arrays and says what the numbers mean.

A claim is judged on its benchmark's first design that can test it and has its cells under
:data:`~stamplib.evidence.benchmarks.ENOUGH_REPLICATES` replicates (else the last that can test
it), over the replicates that have every cell it compares (:func:`judge_benchmark`). The verdict
reads the interval alone (:data:`RULE`); beside it stand how many replicates and corruptions hold
(description, not decision), the smallest margin the evidence could detect, where the paper's own
size lies against the interval, and *what drives it* (:func:`drivers`): which networks hold it,
which single corruption left out changes it, what the other designs read, whether the paper's
stream length and the quick stream disagree, whether another CPU kind's records change it, and
whether a network trusts the Noise outliers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation import manifest
from stamplib.evaluation.manifest import EvidenceError
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore, checked_record
from stamplib.evidence import benchmarks, factors, ledger, statistics
from stamplib.evidence.benchmarks import Benchmark, Design, Replicate
from stamplib.evidence.ledger import Arm, Claim, Difference, Lead, SmallerDrop, Within
from stamplib.experiments import plans
from stamplib.report import seeds
from stamplib.report.paper import dataset_label, method_label, outlier_label
from stamplib.report.reproduce import short_variant

NEEDS_DATA = "needs data"
NEEDS_STREAM = "needs the paper's stream length"
PENDING = "pending"
METRIC_LABELS = {"acc": "ACC", "auroc": "AUROC", "h": "H"}
#: A single replicate's reading counts a difference below this many points as a tie: 0.5 pt of
#: 6,000 test images is 30 images.
ONE_REPLICATE_MARGIN = 0.5
#: Where a store keeps records of its cells computed on another CPU kind (the same keys as the
#: records beside it): what-drives-it re-judges STAMP's claims with them.
OTHER_CPUS = manifest.OTHER_CPUS
#: A network "trusts" the Noise outliers where Source's AUROC on them falls this many points
#: below the paper's Source (max-softmax scores Noise as confidently as photographs).
TRUST_GAP = 10.0

Records = Mapping[str, Record]

RULE = (
    "**How a verdict is reached.** A claim's *margin* under one replicate is its claimed side minus the other "
    "(a lead: minus the best other under that replicate; a stated size subtracted first), each side the mean "
    "over the corruptions of that replicate's records. A *replicate* draws every source of variation the design "
    "varies: network k with stream seed k where it varies the source network, a stream seed where it holds one "
    "network. Over the replicates that have every cell the claim compares: on the paper's 15 corruptions (fixed: "
    "the paper's average is over these 15, so only the replicates vary), the 95 % interval is the paired "
    "t-interval of the replicates' margins on n − 1 degrees of freedom; on 3 of the 15 (a sample of them, without "
    "replacement), the replicates' variance plus the delete-one-corruption jackknife variance times the "
    "finite-population factor 1 − 3/15, on Welch–Satterthwaite degrees of freedom and never narrower than the "
    "t-interval that holds the 3 fixed. **yes**: the interval lies above 0 (**yes, smaller than the paper's** "
    "where the paper's own margin lies above the whole interval); **no**: below 0 (**no, smaller than the "
    "paper's** where the paper's own negative margin lies below it); **tie**: every replicate's margin rounds to "
    "0.0; otherwise **smaller than the paper's** where the paper's own margin lies above the interval, else "
    "**undecided**, with the smallest margin this evidence could detect (exactly 80 % power at α = 0.05, "
    "two-sided, from the noncentral t on the interval's degrees of freedom and the standard error of its "
    "variance). The paper's size sets a word only where the paper measured it on CIFAR10-C; a size from another "
    "data set (CIFAR100-C + SVHN-C) stands beside the verdict with its data set named. *What drives it* leaves "
    "one corruption out at a time, holding the rest fixed (a paired t over the replicates), and names only a "
    "corruption whose removal weakens the verdict (none named: no single corruption does). *k of n hold* counts "
    "replicates whose margin "
    "rounds above 0; *k of 15 corruptions hold* counts corruptions whose margin — each replicate's margin on "
    "that corruption alone, averaged over the replicates — rounds above 0. Both describe; neither decides. "
    "*The paper's size*: the same margin in the paper's printed numbers (its table's mean over 15 corruptions, "
    "on its own data set), and whether it lies inside our interval, above it, below it, or on the other side of 0."
)


# ------------------------------------------------------------------------------- a verdict


@dataclass(frozen=True)
class Verdict:
    """One claim judged on one design of a benchmark."""

    claim: Claim
    benchmark: Benchmark
    design: Design
    values: Mapping[Arm, Mapping[Replicate, float]]  # each arm's metric under each replicate stored
    margins: Mapping[Replicate, float]  # the claim's margin under each decided replicate
    missing: tuple[tuple[Arm, Replicate], ...] = ()
    interval: statistics.Interval | None = None
    corruption_margins: Mapping[str, float] = field(default_factory=dict)
    paper_size: float | None = None
    needs_data: bool = False
    needs_stream: bool = False
    missing_specs: tuple[RunSpec, ...] = field(default=(), compare=False)
    cpus: tuple[str, ...] = ()
    table: Any = field(default=None, compare=False, repr=False)  # (arms, replicates, corruptions) read
    corruptions: tuple[str, ...] = ()
    drivers: tuple[str, ...] = ()
    #: The same drivers in at most :data:`SHORT_DRIVER` characters each, strongest first (the
    #: claims page's first table shows one).
    short_drivers: tuple[str, ...] = ()

    @property
    def decided(self) -> tuple[Replicate, ...]:
        return tuple(self.margins)

    @property
    def complete(self) -> bool:
        """Every replicate of the design has every cell."""
        return not self.needs_data and not self.needs_stream and not self.missing

    def _rounded(self) -> dict[Replicate, float]:
        return {r: round(v, self.claim.digits) for r, v in self.margins.items()}

    @property
    def held(self) -> tuple[Replicate, ...]:
        return tuple(r for r, v in self._rounded().items() if v > 0)

    @property
    def failed(self) -> tuple[Replicate, ...]:
        return tuple(r for r, v in self._rounded().items() if v < 0)

    @property
    def tied(self) -> tuple[Replicate, ...]:
        return tuple(r for r, v in self._rounded().items() if v == 0)

    @property
    def verdict(self) -> str:
        """The bare verdict: yes, no, tie, smaller than the paper's, undecided, a single replicate's
        yes / no / tie, pending, needs data, or needs the paper's stream length."""
        if self.needs_data:
            return NEEDS_DATA
        if self.needs_stream:
            return NEEDS_STREAM
        if not self.margins:
            return PENDING
        if len(self.margins) == 1:
            (value,) = self.margins.values()
            return statistics.YES if value > ONE_REPLICATE_MARGIN else (
                statistics.NO if value < -ONE_REPLICATE_MARGIN else statistics.TIE)
        if statistics.all_tied(np.array(list(self.margins.values())), self.claim.digits):
            return statistics.TIE
        assert self.interval is not None, "two or more replicates give an interval"
        return statistics.decide(self.interval.low, self.interval.high, False,
                                 self.paper_size if self.size_sets_word else None)

    @property
    def size_sets_word(self) -> bool:
        """Whether the paper's size may set the verdict's word: only where the paper measured it on
        CIFAR-10-C, the data set both benchmarks stand in for (a size from CIFAR100-C + SVHN-C is
        shown beside the verdict, never in it)."""
        return not self.claim.stand_in

    @property
    def label(self) -> str:
        """The verdict as a table shows it: ``undecided (could detect ≥ 6.1)``, ``one replicate
        (network 0 × seed 0): yes``, ``2 of 5 replicates so far: …``."""
        word = self.verdict
        if word == statistics.UNDECIDED and self.interval is not None:
            word = f"undecided (could detect ≥ {self.interval.detectable:.1f})"
        if word in (NEEDS_DATA, NEEDS_STREAM, PENDING):
            return word
        if len(self.margins) == 1:
            return f"one replicate ({self.decided[0].text()}): {word}"
        have, of = len(self.margins), len(self.design.replicates)
        return word if have >= of else f"{have} of {of} replicates so far: {word}"

    def replicate_counts(self) -> str:
        """``4 of 5 networks hold, 1 fails`` (seeds, on a design of one network; ties named)."""
        have = len(self.margins)
        if have < 2:
            return ""
        unit = "networks" if self.design.varies_networks else "seeds"
        parts = [f"{len(self.held)} of {have} {unit} hold"]
        if self.failed:
            parts.append(f"{len(self.failed)} {'fails' if len(self.failed) == 1 else 'fail'}")
        if self.tied:
            parts.append(f"{len(self.tied)} {'ties' if len(self.tied) == 1 else 'tie'}")
        return ", ".join(parts)

    def corruption_counts(self) -> str:
        """``12 of 15 corruptions hold`` (:data:`RULE`)."""
        found = self.corruption_margins
        if not found:
            return ""
        held = sum(round(v, self.claim.digits) > 0 for v in found.values())
        return f"{held} of {len(found)} corruptions hold"

    def size_relation(self) -> str:
        if self.interval is None:
            return ""
        return statistics.size_relation(self.paper_size, self.interval.low, self.interval.high)

    def size_text(self) -> str:
        """``the paper's +4.5 lies inside`` (or above, below, on the other side of 0; empty where
        the paper prints no number for the margin)."""
        if self.paper_size is None or self.interval is None:
            return ""
        where = {statistics.INSIDE: "lies inside", statistics.ABOVE: "lies above", statistics.BELOW: "lies below",
                 statistics.OPPOSITE: "is on the other side of 0"}[self.size_relation()]
        stand_in = f" (on {ledger.paper_data_set(self.claim)}, so it sets no word)" if self.claim.stand_in else ""
        return f"the paper's {seeds.signed(self.paper_size, 1)}{stand_in} {where}"

    def evidence(self) -> str:
        """``networks 0–4 (network k with stream seed k), the paper's 15 corruptions``."""
        over = self.design.replicates_text()
        return f"{self.design.title}: {over}, {self.design.corruptions_text()}"

    def difference_text(self) -> str:
        """``+1.2 (−0.5 to +2.1), 95 % CI +0.3 to +1.9``: the mean margin, its min to max over the
        replicates, and the interval."""
        spread = seeds.Spread.of({i: v for i, v in enumerate(self.margins.values())})
        if not spread.seeds:
            return "—"
        text = seeds.signed(spread.mean, 1)
        if len(spread.seeds) > 1:
            text += f" ({seeds.signed(spread.low, 1)} to {seeds.signed(spread.high, 1)})"
        if self.interval is not None:
            text += f", 95 % CI {seeds.signed(self.interval.low, 1)} to {seeds.signed(self.interval.high, 1)}"
            if self.interval.finite_population is not None:
                text += f" (3 of 15 corruptions sampled, factor {self.interval.finite_population:.2f})"
        return text

    def missing_text(self) -> str:
        """The missing cells, arm by arm: ``CoTTA (a) network 1 × seed 1; …``."""
        by_arm: dict[Arm, list[Replicate]] = {}
        for arm, replicate in self.missing:
            by_arm.setdefault(arm, []).append(replicate)
        shared = {tuple(v) for v in by_arm.values()}
        if len(by_arm) == len(self.claim.arms) > 2 and len(shared) == 1:
            (missed,) = shared
            return f"all {len(by_arm)} rows compared, {_replicates_text(missed)} ({len(self.missing)} cells)"
        return "; ".join(f"{arm_label(a)} {_replicates_text(r)}" for a, r in by_arm.items())


def _replicates_text(replicates: Sequence[Replicate]) -> str:
    if len({r.network for r in replicates}) == 1 and replicates[0].network == 0:
        return seeds.seeds_text(r.seed for r in replicates)
    return ", ".join(r.text() for r in replicates)


# ------------------------------------------------------------------------------- judging


def _per_corruption(record: Record, metric: str) -> dict[str, float]:
    return {c: float(row.scores[metric]) for c, row in record.per_corruption.items()}


def combined(claim: Claim, value: Mapping[Arm, Any]) -> Any:
    """The claim's smallest margin over its parts (arrays allowed)."""
    return np.min(np.stack([np.asarray(m.margin(value), dtype=float) for m in claim.margins]), axis=0)


def margin_function(claim: Claim) -> statistics.Margin:
    """The claim's margin as :mod:`~stamplib.evidence.statistics` takes it: per-arm arrays in, in
    the order of ``claim.arms``."""
    arms = claim.arms
    return lambda by_arm: combined(claim, dict(zip(arms, by_arm)))


def _table(claim: Claim, found: Mapping[tuple[Arm, Replicate], Record], decided: Sequence[Replicate]
           ) -> tuple[np.ndarray, tuple[str, ...]] | None:
    """The decided replicates' per-corruption values, ``(arms, replicates, corruptions)``, over the
    corruptions every record has (None where they share none or one is not finite)."""
    arms = claim.arms
    shared = set.intersection(*(set(found[(a, r)].per_corruption) for a in arms for r in decided))
    corruptions = tuple(c for c in CORRUPTIONS if c in shared) + tuple(sorted(shared - set(CORRUPTIONS)))
    if not corruptions:
        return None
    table = np.array([[[_per_corruption(found[(a, r)], claim.metric)[c] for c in corruptions] for r in decided]
                      for a in arms])
    return (table, corruptions) if np.isfinite(table).all() else None


def cpu_kind(record: Record) -> str:
    """The CPU model a record names (``provenance.cpu``), its GPU device, or ``CPU not recorded``."""
    device = str(record.device or "cpu")
    if device.startswith("cuda"):
        return "GPU (CUDA)"
    cpu = record.provenance.cpu if record.provenance is not None else None
    return str(cpu.get("model")) if cpu and cpu.get("model") else "CPU not recorded"


def judge(claim: Claim, design: Design, records: Records, benchmark: Benchmark | None = None,
          stream_checked: bool = True, corruptions: Sequence[str] | None = None, hold_fixed: bool = False) -> Verdict:
    """``claim`` on ``design`` from ``records`` (by key). ``stream_checked``: off to judge a claim
    on the step-size decay on a short stream anyway (what drives it compares the two);
    ``corruptions``: only these of the records' corruptions (what drives it leaves one out);
    ``hold_fixed``: the interval holds the corruptions read fixed (the paired t over replicates,
    :func:`~stamplib.evidence.statistics.fixed_set_interval`) instead of sampling them from the
    fifteen."""
    benchmark = benchmark or benchmarks.Benchmark(design.name, design.title, Path("."), (design,))
    if not benchmarks.testable(claim, design):
        return Verdict(claim, benchmark, design, {}, {}, needs_data=True)
    if stream_checked and benchmarks.needs_stream(claim, design):
        return Verdict(claim, benchmark, design, {}, {}, needs_stream=True)
    found: dict[tuple[Arm, Replicate], Record] = {}
    missing: list[tuple[Arm, Replicate]] = []
    missing_specs: list[RunSpec] = []
    for replicate in design.replicates:
        for arm in claim.arms:
            spec = benchmarks.spec(arm, design, replicate)
            record = records.get(spec.key()) if spec is not None else None
            if record is None:
                missing.append((arm, replicate))
                if spec is not None:
                    missing_specs.append(spec)
            else:
                found[(arm, replicate)] = record
    values = {a: {r: float(found[(a, r)].mean.scores[claim.metric]) for r in design.replicates if (a, r) in found}
              for a in claim.arms}
    decided = [r for r in design.replicates if all((a, r) in found for a in claim.arms)]
    common = dict(benchmark=benchmark, missing=tuple(missing), missing_specs=tuple(missing_specs),
                  paper_size=ledger.paper_margin(claim), cpus=tuple(sorted({cpu_kind(r) for r in found.values()})))
    shaped = _table(claim, found, decided) if decided else None
    if shaped is None:
        return Verdict(claim, design=design, values=values, margins={}, **common)
    table, kept = shaped
    if corruptions is not None:
        index = [kept.index(c) for c in corruptions if c in kept]
        table, kept = table[..., index], tuple(kept[i] for i in index)
    margin = margin_function(claim)
    per_replicate = statistics.replicate_margins(table, margin)
    rule = statistics.fixed_set_interval if hold_fixed else statistics.interval
    interval = rule(table, margin) if len(decided) >= 2 else None
    by_corruption = dict(zip(kept, statistics.corruption_margins(table, margin).tolist()))
    return Verdict(claim, design=design, values=values, margins=dict(zip(decided, per_replicate.tolist())),
                   interval=interval, corruption_margins=by_corruption, table=table, corruptions=kept, **common)


def other_cpu_records(store: ResultsStore) -> dict[str, list[Record]]:
    """The records of ``store``'s cells computed on another CPU kind, by key (its
    :data:`OTHER_CPUS` folder; empty where it has none). Read only, never moved: in a committed
    store its manifest guards them (:data:`stamplib.evaluation.manifest.SUBFOLDERS`); a file
    that is no whole record of the cell its name says is refused in one line naming it."""
    folder = Path(store.root) / OTHER_CPUS
    files = [p for p in sorted(folder.glob("*.json")) if not p.name.startswith(".")] if folder.is_dir() else []
    # a page render asks for them once per section: each file is checked and read once while it is unchanged
    unchanged = (str(folder.resolve()), tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if unchanged not in _OTHER_CPU_READS:
        found: dict[str, list[Record]] = {}
        for path in files:
            record = checked_record(folder, path)
            if isinstance(record, str):
                raise EvidenceError(f"{path}: {record}; restore it (git checkout -- {path}) or remove it")
            found.setdefault(record.key, []).append(record)
        _OTHER_CPU_READS[unchanged] = found
    return {key: list(records) for key, records in _OTHER_CPU_READS[unchanged].items()}


#: :func:`other_cpu_records`' reads, by folder and its files' names, sizes and modification times.
_OTHER_CPU_READS: dict[tuple[str, tuple[tuple[str, int, int], ...]], dict[str, list[Record]]] = {}


def choose(verdicts: Sequence[Verdict]) -> Verdict:
    """Of one claim's verdicts on a benchmark's designs (best first), the one that decides: the
    first that can test it with :data:`~stamplib.evidence.benchmarks.ENOUGH_REPLICATES` replicates
    decided, else the last that can test it (needs data where none can)."""
    testable = [v for v in verdicts if not v.needs_data and not v.needs_stream]
    for verdict in testable:
        if len(verdict.margins) >= min(benchmarks.ENOUGH_REPLICATES, len(verdict.design.replicates)):
            return verdict
    if testable:
        return testable[-1]
    waiting = [v for v in verdicts if v.needs_stream]
    return waiting[0] if waiting else verdicts[-1]


def one_checkpoint_per_network(records: Iterable[Record], where: str) -> None:
    """Refuse, in one line naming both SHA-256s, records of one network index (of one data set)
    computed from two different checkpoint files: a network is one draw of the training recipe,
    and two files under one index would enter one verdict as if they were one."""
    seen: dict[tuple[str, int], tuple[str, str]] = {}
    for record in sorted(records, key=lambda r: r.key):
        checkpoint = record.provenance.checkpoint if record.provenance is not None else None
        if checkpoint is None or not checkpoint.sha256:
            continue
        index = (record.spec.dataset, record.spec.network)
        first = seen.setdefault(index, (checkpoint.sha256, record.key))
        if first[0] != checkpoint.sha256:
            raise EvidenceError(
                f"{where}: network {index[1]} of {index[0]} has records from two checkpoint files, SHA-256 {first[0]} "
                f"(record {first[1]}) and {checkpoint.sha256} (record {record.key}); a network's records come from "
                "one file: remove the superseded network's records from the store (and its manifest) and recompute "
                "them")


def judge_benchmark(benchmark: Benchmark, store: ResultsStore,
                    claims: Sequence[Claim] = ledger.LEDGER) -> list[Verdict]:
    """Every claim of ``claims`` on ``benchmark`` from ``store``'s records: decided on its first
    design with enough replicates (:func:`choose`), with what drives it (:func:`drivers`). Records
    of one network from two checkpoint files are refused (:func:`one_checkpoint_per_network`)."""
    records = store.records_by_key()
    one_checkpoint_per_network(records.values(), str(store.root))
    others = other_cpu_records(store)
    out = []
    for claim in claims:
        every = [judge(claim, d, records, benchmark) for d in benchmark.designs]
        chosen = choose(every)
        found = drivers(chosen, every, records, others)
        out.append(dataclasses.replace(chosen, drivers=tuple(full for full, _ in found),
                                       short_drivers=tuple(short for _, short in found if short)))
    return out


# ------------------------------------------------------------------------------- what drives it


#: The most characters a short driver has.
SHORT_DRIVER = 40
Driver = tuple[str, str]  # (the full text, a short one of at most SHORT_DRIVER characters, or "")


def _short(text: str) -> str:
    return text if len(text) <= SHORT_DRIVER else ""


def _networks_driver(verdict: Verdict) -> Driver:
    """Which networks hold it (``holds on 2 of 5 networks (0, 3)``); on a design of one network,
    under how many of its stream seeds (``network 0: holds under 1 of 5 seeds``)."""
    if len(verdict.margins) < 2:
        return "", ""
    held, have = verdict.held, len(verdict.margins)
    if not verdict.design.varies_networks:
        text = f"network {verdict.design.networks[0]}: holds under {len(held)} of {have} seeds"
        return text, f"holds under {len(held)} of {have} seeds"
    text = f"holds on {len(held)} of {have} networks"
    if 0 < len(held) < have:
        text += f" ({', '.join(str(r.network) for r in held)})"
    return text, _short(text) or f"holds on {len(held)} of {have} networks"


#: How much a verdict decides, for what drives it: a decided word (with or without its size),
#: the paper's size ruled out, nothing.
_STRENGTH = {statistics.YES: 2, statistics.NO: 2, statistics.TIE: 2, statistics.YES_SMALLER: 2,
             statistics.NO_SMALLER: 2, statistics.SMALLER: 1, statistics.UNDECIDED: 0}
_SIDE = {statistics.YES: 1, statistics.YES_SMALLER: 1, statistics.NO: -1, statistics.NO_SMALLER: -1}


def weakens(before: str, after: str) -> bool:
    """Whether ``after`` decides less than ``before``, or on the other side of zero."""
    return (_STRENGTH.get(after, 0) < _STRENGTH.get(before, 0)
            or _SIDE.get(before, 0) * _SIDE.get(after, 0) < 0)


def _leave_one_out(verdict: Verdict, records: Records) -> str:
    """Which single corruption, left out, weakens the verdict (``reads undecided without
    contrast``). The corruptions left are held fixed (a paired t over the replicates): on a design
    of three, sampling two of fifteen would put the interval on one or two degrees of freedom, and
    every corruption would seem to carry the verdict. A corruption whose removal leaves the verdict
    as strong or stronger is never named."""
    if verdict.table is None or len(verdict.corruptions) < 3 or len(verdict.margins) < 2:
        return ""
    word = verdict.verdict
    changed: dict[str, list[str]] = {}
    for corruption in verdict.corruptions:
        rest = [c for c in verdict.corruptions if c != corruption]
        again = judge(verdict.claim, verdict.design, records, verdict.benchmark, corruptions=rest, hold_fixed=True)
        if weakens(word, again.verdict):
            changed.setdefault(again.verdict, []).append(corruption.replace("_", " "))
    if not changed:
        return ""
    return "; ".join(f"reads {new} without {_listed(names)}" for new, names in changed.items())


def _leave_one_out_driver(verdict: Verdict, records: Records) -> Driver:
    text = _leave_one_out(verdict, records)
    if not text:
        return "", ""
    first = text.split("; ")[0].removeprefix("reads ")
    return text, _short(first) or _short(first.split(" or ")[0].split(" (or")[0] + " …")


def _listed(names: Sequence[str], limit: int = 3) -> str:
    shown = list(names[:limit])
    more = f" (or {len(names) - limit} more, each alone)" if len(names) > limit else ""
    return (", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else shown[0]) + more


def _designs_driver(verdict: Verdict, every: Sequence[Verdict]) -> list[Driver]:
    """What the benchmark's other designs read, where they can test it and read otherwise (not a
    design over fewer corruptions than the one that decides: weaker evidence is no driver)."""
    out = []
    for other in every:
        if other.design == verdict.design or other.needs_data or other.needs_stream or len(other.margins) < 2:
            continue
        if len(other.design.corruptions) < len(verdict.design.corruptions):
            continue
        if other.verdict != verdict.verdict:
            text = f"{other.design.title}: {other.verdict}"
            out.append((text, _short(text)))
    return out


def _stream_driver(verdict: Verdict, every: Sequence[Verdict], records: Records) -> Driver:
    """For a claim on the step-size decay decided at the paper's stream length: what the quick
    stream reads, where it differs."""
    if not verdict.claim.stream or not verdict.design.paper_stream:
        return "", ""
    for other in every:
        if other.design.paper_stream:
            continue
        quick = judge(verdict.claim, other.design, records, verdict.benchmark, stream_checked=False)
        if len(quick.margins) >= 2:
            if quick.verdict == verdict.verdict:
                return f"the quick stream ({other.design.title}) agrees", "the quick stream agrees"
            return (f"the quick stream ({other.design.title}) reads {quick.verdict}",
                    _short(f"the quick stream reads {quick.verdict}"))
    return "", ""


def _cpu_driver(verdict: Verdict, records: Records, others: Mapping[str, Sequence[Record]]) -> list[Driver]:
    """Where STAMP's records from another CPU kind change the verdict."""
    claim, design = verdict.claim, verdict.design
    keys = {s.key() for a in claim.arms if a.method == "stamp" for r in design.replicates
            if (s := benchmarks.spec(a, design, r)) is not None}
    by_kind: dict[str, dict[str, Record]] = {}
    for key in keys:
        for record in others.get(key, ()):
            by_kind.setdefault(cpu_kind(record), {})[key] = record
    out = []
    for kind, swapped in sorted(by_kind.items()):
        again = judge(claim, design, {**records, **swapped}, verdict.benchmark)
        if again.verdict != verdict.verdict:
            out.append((f"reads {again.verdict} with STAMP's records from {kind}",
                        _short(f"{again.verdict} on another CPU's STAMP")))
    return out


def source_noise_auroc(design: Design, records: Records) -> dict[Replicate, float]:
    """Source's AUROC with Noise outliers in setting (a) under each replicate of ``design`` that
    has its record (its mean over the design's corruptions)."""
    arm = Arm(plans.TABLE1.notebook, "source")
    out = {}
    for replicate in design.replicates:
        spec = benchmarks.spec(arm, design, replicate)
        record = records.get(spec.key()) if spec is not None else None
        if record is not None:
            out[replicate] = float(record.mean.scores["auroc"])
    return out


def trusting_networks(design: Design, records: Records) -> str:
    """Which replicates of ``design`` score the Noise outliers as confidently as photographs:
    Source's AUROC with Noise outliers (its records' mean) :data:`TRUST_GAP` points or more below
    the paper's (``networks 1, 2 trust Noise: Source AUROC 25/53 vs the paper's 70``); empty where
    none does or Source has no record."""
    paper = ledger.paper_arm_value(Arm(plans.TABLE1.notebook, "source"), "auroc")
    if paper is None:
        return ""
    trusting = {r: v for r, v in source_noise_auroc(design, records).items() if v < paper - TRUST_GAP}
    if not trusting:
        return ""
    values = "/".join(f"{v:.0f}" for v in trusting.values())
    if not design.varies_networks:
        return (f"network {design.networks[0]} trusts Noise under seeds {', '.join(str(r.seed) for r in trusting)}: "
                f"Source AUROC {values} vs the paper's {paper:.0f}")
    names = ", ".join(str(r.network) for r in trusting)
    verb = "trusts" if len(trusting) == 1 else "trust"
    return (f"network{'s' if len(trusting) > 1 else ''} {names} {verb} Noise: Source AUROC {values} vs the paper's "
            f"{paper:.0f}")


def factor(verdict: Verdict, records: Records) -> tuple[str, str]:
    """What drives a lead of setting (a)'s STAMP (:mod:`stamplib.evidence.factors`): the share of
    Noise it adapts on from its traces, and, on a design that computes them, which counterfactual
    arm restores its lead, each judged by the same rule on the replicates that have every cell.
    The full sentence and a short one; empty on other claims."""
    if not factors.reads_stamp_a(verdict.claim):
        return "", ""
    arms = {}
    if verdict.design.diagnostics:
        for name in factors.stamp_diagnostics():
            again = judge(factors.counterfactual(verdict.claim, name), verdict.design, records, verdict.benchmark)
            arms[name] = dict(again.margins) if not again.missing else {}
    shares = factors.network_shares(verdict.design, records)
    unit = "networks" if verdict.design.varies_networks else "seeds"
    return factors.factor_text(arms, {r: s for r, s in shares.items() if r in verdict.margins}, verdict.margins,
                               unit)


def drivers(verdict: Verdict, every: Sequence[Verdict], records: Records,
            others: Mapping[str, Sequence[Record]]) -> list[Driver]:
    """What drives ``verdict`` (the chosen one of ``every``, one per design), strongest first, each
    as a full text and a short one, all derived from the records: for a lead of setting (a)'s STAMP
    the measured factor (:func:`factor`), which single corruption left out weakens it, which
    networks hold it, what the other designs read, whether the paper-length and quick streams
    disagree, and whether another CPU kind's records change it. Which networks trust the Noise
    outliers holds for a whole benchmark, so the page says it once (:func:`trusting_networks`)."""
    if verdict.needs_data or verdict.needs_stream or len(verdict.margins) < 2:
        return []
    found = [factor(verdict, records), _leave_one_out_driver(verdict, records), _networks_driver(verdict),
             *_designs_driver(verdict, every), _stream_driver(verdict, every, records),
             *_cpu_driver(verdict, records, others)]
    return [f for f in found if f[0]]


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
    setting = _SETTINGS.get((arm.experiment, arm.dataset, arm.outlier_set))
    if setting:
        return f"{name} {setting}"
    return f"{name} ({dataset_label(arm.dataset)} + {outlier_label(arm.outlier_set)})"


def _text(values: Mapping[Replicate, float], over: Sequence[Replicate]) -> str:
    return seeds.Spread.of({i: values[r] for i, r in enumerate(over) if r in values}).text()


def _best_other(verdict: Verdict, lead: Lead) -> Arm:
    over = verdict.decided
    return max(lead.others, key=lambda a: float(np.mean([verdict.values[a][r] for r in over])))


def ours_text(verdict: Verdict) -> str:
    """Our numbers behind a verdict over its decided replicates: the arms compared (mean, min–max),
    the paired margin with its interval, and the missing cells."""
    if verdict.needs_data:
        return f"needs {verdict.claim.needs}"
    if verdict.needs_stream:
        return NEEDS_STREAM
    over = verdict.decided
    metric = METRIC_LABELS[verdict.claim.metric]
    pieces = [_margin_text(verdict, m, over) for m in verdict.claim.margins] if over else []
    text = f"{metric} " + "; ".join(pieces) if pieces else "—"
    if over:
        text += f"; margin {verdict.difference_text()}"
    if verdict.missing:
        text += f"; missing: {verdict.missing_text()}"
    return text


def _size_text(by: float) -> str:
    return f" (the paper's size {by:+.1f} subtracted)" if by else ""


def _margin_text(verdict: Verdict, margin: Any, over: Sequence[Replicate]) -> str:
    v = verdict.values
    if isinstance(margin, Lead):
        best = _best_other(verdict, margin)
        return (f"{arm_label(margin.arm)} {_text(v[margin.arm], over)}, best other {arm_label(best)} "
                f"{_text(v[best], over)}" + _size_text(margin.by))
    if isinstance(margin, Difference):
        return (f"{arm_label(margin.higher)} {_text(v[margin.higher], over)} vs {arm_label(margin.lower)} "
                f"{_text(v[margin.lower], over)}" + _size_text(margin.by))
    if isinstance(margin, Within):
        widths = {r: max(v[a][r] for a in margin.arms) - min(v[a][r] for a in margin.arms) for r in over}
        return (", ".join(f"{arm_label(a)} {_text(v[a], over)}" for a in margin.arms)
                + f"; range {_text(widths, over)} (limit {margin.width:g})")
    assert isinstance(margin, SmallerDrop), margin
    drop = {r: v[margin.before][r] - v[margin.after][r] for r in over}
    other = {r: v[margin.other_before][r] - v[margin.other_after][r] for r in over}
    return (f"drop {method_label(margin.other_before.method)} {_text(other, over)} vs "
            f"{method_label(margin.before.method)} {_text(drop, over)}")


def claim_text(claim: Claim) -> str:
    """The claim's words, with the data set ours stands in for where it is another."""
    return f"{claim.words} ({claim.stand_in})" if claim.stand_in else claim.words


def paper_text(claim: Claim, design: Design | None = None) -> str:
    """The paper's numbers behind ``claim``; on a design over a subset of the corruptions, also
    the paper's own unrounded mean on them where its table prints them per corruption."""
    here = ledger.paper_here_text(claim, design.corruptions) if design is not None and len(design.corruptions) < len(
        CORRUPTIONS) else ""
    return f"{claim.paper}; on our {len(design.corruptions)} corruptions: {here}" if here and design else claim.paper


def verdict_tally(verdicts: Sequence[Verdict]) -> str:
    """How many of ``verdicts`` read each verdict (``3 yes, 1 no, 4 undecided``), in a fixed order;
    a claim still short of replicates counts as ``not all replicates yet``."""
    tally: dict[str, int] = {}
    for v in verdicts:
        key = v.verdict if v.complete or v.needs_data or v.needs_stream else "not all replicates yet"
        tally[key] = tally.get(key, 0) + 1
    order = (statistics.YES, statistics.YES_SMALLER, statistics.NO, statistics.NO_SMALLER, statistics.TIE,
             statistics.SMALLER, statistics.UNDECIDED,
             "not all replicates yet", PENDING, NEEDS_STREAM, NEEDS_DATA)
    return ", ".join(f"{tally[k]} {k}" for k in order if k in tally)


# ------------------------------------------------------------------------------- a notebook's claims


def notebook_verdicts(plan: plans.Plan, records: Records) -> list[Verdict]:
    """The ledger's claims that read ``plan``'s experiment, judged on its records at its profile,
    scale and seeds (a notebook's own cells, network 0; ``docs/claims.md`` has the committed
    evidence over replicates)."""
    if not plan.cells:
        return []
    first = plan.cells[0].spec
    chosen = tuple(sorted({c.spec.seed for c in plan.cells}))
    design = Design(plan.notebook, plan.notebook, first.profile, plan.scale, benchmarks.over_seeds(chosen),
                    tuple(first.corruptions), paper_stream=first.profile == "full")
    mine = [c for c in ledger.LEDGER if any(a.experiment == plan.notebook for a in c.arms)]
    return [v for v in (judge(c, design, records) for c in mine) if not v.needs_data]


def notebook_text(plan: plans.Plan, records: Records) -> str:
    """What a notebook prints under its table: each of the paper's claims it tests, the verdict
    on its own records and our numbers behind it (the ledger: docs/claims.md)."""
    found = notebook_verdicts(plan, records)
    if not found:
        return "The ledger has no claim on this notebook's cells (docs/claims.md lists every claim)."
    over = seeds.seeds_text(found[0].design.seeds)
    lines = [f"The paper's claims on these cells (the ledger, docs/claims.md; over {over}):"]
    lines += [f"- {v.claim.words} ({v.claim.where}): {v.label}. {ours_text(v)}" for v in found]
    return "\n".join(lines)

