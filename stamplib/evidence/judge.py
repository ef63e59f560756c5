"""The ledger's claims judged on a results store (issue 49): one verdict per claim and benchmark,
and the pages and figure that show them.

A claim (:mod:`stamplib.evidence.ledger`) holds under a seed when every one of its margins is
positive there (compared at the tables' precision, so a margin that rounds to zero is a tie). Over
the seeds that have every cell it is decided by :func:`stamplib.report.seeds.decide_all`: *yes*
under every seed, *no* under none, otherwise *within the seed spread*. A benchmark that lacks some
seeds' cells says how many it has (``2 of 3 seeds``) and names the missing cells; a claim that its
scale cannot test *needs data*, and names the data.

Beside the answer: the paired difference (the claim's smallest margin under each seed), its mean
and its min–max over the seeds, and a 95 % bootstrap interval of the mean. The interval resamples
seeds within each corruption independently — rliable's stratified bootstrap, with the
corruptions as its tasks and the seeds as its runs — through :func:`scipy.stats.bootstrap`, one
sample per corruption (percentile interval, 2,000 resamples, a fixed generator, so a page renders
the same twice).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import bootstrap

from stamplib import paths
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
METRIC_LABELS = {"acc": "ACC", "auroc": "AUROC", "h": "H"}
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95

Records = Mapping[str, Record]


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
    interval: tuple[float, float] | None = None  # bootstrap 95 % interval of the mean margin
    needs_data: bool = False
    missing_specs: tuple[RunSpec, ...] = field(default=(), compare=False)

    @property
    def decided_seeds(self) -> tuple[int, ...]:
        return self.decision.seeds

    @property
    def complete(self) -> bool:
        """Every seed of the benchmark has every cell."""
        return not self.needs_data and not self.missing

    @property
    def answer(self) -> str:
        """``yes`` / ``no`` / ``within the seed spread`` over all the benchmark's seeds;
        ``2 of 3 seeds (seeds 0 and 1: yes)`` or ``1 of 3 seeds (seed 0: no)`` over some;
        ``pending`` with none; ``needs data``."""
        if self.needs_data:
            return NEEDS_DATA
        if self.decision.answer == seeds.PENDING:
            return seeds.PENDING
        have, of = len(self.decided_seeds), len(self.benchmark.seeds)
        if have >= of:
            return self.decision.label()
        reading = self.decision.reading if have == 1 else self.decision.answer
        return f"{have} of {of} seeds ({seeds.seeds_text(self.decided_seeds)}: {reading})"

    @property
    def verdict(self) -> str:
        """The bare verdict: yes, no, within the seed spread, pending, needs data, or a single
        seed's yes / no / tie."""
        if self.needs_data:
            return NEEDS_DATA
        if self.decision.answer == seeds.ONE_SEED:
            return self.decision.reading
        return self.decision.answer

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
    """The claim's smallest margin (arrays allowed: the bootstrap's resamples)."""
    return np.min(np.stack([np.asarray(m.margin(value), dtype=float) for m in claim.margins]), axis=0)


def _interval(claim: Claim, records: Mapping[tuple[Arm, int], Record], decided: Sequence[int],
              ) -> tuple[float, float] | None:
    """The stratified bootstrap's 95 % interval of the mean margin over ``decided`` seeds: the
    seeds are resampled within each corruption (one sample per corruption), the arms of one seed
    together (paired)."""
    if len(decided) < 2:
        return None
    arms = claim.arms
    corruptions = sorted(set.intersection(*(set(records[(a, s)].per_corruption) for a in arms for s in decided)))
    if not corruptions:
        return None
    samples = [np.array([[_per_corruption(records[(a, s)], claim.metric)[c] for s in decided] for a in arms])
               for c in corruptions]  # per corruption: (arms, seeds)
    if any(not np.isfinite(x).all() for x in samples):
        return None

    def mean_margin(*resampled: np.ndarray, axis: int = -1) -> np.ndarray:
        by_arm = np.mean(np.stack(resampled), axis=0)  # mean over corruptions: (arms, ..., seeds)
        value = {a: by_arm[i] for i, a in enumerate(arms)}
        return np.mean(_combined(claim, value), axis=axis)

    if np.ptp(np.stack(samples), axis=-1).max() == 0:  # one value under every seed: nothing to resample
        point = float(mean_margin(*samples))
        return point, point
    result = bootstrap(samples, mean_margin, vectorized=True, axis=-1, n_resamples=BOOTSTRAP_RESAMPLES,
                       confidence_level=CONFIDENCE, method="percentile", rng=np.random.default_rng(0))
    low, high = result.confidence_interval
    return float(low), float(high)


def judge(claim: Claim, benchmark: Benchmark, records: Records) -> Verdict:
    """``claim`` on ``benchmark``, from ``records`` (by key)."""
    if not ledger.testable(claim, benchmark):
        return Verdict(claim, benchmark, seeds.Decision(seeds.PENDING), {}, {}, needs_data=True)
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
    decided = decision.seeds
    margins = {s: float(_combined(claim, {a: values[a][s] for a in claim.arms})) for s in decided
               if all(s in values[a] for a in claim.arms)}
    interval = _interval(claim, found, [s for s in decided if s in margins])
    return Verdict(claim, benchmark, decision, values, margins, tuple(missing), interval,
                   missing_specs=tuple(missing_specs))


def judge_all(store: ResultsStore, benchmark: Benchmark, claims: Sequence[Claim] = ledger.LEDGER) -> list[Verdict]:
    """Every claim of the ledger on ``benchmark``, from ``store``'s records."""
    records = store.records_by_key()
    return [judge(c, benchmark, records) for c in claims]


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


def _margin_text(verdict: Verdict, margin: Any, over: Sequence[int]) -> str:
    v = verdict.values
    if isinstance(margin, Lead):
        best = _best_other(verdict, margin)
        return (f"{arm_label(margin.arm)} {_text(v[margin.arm], over)}, best other {arm_label(best)} "
                f"{_text(v[best], over)}")
    if isinstance(margin, Difference):
        return f"{arm_label(margin.higher)} {_text(v[margin.higher], over)} vs {arm_label(margin.lower)} " \
               f"{_text(v[margin.lower], over)}"
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
    benchmark = Benchmark(plan.notebook, first.profile, plan.scale, chosen, plan.notebook)
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


RULE = ("decided seed by seed on the seeds that have every cell the claim compares: *yes* if it holds under "
        "every seed, *no* if it fails under every one, otherwise *within the seed spread*; a margin that rounds "
        "to 0.0 is a tie. Where some seeds' cells are missing the verdict says how many seeds it has "
        "(*1 of 3 seeds*, with that seed's reading) and the row names the missing cells. Paired Δ: the claim's "
        "smallest margin under each seed (positive where it holds), its mean, its min to max over the seeds "
        "and a 95 % stratified-bootstrap interval of the mean (seeds resampled within each corruption)")


def readme_table(verdicts: Sequence[Verdict]) -> str:
    """The README's table of the claims the reference run can test: claim, where, verdict, the
    paper's numbers, ours."""
    rows = [{"claim": v.claim.words, "paper": v.claim.where, "holds here": f"**{v.answer}**",
             "paper's numbers": v.claim.paper, "ours": ours_text(v)} for v in verdicts if not v.needs_data]
    return to_markdown(_frame(rows, ("claim", "paper", "holds here", "paper's numbers", "ours")))


def _frame(rows: list[dict[str, str]], columns: Sequence[str]) -> Any:
    import pandas as pd

    return pd.DataFrame(rows, columns=list(columns))


def side_by_side(first: Sequence[Verdict], second: Sequence[Verdict]) -> str:
    """``docs/claims.md``'s table: every claim with both benchmarks' verdicts and paired Δ."""
    assert [v.claim.key for v in first] == [v.claim.key for v in second]
    a, b = first[0].benchmark, second[0].benchmark
    rows = []
    for x, y in zip(first, second):
        rows.append({"claim": x.claim.words, "paper": x.claim.where, "metric": METRIC_LABELS[x.claim.metric],
                     f"{a.title}": f"**{x.answer}**", f"{a.title}: paired Δ": _delta_cell(x),
                     f"{b.title}": f"**{y.answer}**", f"{b.title}: paired Δ": _delta_cell(y)})
    columns = ("claim", "paper", "metric", a.title, f"{a.title}: paired Δ", b.title, f"{b.title}: paired Δ")
    return to_markdown(_frame(rows, columns))


def _delta_cell(verdict: Verdict) -> str:
    if verdict.needs_data:
        return f"needs {verdict.claim.needs}"
    text = verdict.difference_text()
    if verdict.missing:
        text += f"; missing: {verdict.missing_text()}"
    return text


PAGE = Path("docs") / "claims.md"
FIGURE = "claims"  # figures/claims.png, committed beside the page
PAGE_COMMAND = "python -m stamplib claims render"


def page(first: Sequence[Verdict], second: Sequence[Verdict]) -> str:
    """The whole of ``docs/claims.md``."""
    a, b = first[0].benchmark, second[0].benchmark
    stand_ins = sorted({v.claim.stand_in for v in first if v.claim.stand_in})
    counts = {bench.title: _counts(vs) for bench, vs in ((a, first), (b, second))}
    lines = [
        "# The paper's claims, decided", "",
        f"Generated by `{PAGE_COMMAND}` from `results/builtin_benchmark/` and `results/reference/`; do not edit. "
        "Each claim is written once, in `stamplib/evidence/ledger.py` (the ledger): its words, where the paper "
        "makes it, the metric and the margins that must be positive. The README, `docs/builtin_benchmark.md` and "
        "`docs/reference_run.md` read their verdicts from it.", "",
        f"- **{a.title}**: the quick profile on the built-in CIFAR-10 photographs, {seeds.seeds_text(a.seeds)} "
        f"(`python -m stamplib benchmark compute --seeds {a.seeds[0]}-{a.seeds[-1]}`).",
        f"- **{b.title}**: the ResNet-18 run on the JPEG CIFAR-10 of `shared/data`, {seeds.seeds_text(b.seeds)} "
        "(`python -m stamplib reference compute --cells claims`, the claim cheapest to complete first).", "",
        "Verdicts are " + RULE + ".", "",
        "Verdicts: " + "; ".join(f"{title}: {text}" for title, text in counts.items()) + ".", "",
        side_by_side(first, second), "",
        "![Per claim, the paired difference under each seed on both benchmarks](../figures/claims.png)", "",
        "Each dot is one seed's paired difference (the claim holds under that seed right of zero); the bar is "
        "the bootstrap interval of the mean.", "",
    ]
    if stand_ins:
        lines += ["Table 5, Fig. 3 and Table 6 are the paper's on CIFAR100-C + SVHN-C; both benchmarks test them on "
                  "CIFAR-10-C with Noise outliers, which stand in for that setting as in notebooks 06–08.", ""]
    needs = [v for v in first if v.needs_data]
    if needs:
        lines += ["## Claims that need other data", "",
                  "These hold for data sets neither benchmark has; a full-profile store with the data judges them "
                  "(`stamplib.evidence.judge.judge_all(store, ledger.full_benchmark(seeds))`).", ""]
        lines += [f"- {v.claim.words} ({v.claim.where}; the paper: {v.claim.paper}): needs {v.claim.needs}."
                  for v in needs]
        lines.append("")
    return "\n".join(lines)


def _counts(verdicts: Sequence[Verdict]) -> str:
    tally: dict[str, int] = {}
    for v in verdicts:
        key = v.verdict if v.complete or v.needs_data else "not all seeds yet"
        tally[key] = tally.get(key, 0) + 1
    order = (seeds.YES, seeds.NO, seeds.WITHIN, "not all seeds yet", seeds.PENDING, NEEDS_DATA)
    return ", ".join(f"{tally[k]} {k}" for k in order if k in tally)


# ------------------------------------------------------------------------------- the figure


def figure(first: Sequence[Verdict], second: Sequence[Verdict]) -> plt.Figure:
    """Per testable claim, each seed's paired difference on both benchmarks, with the bootstrap
    interval of its mean, and zero marked."""
    from stamplib.report.palette import PAPER_METHODS_BAR, STAMP

    shown = [(x, y) for x, y in zip(first, second) if not x.needs_data or not y.needs_data]
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(shown) + 1.2))
    styles = ((0, STAMP, "o", first[0].benchmark.title), (1, PAPER_METHODS_BAR, "s", second[0].benchmark.title))
    for row, pair in enumerate(shown):
        for index, colour, marker, _ in styles:
            verdict = pair[index]
            y = row + (-0.16 if index == 0 else 0.16)
            if verdict.interval is not None:
                ax.plot(verdict.interval, [y, y], color=colour, lw=2.2, alpha=0.45, solid_capstyle="butt")
            values = list(verdict.margins.values())
            ax.scatter(values, [y] * len(values), color=colour, marker=marker, s=18, zorder=3)
    for _, colour, marker, title in styles:
        ax.scatter([], [], color=colour, marker=marker, s=18, label=title)
    ax.axvline(0.0, color="black", lw=0.8)
    # Margins span a tie (0.1 pt) to Tent's 40-point AUROC loss: linear within ±1 point, then
    # logarithmic, so that both the near-ties and the large gaps stay readable.
    ax.set_xscale("symlog", linthresh=1.0, linscale=0.8)
    ticks = [-30, -10, -3, -1, 0, 1, 3, 10, 30]
    ax.set_xticks(ticks, [f"{t:+d}" if t else "0" for t in ticks])
    ax.set_xlim(-45, 50)
    ax.set_yticks(range(len(shown)), [_short_words(x.claim) for x, _ in shown], fontsize=7.5)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlabel("paired difference, points (the claim holds right of 0; symmetric log scale beyond ±1)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def _short_words(claim: Claim) -> str:
    words = claim.words if len(claim.words) <= 62 else claim.words[:59].rstrip() + "…"
    return f"{words} [{METRIC_LABELS[claim.metric]}]"


def render(builtin_store: ResultsStore, reference_store: ResultsStore, root: Path) -> list[Path]:
    """Write ``docs/claims.md`` and ``figures/claims.png`` under ``root`` (the checkout)."""
    from stamplib.report.figures import save_figure

    first = judge_all(builtin_store, ledger.BUILTIN_QUICK)
    second = judge_all(reference_store, ledger.REFERENCE)
    path = root / PAGE
    paths.atomic_write_bytes(path, page(first, second).encode())  # as the pages that quote it are written
    written = save_figure(figure(first, second), FIGURE, root / "figures")
    return [path, *written]

