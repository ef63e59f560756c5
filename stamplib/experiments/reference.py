"""The reference run on real images, kept in the repository as evidence.

The cells are those of the paper's tables at the ``quick`` profile on real data (the JPEG
CIFAR-10 of ``shared/data``, our CIFAR-10-C at severity 5, 2,000 known-class images per
corruption): Table 1 with Noise outliers (setting a), Table 3's 8:2 class split (b) and Table 4's
closed set (c), plus STAMP over seeds 1 and 2 in (a) to measure its spread. Their records live
in ``results/reference/`` and are committed, each with its provenance (checkpoint and data
archive SHA-256, versions, git commit, command).

* ``render`` executes the reference notebooks on those records only (``compute_missing`` off):
  a fresh clone with no data and no checkpoints gets ``figures/*_real.*``.
* ``compute`` fills in the missing reference cells (needs the data and both source models).
* ``recompute`` computes every reference cell again into a scratch store and reports each
  record whose ACC or AUROC differs from the committed one by more than the tolerance: 0.1 pt
  for methods without test-time randomness, STAMP's spread over seeds 0, 1, 2 for the others
  and for OWTTT, whose adaptation turns another machine's rounding into other predictions.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from stamplib import methods, paths
from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import grid, plans, registry
from stamplib.paths import RunContext

PROFILE = "quick"
#: The tables of settings (a), (b) and (c), in the order they are computed.
EXPERIMENTS = (plans.TABLE1, plans.CLASS_SPLIT, plans.CLOSED_SET)
#: Their notebook names (the edges: ``reference render`` executes these notebooks).
NOTEBOOKS = tuple(e.notebook for e in EXPERIMENTS)
#: STAMP's seeds in setting (a): their spread is the tolerance of the stochastic methods.
SPREAD_METHOD, SPREAD_SEEDS = "stamp", (0, 1, 2)
#: Methods whose outputs depend on no random draw at test time (same bits on the same machine;
#: on another CPU or a GPU only rounding differs), compared within 0.1 pt.
DETERMINISTIC = frozenset({"source", "bn_stats", "tent", "eata", "sar", "owttt"})
DETERMINISTIC_TOLERANCE = 0.1
#: Deterministic methods whose adaptation amplifies a rounding difference until predictions
#: part (OWTTT's hard pseudo-label thresholds and prototype updates): another summation order
#: acts like another seed. Measured against the CPU records: 0.15 pt on a CPU without AVX-512,
#: 2.45 pt on an H100 (docs/real_data.md). They get the stochastic methods' tolerance.
ROUNDING_SENSITIVE = frozenset({"owttt"})
#: The methods held to DETERMINISTIC_TOLERANCE.
WITHIN_DETERMINISTIC_TOLERANCE = DETERMINISTIC - ROUNDING_SENSITIVE
METRICS = ("acc", "auroc")


def default_data_root() -> Path:
    """Where the reference run's data sets are unless ``--data-root`` or ``$STAMPLIB_DATA_ROOT``
    name another place: ``shared/data`` beside the checkout (``<repo>/../shared/data``), as on the
    project's machines (the command line gives it to :meth:`stamplib.paths.RunContext.build`)."""
    return paths.shared_data()


def reference_dir() -> Path:
    return (paths.repo_root() or Path.cwd()) / "results" / "reference"


#: The reference run's cells run on real images (the JPEG CIFAR-10 and our CIFAR-10-C made from it).
#: Planning reads no file and a RunSpec's key holds no data root, so the cells are planned at this
#: scale by name, with or without the data.
SCALE = "real"


def plan(experiment: plans.Experiment, **params: Any) -> plans.Plan:
    """``experiment``'s plan as the reference run has it: the quick profile on real images
    (``params``: a notebook's other parameters, such as ``methods`` or ``seeds``)."""
    return experiment.plan(profile=PROFILE, scale=SCALE, **params)


def experiment_cells(experiment: plans.Experiment, **params: Any) -> list[RunSpec]:
    """The distinct RunSpecs of :func:`plan`."""
    return plan(experiment, **params).specs


def specs() -> list[RunSpec]:
    """Every reference cell, in the order they are computed: setting (a) for every method,
    STAMP's extra seeds in (a), then (b) and (c) — so an interrupted run leaves the most telling
    table complete first."""
    seeds = ",".join(str(s) for s in SPREAD_SEEDS)
    cells = experiment_cells(plans.TABLE1)
    cells += experiment_cells(plans.TABLE1, methods=SPREAD_METHOD, seeds=seeds)
    for experiment in EXPERIMENTS[1:]:
        cells += experiment_cells(experiment)
    return registry.distinct(cells)


#: Cells beyond the 44, computed after them as the compute allows, in this order:
#: the four most telling methods over all 15 corruptions in (a), STAMP with one view instead of
#: K = 16 (Fig. 4), the rows of the ablation (Table 5), and the fourteen methods under the
#: realistic online protocol (notebook 12), all with Noise outliers.
EXTRA_METHODS_ALL_CORRUPTIONS = "source,bn_stats,tent,stamp"
EXTRA_EXPERIMENTS = (plans.AUGMENTATION, plans.ABLATION, plans.REALISTIC)


#: The stress cells, after those, in the order a CPU computes them until it stops: Fig. 3's static and
#: EATA weights; Table 6's outlier proportions for the cheap baselines (the paper prints STAMP
#: alone; a hidden row of its LaTeX has Source); STAMP at 5 %; notebook 13's harder streams for
#: the cheap methods; STAMP's other proportions (50 % first: with 5 % it tells how H degrades);
#: notebook 13's streams for the other methods.
RATIO_BASELINES = "source,bn_stats,tent,eata"
STAMP_RATIOS = ("0.05", "0.5,0.1,1/3")
#: Notebook 13 on real images: batches of 4 and 16, one label shift, mixed domains, for the
#: paper's ten methods and UniEnt (the cheap ones first).
STRESS_STREAMS = {"batch_sizes": "4,16,64", "batch_corruptions": "", "label_shifts": "sorted",
                  "domains": "separate,mixed"}  # 64 and separate: the (a) cells, as each axis's baseline
STRESS_CHEAP_METHODS = "source,bn_stats,tent,eata,sar"
STRESS_OTHER_METHODS = "rotta,owttt,unient,sotta,stamp,cotta"


def stress_specs() -> list[RunSpec]:
    """The optional cells of STAMP's variants and the harder streams (``claims compute --benchmark reference --cells
    stress``): Fig. 3's, Table 6's and notebook 13's on real images, in the order they are
    computed, without reference cells."""
    ratio_cells = partial(experiment_cells, plans.RATIOS)
    stream_cells = partial(experiment_cells, plans.STRESS, **STRESS_STREAMS)
    cells = experiment_cells(plans.WEIGHTS)
    cells += ratio_cells(methods=RATIO_BASELINES)
    cells += ratio_cells(outlier_ratios=STAMP_RATIOS[0])
    cells += stream_cells(methods=STRESS_CHEAP_METHODS)
    cells += ratio_cells(outlier_ratios=STAMP_RATIOS[1])
    cells += stream_cells(methods=STRESS_OTHER_METHODS)
    core = {s.key() for s in specs()}
    return [s for s in registry.distinct(cells) if s.key() not in core]


#: Seeds 1 and 2: the paper's ten methods in setting (a) over STAMP's other seeds, so that every
#: verdict of setting (a) is decided on paired seeds (the same stream for every method).
SEEDED_METHODS = ",".join(methods.PAPER_ORDER)
EXTRA_SEEDS = ",".join(str(s) for s in SPREAD_SEEDS if s != 0)


def seeded_specs() -> list[RunSpec]:
    """The paper's ten in setting (a) over seeds 1 and 2 (STAMP's are reference cells already)."""
    cells = experiment_cells(plans.TABLE1, methods=SEEDED_METHODS, seeds=EXTRA_SEEDS)
    core = {s.key() for s in specs()}
    return [s for s in registry.distinct(cells) if s.key() not in core]


def extra_specs() -> list[RunSpec]:
    """The optional cells, without those that are already reference cells."""
    cells = experiment_cells(plans.TABLE1, methods=EXTRA_METHODS_ALL_CORRUPTIONS, corruptions="all")
    for experiment in EXTRA_EXPERIMENTS:
        cells += experiment_cells(experiment)
    cells += stress_specs()
    cells += seeded_specs()
    core = {s.key() for s in specs()}
    return [s for s in registry.distinct(cells) if s.key() not in core]


def seed_spread(store: ResultsStore) -> float | None:
    """Largest max − min over STAMP's seeds 0, 1, 2 of any corruption's ACC or AUROC in setting
    (a), in points; None until all three seeds are stored."""
    seeds = ",".join(str(s) for s in SPREAD_SEEDS)
    runs = experiment_cells(plans.TABLE1, methods=SPREAD_METHOD, seeds=seeds)
    records = [store.get(s) for s in runs]
    if any(r is None for r in records):
        return None
    spread = 0.0
    for corruption in records[0].per_corruption:
        for metric in METRICS:
            values = [r.per_corruption[corruption].scores[metric] for r in records]
            spread = max(spread, max(values) - min(values))
    return spread


@dataclass(frozen=True)
class Discrepancy:
    """One metric of one record that moved by more than its tolerance."""

    key: str
    corruption: str
    metric: str
    reference: float
    recomputed: float
    tolerance: float

    def __str__(self) -> str:
        return (f"{self.key} {self.corruption} {self.metric}: committed {self.reference:.2f}, "
                f"recomputed {self.recomputed:.2f} (|Δ| {abs(self.recomputed - self.reference):.2f} "
                f"> {self.tolerance:.2f})")


def tolerance_for(method: str, spread: float | None) -> float | None:
    """0.1 pt for the deterministic methods that rounding does not move; STAMP's seed spread for
    the others (None until the three seeds are stored)."""
    if method in WITHIN_DETERMINISTIC_TOLERANCE:
        return DETERMINISTIC_TOLERANCE
    return spread


def compare_records(reference: Record, recomputed: Record, tolerance: float) -> list[Discrepancy]:
    """The per-corruption ACC/AUROC of two records of one spec that differ by more than
    ``tolerance`` points (a corruption missing on one side counts as a difference, and so does
    NaN on one side; NaN on both is the same answer: a closed-set cell has no outliers to rank,
    so no AUROC)."""
    out = []
    for corruption, ref in reference.per_corruption.items():
        new = recomputed.per_corruption.get(corruption)
        for metric in METRICS:
            value = float("nan") if new is None else float(new.scores[metric])
            was = float(ref.scores[metric])
            if new is not None and math.isnan(value) and math.isnan(was):
                continue
            if not abs(value - was) <= tolerance:  # NaN on one side counts as a difference
                out.append(Discrepancy(reference.key, corruption, metric, was, value, tolerance))
    return out


@dataclass
class Comparison:
    compared: int
    unchecked: list[str]  # keys without a tolerance yet (no seed spread) or without a recomputation
    differences: list[Discrepancy]
    spread: float | None
    largest: Discrepancy | None = None  # the largest |Δ| of any compared metric, within tolerance or not


def largest_difference(reference: Record, recomputed: Record) -> Discrepancy | None:
    """The per-corruption ACC or AUROC of two records of one spec that moved most (None when
    a record has no comparable number)."""
    found = compare_records(reference, recomputed, -1.0)  # tolerance −1: every metric is listed
    finite = [d for d in found if abs(d.recomputed - d.reference) >= 0]  # NaN compares False
    return max(finite, key=lambda d: abs(d.recomputed - d.reference), default=None)


def compare_stores(
    reference: ResultsStore, recomputed: ResultsStore, cells: Sequence[RunSpec],
    spread: float | None = None,
) -> Comparison:
    """Compare every cell the reference store holds with the recomputed store."""
    spread = seed_spread(reference) if spread is None else spread
    compared, unchecked, differences = 0, [], []
    largest: Discrepancy | None = None
    for spec in cells:
        ref = reference.get(spec)
        if ref is None:
            continue
        new = recomputed.get(spec)
        tol = tolerance_for(spec.method, spread)
        if new is None or tol is None:
            unchecked.append(spec.key())
            continue
        compared += 1
        differences += compare_records(ref, new, tol)
        moved = largest_difference(ref, new)
        if moved is not None and (largest is None or abs(moved.recomputed - moved.reference)
                                  > abs(largest.recomputed - largest.reference)):
            largest = dataclasses.replace(moved, tolerance=tol)
    return Comparison(compared, unchecked, differences, spread, largest)


def select_methods(cells: Sequence[RunSpec], methods: str) -> list[RunSpec]:
    """``cells`` of the named methods (comma-separated; ``deterministic`` names the methods
    without test-time randomness); empty: all."""
    if not methods:
        return list(cells)
    names: set[str] = set()
    for name in (m.strip() for m in methods.split(",") if m.strip()):
        names |= set(DETERMINISTIC) if name == "deterministic" else {name}
    unknown = names - {c.method for c in cells}
    if unknown:
        raise ValueError(f"no reference cell of {sorted(unknown)}; methods: {sorted({c.method for c in cells})} "
                         "or 'deterministic'")
    return [c for c in cells if c.method in names]


#: The settings' letters, as the README and docs/reference_run.md name them.
SETTING_EXPERIMENTS = dict(zip("abc", EXPERIMENTS))


def select_settings(cells: Sequence[RunSpec], settings: str) -> list[RunSpec]:
    """``cells`` of the named settings (comma-separated letters: a = Noise outliers, b = the 8:2
    split, c = the closed set); empty: all. A machine with one of the two source models can
    then recompute the settings that model serves."""
    if not settings:
        return list(cells)
    letters = [s.strip() for s in settings.split(",") if s.strip()]
    unknown = sorted(set(letters) - set(SETTING_EXPERIMENTS))
    if unknown:
        raise ValueError(f"unknown setting {unknown}: name a (Noise outliers), b (8:2 split) or c (closed set)")
    keys = {s.key() for letter in letters
            for s in experiment_cells(SETTING_EXPERIMENTS[letter], seeds=",".join(map(str, SPREAD_SEEDS)))}
    return [c for c in cells if c.key() in keys]


# ------------------------------------------------------------------------------- the command's actions

# : ``claims compute --benchmark reference --cells`` and ``reference recompute --cells``: which cells. The ledger's are
# the evidence layer's to
#: plan (``claims compute --benchmark reference``, :mod:`stamplib.evidence.benchmarks`).
CELL_GROUPS = ("core", "extras", "all", "stress", "seeds")


def cells_of(group: str) -> list[RunSpec]:
    """The cells of a ``--cells`` group: the 44 (core), the optional ones (extras), both (all),
    the variants' and harder streams' optional ones alone (stress), or the paper's ten over seeds
    1 and 2 in (a) (seeds)."""
    if group not in CELL_GROUPS:
        raise ValueError(f"--cells is one of {', '.join(CELL_GROUPS)}, got {group!r}")
    return ((specs() if group in ("core", "all") else [])
            + (extra_specs() if group in ("extras", "all") else [])
            + (stress_specs() if group == "stress" else [])
            + (seeded_specs() if group == "seeds" else []))


def status_lines(store: ResultsStore) -> list[str]:
    """What ``claims status --benchmark reference`` prints: the 44 cells, the optional ones, the variants' and
    harder streams' among them, and STAMP's seed spread (the ledger's cells: ``claims status``)."""
    state = store.status(specs())
    extra = store.status(extra_specs())
    stress = store.status(stress_specs())
    seeded = store.status(seeded_specs())
    spread = seed_spread(store)
    return [
        f"reference store {store.root}: {len(state.done)} done, {len(state.missing)} missing, "
        f"{len(state.running)} running, of {len(state.done) + len(state.missing) + len(state.running)} cells",
        f"optional cells (compute --extras): {len(extra.done)} done, {len(extra.missing)} missing, "
        f"{len(extra.running)} running",
        f"  of which the stress cells (compute --cells stress: Fig. 3, Table 6, notebook 13): {len(stress.done)} done, "
        f"{len(stress.missing)} missing, {len(stress.running)} running",
        f"  of which the paper's ten over seeds 1 and 2 in (a) (compute --cells seeds): {len(seeded.done)} done, "
        f"{len(seeded.missing)} missing, {len(seeded.running)} running",
        "STAMP seed spread (setting a): " + ("not yet measured" if spread is None else f"{spread:.2f} pt"),
    ]


def compute(cells: Sequence[RunSpec], context: RunContext, jobs: int = 1) -> grid.GridReport:
    """The missing ones of ``cells`` into the context's store, in their order, with ``jobs``
    local worker processes."""
    return grid.run_grid(cells, context, grid.ExecutorOptions(jobs=jobs), keep_order=True)


def recompute(cells: Sequence[RunSpec], context: RunContext, scratch: str | os.PathLike, jobs: int = 1
              ) -> Comparison:
    """``cells`` computed again into the store at ``scratch`` and compared with the records of the
    context's store."""
    again = dataclasses.replace(context, results=Path(scratch))
    grid.run_grid(cells, again, grid.ExecutorOptions(jobs=jobs), keep_order=True)
    return compare_stores(ResultsStore(context.results), ResultsStore(scratch), cells)


def compute_line(report: grid.GridReport, store: ResultsStore) -> str:
    """What ``claims compute --benchmark reference --cells`` prints at the end."""
    return (f"reference store {store.root}: {len(report.done)} done, {len(report.missing)} missing, "
            f"{len(report.failed)} failed jobs")


def render_line(store: ResultsStore, cells: Sequence[RunSpec]) -> str:
    """What ``reference render`` prints before it executes the notebooks."""
    return (f"reference store {store.root}: {len(store.status(cells).done)} of {len(cells)} cells; rendering "
            f"{', '.join(NOTEBOOKS)} from it (nothing is computed)")


def comparison_lines(result: Comparison, device: str) -> list[str]:
    """What ``reference recompute`` prints: the tolerances, the machine, the largest move and
    every difference beyond its tolerance."""
    import platform

    spread = "not yet measured" if result.spread is None else f"{result.spread:.2f} pt"
    lines = [f"compared {result.compared} records (tolerance {DETERMINISTIC_TOLERANCE} pt for "
             f"{', '.join(sorted(WITHIN_DETERMINISTIC_TOLERANCE))}; STAMP's seed spread {spread} for the others); "
             f"{len(result.unchecked)} unchecked; machine: {platform.machine()} {platform.processor() or ''}".rstrip()
             + f"; device: {device}"]
    if result.largest is not None:
        moved = result.largest
        lines.append(f"largest difference: {abs(moved.recomputed - moved.reference):.4f} pt ({moved.key} "
                     f"{moved.corruption} {moved.metric}: committed {moved.reference:.4f}, recomputed "
                     f"{moved.recomputed:.4f})")
    lines += [f"  differs: {difference}" for difference in result.differences]
    return lines

