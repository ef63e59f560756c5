"""The paper's claims as data: one ledger (issue 49).

Each :class:`Claim` is written once: its words, where the paper makes it, the metric, and the
rule as margins (:class:`Lead`, :class:`Difference`, :class:`Within`, :class:`SmallerDrop`) that
must all be positive under a seed for the claim to hold under that seed. A margin reads
:class:`Arm`\\ s: one row of one experiment's plan (a method, and the row's variant such as
``K=1``), found by the paper's data set and outlier set, so the same claim plans the built-in
benchmark's cells, the reference run's on real images, or the full profile's on the paper's data
(where the small scales stand in for CIFAR100-C + SVHN-C with CIFAR-10 + Noise, as the
notebooks do).

A :class:`Benchmark` is a (profile, scale) and the seeds that decide its claims. The judging —
reading records, deciding over seeds, bootstrap intervals — is
:mod:`stamplib.evidence.judge`; this module only says what each claim compares and which cells
that takes (:func:`cells`, :func:`cheapest_first`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation.profiles import get_profile
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import plans, registry
from stamplib.experiments.registry import EXPERIMENTS
from stamplib.methods import PAPER_ORDER

# ------------------------------------------------------------------------------- what a claim reads


@dataclass(frozen=True)
class Arm:
    """One row of an experiment's table: ``method`` (and its ``variant``, the plan's row label)
    on the paper's ``dataset`` with its ``outliers``; ``params`` are the plan's own parameters
    (such as Table 6's ``methods``)."""

    experiment: str  # a notebook name of :data:`stamplib.experiments.registry.EXPERIMENTS`
    method: str
    variant: str = ""
    dataset: str = "cifar10_c"
    outliers: str = "noise"
    params: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        assert self.experiment in EXPERIMENTS, f"no experiment {self.experiment!r}"


@dataclass(frozen=True)
class Lead:
    """``arm`` above the best of ``others`` (the best other found under each seed)."""

    arm: Arm
    others: tuple[Arm, ...]

    @property
    def arms(self) -> tuple[Arm, ...]:
        return (self.arm, *self.others)

    def margin(self, value: Mapping[Arm, Any]) -> Any:
        return value[self.arm] - np.max(np.stack([value[o] for o in self.others]), axis=0)


@dataclass(frozen=True)
class Difference:
    """``higher`` above ``lower``."""

    higher: Arm
    lower: Arm

    @property
    def arms(self) -> tuple[Arm, ...]:
        return (self.higher, self.lower)

    def margin(self, value: Mapping[Arm, Any]) -> Any:
        return value[self.higher] - value[self.lower]


@dataclass(frozen=True)
class Within:
    """Every one of ``arms`` within ``width`` points of each other: the margin is ``width`` minus
    their range."""

    arms: tuple[Arm, ...]
    width: float

    def margin(self, value: Mapping[Arm, Any]) -> Any:
        numbers = np.stack([value[a] for a in self.arms])
        return self.width - (np.max(numbers, axis=0) - np.min(numbers, axis=0))


@dataclass(frozen=True)
class SmallerDrop:
    """``arm`` loses less from ``before`` to ``after`` than ``other`` does: each a pair of arms
    (the same method at two settings); the margin is the other's drop minus this one's."""

    before: Arm
    after: Arm
    other_before: Arm
    other_after: Arm

    @property
    def arms(self) -> tuple[Arm, ...]:
        return (self.before, self.after, self.other_before, self.other_after)

    def margin(self, value: Mapping[Arm, Any]) -> Any:
        return (value[self.other_before] - value[self.other_after]) - (value[self.before] - value[self.after])


Margin = Lead | Difference | Within | SmallerDrop

#: Where no scale of the CIFAR-10 benchmarks can test a claim: the data it needs.
SCALES = ("builtin", "real", "paper")


@dataclass(frozen=True)
class Claim:
    """One claim of the paper: ``words``, ``where`` it is made, the ``metric`` its margins read
    (``acc``, ``auroc`` or ``h``: a record's mean over corruptions), the margins that must all be
    positive, compared at ``digits`` decimals (the tables' precision: a margin that rounds to 0 is
    a tie, neither held nor failed), and the paper's own numbers behind it. ``needs`` names the
    data a claim needs where only the paper's scale can test it (``scales``)."""

    key: str
    words: str
    where: str
    metric: str
    margins: tuple[Margin, ...]
    paper: str
    needs: str = ""
    scales: tuple[str, ...] = SCALES
    stand_in: str = ""  # what our small scales test instead of the paper's setting
    digits: int = 1

    def __post_init__(self) -> None:
        assert self.metric in ("acc", "auroc", "h"), self.metric
        assert self.margins, f"claim {self.key} compares nothing"
        assert set(self.scales) <= set(SCALES), self.scales
        assert bool(self.needs) == (self.scales != SCALES), f"claim {self.key}: name the data it needs"

    @property
    def arms(self) -> tuple[Arm, ...]:
        """Every arm its margins read, each once, in order."""
        return tuple(dict.fromkeys(a for m in self.margins for a in m.arms))

    @property
    def tie(self) -> float:
        """The tie tolerance in points: a margin below half the last shown decimal."""
        return 0.5 * 10.0 ** -self.digits


# ------------------------------------------------------------------------------- benchmarks


@dataclass(frozen=True)
class Benchmark:
    """Where claims are judged: the cells of a profile at a scale over ``corruptions``, decided
    over ``seeds``."""

    name: str
    profile: str
    scale: str
    seeds: tuple[int, ...]
    corruptions: tuple[str, ...]
    title: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        assert self.scale in SCALES and self.seeds, (self.scale, self.seeds)
        assert set(self.corruptions) <= set(CORRUPTIONS) and self.corruptions, self.corruptions


#: The built-in CIFAR-10 benchmark (the quick profile's stream size, offline) over the paper's
#: fifteen corruptions: its claims over seeds 0–4. The quick profile's own three corruptions
#: (:data:`BUILTIN_QUICK`, what ``./run_all.sh`` computes) weigh one corruption as a third of
#: the mean, where the paper's average weighs it as a fifteenth.
BUILTIN = Benchmark("builtin", "quick", "builtin", (0, 1, 2, 3, 4), CORRUPTIONS, "built-in benchmark")
#: The built-in benchmark over the quick profile's three corruptions (the notebooks' cells).
BUILTIN_QUICK = Benchmark("builtin_quick", "quick", "builtin", (0, 1, 2, 3, 4), get_profile("quick").corruptions,
                          "built-in benchmark, three corruptions")
#: The ResNet-18 reference run on real images (results/reference): its claims over seeds 0–2.
REFERENCE = Benchmark("reference", "quick", "real", (0, 1, 2), get_profile("quick").corruptions,
                      "reference run (real images)")


def full_benchmark(seeds: Sequence[int] = (0,)) -> Benchmark:
    """A user's full-profile store on the paper's data sets."""
    return Benchmark("full", "full", "paper", tuple(seeds), CORRUPTIONS, "full profile (the paper's data)")


def parse_seeds(text: str) -> tuple[int, ...]:
    """``0-4``, ``0,1,2`` or ``0-2,5`` as seeds, in order, each once."""
    found: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise ValueError(f"seeds: expected numbers or ranges such as '0-4' or '0,1,2', got {text!r}") from None
        if first < 0 or last < first:
            raise ValueError(f"seeds: a range runs from a seed >= 0 up, got {part!r}")
        found += range(first, last + 1)
    if not found:
        raise ValueError(f"seeds: name at least one seed, got {text!r}")
    return tuple(dict.fromkeys(found))


# ------------------------------------------------------------------------------- arms -> cells


@cache
def _plan_cells(experiment: str, params: tuple[tuple[str, str], ...], profile: str, scale: str,
                seed: int, corruptions: tuple[str, ...]) -> tuple[plans.PlannedCell, ...]:
    return EXPERIMENTS[experiment].plan(profile=profile, scale=scale, seeds=str(seed), corruptions=",".join(corruptions),
                                        **dict(params)).cells


def spec(arm: Arm, benchmark: Benchmark, seed: int) -> RunSpec | None:
    """The cell behind ``arm`` under ``seed`` on ``benchmark``; None where that scale has no such
    row (a data set it does not stand in for)."""
    cells = _plan_cells(arm.experiment, arm.params, benchmark.profile, benchmark.scale, seed, benchmark.corruptions)
    for cell in cells:
        if (cell.spec.method == arm.method and cell.variant == arm.variant and cell.paper_dataset == arm.dataset
                and cell.paper_outliers == arm.outliers):
            return cell.spec
    return None


def testable(claim: Claim, benchmark: Benchmark) -> bool:
    """Whether ``benchmark``'s scale can test ``claim`` (else it needs data)."""
    return benchmark.scale in claim.scales and all(spec(a, benchmark, benchmark.seeds[0]) is not None
                                                    for a in claim.arms)


def cells(claim: Claim, benchmark: Benchmark, seeds: Sequence[int] | None = None) -> list[RunSpec]:
    """The distinct cells ``claim`` reads on ``benchmark`` over ``seeds`` (None: the
    benchmark's), seed by seed; none where it needs data."""
    if not testable(claim, benchmark):
        return []
    found = [spec(a, benchmark, s) for s in (benchmark.seeds if seeds is None else seeds) for a in claim.arms]
    return registry.distinct([s for s in found if s is not None])


def ledger_cells(benchmark: Benchmark, seeds: Sequence[int] | None = None,
                 ledger: Sequence[Claim] | None = None) -> list[RunSpec]:
    """Every cell of the ledger's testable claims on ``benchmark``, claim by claim."""
    found: list[RunSpec] = []
    for claim in LEDGER if ledger is None else ledger:
        found += cells(claim, benchmark, seeds)
    return registry.distinct(found)


#: The headline tables a benchmark's figure and page show for every method (Tables 1a, 3, 4a).
HEADLINE_TABLES = (plans.TABLE1, plans.CLASS_SPLIT, plans.CLOSED_SET)


def evidence_cells(benchmark: Benchmark, store: ResultsStore, device: str,
                   seeds: Sequence[int] | None = None) -> list[RunSpec]:
    """What ``benchmark compute`` computes over ``seeds`` (None: the benchmark's): the ledger's
    missing cells, the claim cheapest to complete first (:func:`cheapest_first`), then the rest of
    the headline tables' cells for every method."""
    chosen = benchmark.seeds if seeds is None else tuple(seeds)
    headline: list[RunSpec] = []
    for experiment in HEADLINE_TABLES:
        headline += experiment.plan(profile=benchmark.profile, scale=benchmark.scale,
                                    seeds=",".join(map(str, chosen))).specs
    return registry.distinct(cheapest_first(benchmark, store, device, chosen) + headline)


def _estimated_seconds(spec_: RunSpec, known: Mapping[tuple, float], by_method: Mapping[str, float]) -> float:
    """A missing cell's cost from a record of the same cell under another seed, else the
    method's mean cell (its seconds in the store), else one hour."""
    same = known.get(_cost_key(spec_))
    return same if same is not None else by_method.get(spec_.method, 3600.0)


def _cost_key(spec_: RunSpec) -> tuple:
    fields = spec_.to_dict()
    fields.pop("seed", None)
    return tuple(sorted((k, repr(v)) for k, v in fields.items()))


def cheapest_first(benchmark: Benchmark, store: ResultsStore, device: str, seeds: Sequence[int] | None = None,
                   ledger: Sequence[Claim] | None = None) -> list[RunSpec]:
    """The ledger's missing cells on ``benchmark``, the claim that costs least to complete first
    (each cell's cost estimated from the store's records computed on the same kind of ``device``
    — ``cpu`` or ``cuda`` — of the same cell under another seed), and within a claim its cells
    seed by seed: an interrupted computation leaves the most claims decided."""
    records = store.records()
    known: dict[tuple, float] = {}
    per_method: dict[str, list[float]] = {}
    kind = device.split(":")[0]
    for record in records:
        seconds = float(record.seconds or math.nan)
        if math.isnan(seconds) or str(record.device or "").split(":")[0] != kind:
            continue
        done = record.spec
        known.setdefault(_cost_key(done), seconds)
        per_method.setdefault(done.method, []).append(seconds)
    by_method = {m: sum(v) / len(v) for m, v in per_method.items()}
    stored = {r.key for r in records}
    pending = []
    for order, claim in enumerate(LEDGER if ledger is None else ledger):
        missing = [s for s in cells(claim, benchmark, seeds) if s.key() not in stored]
        if missing:
            cost = sum(_estimated_seconds(s, known, by_method) for s in missing)
            pending.append((cost, order, missing))
    return registry.distinct([s for _, _, missing in sorted(pending, key=lambda p: p[:2]) for s in missing])


# ------------------------------------------------------------------------------- the ledger

_T1, _T3, _T4 = plans.TABLE1.notebook, plans.CLASS_SPLIT.notebook, plans.CLOSED_SET.notebook
_ABL, _WEIGHTS, _RATIOS, _VIEWS = (plans.ABLATION.notebook, plans.WEIGHTS.notebook, plans.RATIOS.notebook,
                                   plans.AUGMENTATION.notebook)
_IMAGENET = plans.IMAGENET.notebook
_SPLIT10 = {"dataset": "cifar10_c_8_2", "outliers": "heldout_classes"}
_CLOSED10 = {"dataset": "cifar10_c", "outliers": "none"}
#: Table 5, Fig. 3 and Table 6 are the paper's on CIFAR100-C + SVHN-C; our small scales stand in.
_C100_SVHN = {"dataset": "cifar100_c", "outliers": "svhn"}
_STAND_IN = "the paper's CIFAR100-C + SVHN-C; at our small scales CIFAR-10-C + Noise stands in"


def _best(experiment: str, others: Sequence[str] = PAPER_ORDER, method: str = "stamp", **where: str) -> Lead:
    arm = Arm(experiment, method, **where)
    return Lead(arm, tuple(Arm(experiment, m, **where) for m in others if m != method))


def _row(row: tuple[bool, bool, bool, bool]) -> Arm:
    return Arm(_ABL, "stamp", plans.ablation_label(*row), **_C100_SVHN)


#: Table 5's rows in the paper's order: plain entropy minimisation, D.S., S.A., S.A.+D.S.,
#: +S.W., +RBM, +RBM+S.W.
_ABLATION = tuple(_row(r) for r in plans.ABLATION_ROWS)
_WEIGHT = {w: Arm(_WEIGHTS, "stamp", f"weighting={w}", **_C100_SVHN) for w in plans.WEIGHT_STRATEGIES}
_SHARES = ("0.05", "0.1", "0.2", "0.3333", "0.5")
_RATIO_METHODS = (("methods", "source,bn_stats,tent,eata,stamp"),)


def _share(method: str, share: str) -> Arm:
    return Arm(_RATIOS, method, f"ratio={share}", params=_RATIO_METHODS, **_C100_SVHN)


_PAPER_TEN = "of the paper's ten methods"

LEDGER: tuple[Claim, ...] = (
    # Table 1a, the Noise column: what every CIFAR-10 benchmark can test.
    Claim("a_best_h", "STAMP has the best H-score of the ten methods with Noise outliers", "Table 1a", "h",
          (_best(_T1),), "STAMP 80.1, best other RoTTA 75.6"),
    Claim("a_best_auroc", "STAMP rejects outliers best: the highest AUROC of the ten methods", "Table 1a, §4.2",
          "auroc", (_best(_T1),), "STAMP 83.2, best other RoTTA 74.3"),
    Claim("a_best_acc", "STAMP has the best known-class accuracy of the ten methods with Noise outliers", "Table 1a",
          "acc", (_best(_T1),), "STAMP 77.9, best other SoTTA 77.8"),
    Claim("stamp_over_bn_stats", "STAMP improves the H-score of BN Stats (the statistics-only baseline) in both "
          "outlier settings", "Tables 1a, 3", "h",
          (Difference(Arm(_T1, "stamp"), Arm(_T1, "bn_stats")),
           Difference(Arm(_T3, "stamp", **_SPLIT10), Arm(_T3, "bn_stats", **_SPLIT10))),
          "H (a) 70.6 → 80.1, (b) 72.6 → 76.4"),
    Claim("tent_acc_over_bn_stats", "Entropy minimisation raises accuracy: Tent above BN Stats", "Table 1a, §4.2",
          "acc", (Difference(Arm(_T1, "tent"), Arm(_T1, "bn_stats")),), "ACC BN Stats 72.9 → Tent 77.4"),
    Claim("tent_auroc_below_bn_stats", "… but makes outliers confident too: Tent's AUROC below BN Stats'",
          "Table 1a, §4.2", "auroc", (Difference(Arm(_T1, "bn_stats"), Arm(_T1, "tent")),),
          "AUROC BN Stats 68.6 → Tent 48.7"),
    Claim("tent_auroc_below_source", "Tent's AUROC falls below the source model's", "§4.2", "auroc",
          (Difference(Arm(_T1, "source"), Arm(_T1, "tent")),), "AUROC Source 70.4 → Tent 48.7"),
    Claim("b_best_h", "STAMP has the best H-score in the class-split setting", "Table 3", "h",
          (_best(_T3, **_SPLIT10),), "STAMP 76.4, best other EATA 74.1"),
    Claim("c_best_acc", "STAMP has the best closed-set accuracy", "Table 4a, §4.2", "acc",
          (_best(_T4, **_CLOSED10),), "STAMP 85.2, best other EATA 84.7"),
    # Fig. 3, Table 6: STAMP's variants (the paper's on CIFAR100-C + SVHN-C).
    Claim("weights_adaptive_best", "STAMP's adaptive self-weight beats the static weight and EATA's weight", "Fig. 3",
          "h", (Difference(_WEIGHT["adaptive"], _WEIGHT["static"]), Difference(_WEIGHT["adaptive"], _WEIGHT["eata"])),
          "adaptive best (bar values not printed)", stand_in=_STAND_IN),
    Claim("ratio_steady", "STAMP's H-score stays within 3 points as the outlier share goes from 5 % to 50 %",
          "Table 6, §4.3", "h", (Within(tuple(_share("stamp", s) for s in _SHARES), 3.0),),
          "CIFAR100-C: range ≤ 2.5 per outlier set (67.8–71.9 over the three)", stand_in=_STAND_IN),
    # Table 5 and its reading in §4.3.
    Claim("ablation_full_best", "The full STAMP (S.A.+D.S.+RBM+S.W.) beats every ablated row", "Table 5", "h",
          (Lead(_ABLATION[-1], _ABLATION[:-1]),), "H 71.7 against at most 67.6", stand_in=_STAND_IN),
    Claim("ablation_step_decay_acc", "The step-size decay alone raises accuracy over plain entropy minimisation",
          "Table 5, §4.3", "acc", (Difference(_ABLATION[1], _ABLATION[0]),), "ACC 54.4 → 58.9", stand_in=_STAND_IN),
    Claim("ablation_step_decay_auroc", "… and lowers AUROC", "Table 5, §4.3", "auroc",
          (Difference(_ABLATION[0], _ABLATION[1]),), "AUROC 70.4 → 65.3", stand_in=_STAND_IN),
    Claim("ablation_self_weight_auroc", "Self-weighting raises AUROC over S.A.+D.S.", "Table 5, §4.3", "auroc",
          (Difference(_ABLATION[4], _ABLATION[3]),), "AUROC 70.8 → 77.7", stand_in=_STAND_IN),
    Claim("ablation_memory_acc", "Removing the memory (RBM) lowers accuracy", "Table 5, §4.3", "acc",
          (Difference(_ABLATION[6], _ABLATION[4]),), "ACC 63.7 → 59.3", stand_in=_STAND_IN),
    Claim("ablation_self_weight_with_memory_auroc", "Removing self-weighting lowers AUROC", "Table 5, §4.3", "auroc",
          (Difference(_ABLATION[6], _ABLATION[5]),), "AUROC 82.1 → 75.1", stand_in=_STAND_IN),
    # Fig. 4 (appendix): the augmentation-averaged prediction.
    Claim("views_16_over_1", "Averaging over K = 16 augmented views detects outliers better than one view", "Fig. 4",
          "auroc", (Difference(Arm(_VIEWS, "stamp", "K=16"), Arm(_VIEWS, "stamp", "K=1")),),
          "+Aug better (bar values not printed)"),
    # Claims only the paper's data can test.
    Claim("a_other_sets_best_h", "STAMP has the best H-score on CIFAR10-C with SVHN-C, LSUN-C and TinyImageNet-C "
          "outliers", "Table 1a", "h", tuple(_best(_T1, outliers=o) for o in ("svhn", "lsun", "tiny")),
          "STAMP H 80.6 / 84.8 / 78.5 (Avg 81.0 over the four sets, best other CoTTA 77.2)",
          needs="SVHN-C, LSUN-C and TinyImageNet-C (outliers for CIFAR10-C)", scales=("paper",)),
    Claim("cifar100_best_h", "STAMP has the best H-score on CIFAR100-C with each of the four outlier sets", "Table 1b",
          "h", tuple(_best(_T1, dataset="cifar100_c", outliers=o) for o in ("noise", "svhn", "lsun", "tiny")),
          "STAMP H 72.8 / 71.7 / 71.9 / 69.2 (Avg ACC 62.3 vs SAR 59.5, AUROC 84.7 vs EATA 77.4, §4.2)",
          needs="CIFAR100-C with Noise, SVHN-C, LSUN-C and TinyImageNet-C", scales=("paper",)),
    Claim("imagenet_best_h", "STAMP has the best H-score on ImageNet-C with Places365-C and Textures-C outliers",
          "Table 2, §4.2", "h",
          tuple(_best(_IMAGENET, dataset="imagenet_c", outliers=o) for o in ("places365", "textures")),
          "+1.6 over EATA (Places365-C), +2.2 over SAR (Textures-C)",
          needs="ImageNet-C, Places365-C and Textures-C", scales=("paper",)),
    Claim("cifar100_split_best_h", "STAMP has the best H-score in CIFAR100-C's 80:20 class split", "Table 3", "h",
          (_best(_T3, dataset="cifar100_c_80_20", outliers="heldout_classes"),), "STAMP 68.5, best other SAR 66.1",
          needs="CIFAR100-C", scales=("paper",)),
    Claim("cifar100_closed_best_acc", "STAMP has the best closed-set accuracy on CIFAR100-C", "Table 4b, §4.2", "acc",
          (_best(_T4, dataset="cifar100_c", outliers="none"),), "STAMP 64.4, second best SoTTA 60.1",
          needs="CIFAR100-C", scales=("paper",)),
)

#: The claims by key.
BY_KEY: dict[str, Claim] = {c.key: c for c in LEDGER}
assert len(BY_KEY) == len(LEDGER), "claim keys are unique"
