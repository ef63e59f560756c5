"""Hyperparameter selection by the paper's protocol: ``python -m stamplib tune``.

STAMP (ECCV 2024, App. A; ``stamp.md`` §7 "Hyper-parameter search") picks every method's
hyperparameters by the H-score on the *first* corruption, gaussian noise, with the Noise outlier
set mixed in, and applies them to every corruption and outlier set. The official code runs the
grids of ``test-time-val.sh`` through ``test-time-validation-os.py``, which in reset mode
evaluates only that first corruption. There is no separate validation split: the selection
stream is the test stream of that corruption.

A :class:`TuneJob` names one such selection: a method, the data set and outlier set, the
selection corruption, profile, seed, hyperparameter set, the grid (ordered name → values)
and the criterion (any registered metric; H by default; a lower-is-better metric such as FPR95
picks its minimum). Its cells are ordinary :class:`~stamplib.evaluation.spec.RunSpec` s that go
through the results store, so a second call computes nothing and a grid can be computed on
SLURM by :func:`~stamplib.experiments.grid.run_grid` like ``python -m stamplib grid``.

:func:`select` reads the cells back and picks the best one (ties: the first in grid order) into
a :class:`TuneResult` whose table has one row per cell; :mod:`stamplib.report.tuning` prints it
and writes it as CSV and Markdown, with a heatmap when the grid has two dimensions. :data:`PRESETS` holds the authors'
grids (STAMP and the paper's baselines from
``test-time-val.sh``; the newer methods' from ``benchmarks/tune_newer_methods.py``).
"""

from __future__ import annotations

import itertools
import math
import re
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from stamplib import methods
from stamplib.evaluation.metrics import METRIC_LABELS, check_metrics, higher_is_better
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.paths import RunContext
from stamplib.validation import coerce

if typing.TYPE_CHECKING:
    from stamplib.experiments.grid import ExecutorOptions

#: The protocol's selection corruption (the first of the 15).
SELECTION_CORRUPTION = "gaussian_noise"
#: What the one-line errors about ``--grid`` show as the syntax.
GRID_SYNTAX = "--grid NAME=V1,V2,... (e.g. --grid lr=0.01,0.05,0.1)"

Grid = tuple[tuple[str, tuple[Any, ...]], ...]


# ------------------------------------------------------------------------------- values


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def check_grid(method: str, hyperparameter_set: str,
               grid: Mapping[str, Iterable[Any]] | Iterable[tuple[str, Iterable[Any]]]) -> Grid:
    """``grid`` with every value typed as ``method``'s config field expects (the one rule of
    :func:`stamplib.validation.coerce`, as ``--set`` has it), in the given order. Unknown names, empty or repeated
    values give a
    one-line ValueError that says what to do."""
    items = list(grid.items()) if isinstance(grid, Mapping) else list(grid)
    if not items:
        raise ValueError(f"the grid is empty: give at least one {GRID_SYNTAX}, or --preset NAME")
    types_ = methods.field_types(method, hyperparameter_set)
    out: list[tuple[str, tuple[Any, ...]]] = []
    for name, values in items:
        if name in dict(out):
            raise ValueError(f"--grid {name} is given twice: list all its values in one {GRID_SYNTAX}")
        if name not in types_:
            valid = ", ".join(sorted(types_)) or "(none: it has no hyperparameters)"
            raise ValueError(f"unknown hyperparameter {name!r} for method {method!r}: use one of {valid} in "
                             f"{GRID_SYNTAX}")
        values = (values,) if isinstance(values, str) else tuple(values)
        if not values:
            raise ValueError(f"--grid {name} has no values: give at least one, {GRID_SYNTAX}")
        typed = tuple(coerce(f"--grid {name}", v, types_[name]) for v in values)
        for i, v in enumerate(typed):
            if any(_same(v, w) for w in typed[:i]):
                raise ValueError(f"--grid {name} lists {v!r} twice ({', '.join(map(str, values))}): give each "
                                 "value once")
        out.append((name, typed))
    return tuple(out)


def parse_grid(items: Sequence[str], method: str, hyperparameter_set: str) -> Grid:
    """The grid of repeated ``--grid NAME=V1,V2,...`` arguments, typed for ``method`` under
    ``hyperparameter_set`` (see :func:`check_grid`)."""
    pairs: list[tuple[str, tuple[str, ...]]] = []
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"expected {GRID_SYNTAX}, got --grid {item!r}")
        values = tuple(v.strip() for v in text.split(",")) if text.strip() else ()
        if any(v == "" for v in values):
            raise ValueError(f"--grid {item!r} has an empty value: separate the values by single commas, "
                             f"{GRID_SYNTAX}")
        pairs.append((name, values))
    return check_grid(method, hyperparameter_set, pairs)


def format_value(value: Any) -> str:
    """A grid value as tables print it: floats in the shortest form (``1e-04``, ``0.25``)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


# ------------------------------------------------------------------------------- presets


@dataclass(frozen=True)
class Preset:
    """A named grid of one method, per hyperparameter set (the grids differ by data set)."""

    name: str
    method: str
    grids: Mapping[str, Mapping[str, tuple[Any, ...]]]  # hyperparameter set → ordered name → values
    source: str

    def grid(self, hyperparameter_set: str) -> dict[str, tuple[Any, ...]]:
        if hyperparameter_set not in self.grids:
            raise ValueError(f"preset {self.name!r} has no grid for hyperparameter set {hyperparameter_set!r} (it "
                             f"has {', '.join(self.grids)}); give the grid with {GRID_SYNTAX}")
        return dict(self.grids[hyperparameter_set])


def _every_hyperparameter_set(grid: Mapping[str, tuple[Any, ...]],
                              hyperparameter_sets: Iterable[str] = methods.HYPERPARAMETER_SETS
                              ) -> dict[str, dict[str, tuple[Any, ...]]]:
    return {s: dict(grid) for s in hyperparameter_sets}


_CIFAR10 = ("cifar10_c", "cifar10_c_8_2")
_CIFAR100 = ("cifar100_c", "cifar100_c_80_20")
_CIFAR = _CIFAR10 + _CIFAR100


def _by_family(cifar10: Mapping[str, tuple[Any, ...]], cifar100: Mapping[str, tuple[Any, ...]],
               imagenet: Mapping[str, tuple[Any, ...]]) -> dict[str, dict[str, tuple[Any, ...]]]:
    """The baselines' grids of ``test-time-val.sh`` choose by ``grep cifar100``, ``cifar10``,
    ``imagenet`` on the data set's name: the class-split hyperparameter sets follow their family."""
    return {**_every_hyperparameter_set(cifar10, _CIFAR10), **_every_hyperparameter_set(cifar100, _CIFAR100),
            "imagenet_c": dict(imagenet)}


_AUTHORS = "yuyongcan/STAMP test-time-val.sh (stamp.md §7 'Hyper-parameter search', baselines.md §10)"

#: STAMP's LR × α grids of ``test-time-val.sh`` (yuyongcan/STAMP at dbdb2a9), per hyperparameter set. The
#: script chose the branch by ``grep`` on the data set's name: ``cifar100_c`` (cifar100_c*),
#: ``cifar10_c`` (cifar10_c, cifar10_c_svhn, ...), ``cifar10c`` (cifar10c_8_2), ``imagenet``,
#: ``cifar100c`` (cifar100c_80_20).
#:
#: The typo: at 1e60cb3 (line 166) the STAMP command ended in ``--STAMP_ALPHA "$alpha" "$lamb"``,
#: a third argument from a variable that is never set. Passed as an empty positional argument,
#: the script's ``argparse`` (``src/utils/utils.py get_args``) refuses it, so the STAMP grid as
#: written could not run; it also reads as if the grid had a third dimension, λ. The author
#: confirmed it is a typo ("It's a typo error, you can delete it directly", yuyongcan/STAMP
#: issue #5, 2025-06-08) and removed it in dbdb2a9. The intended grid is LR × α only: no λ.
#: (At dbdb2a9 the STAMP branch still closes its two loops with three ``done`` s, so ``bash -n``
#: rejects the file; the values are unaffected.)
STAMP_GRIDS: dict[str, dict[str, tuple[float, ...]]] = {
    "cifar10_c": {
        "lr": (5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1),
        "alpha": (0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6),
    },
    "cifar100_c": {
        "lr": (1e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.5),
        "alpha": (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    },
    "cifar10_c_8_2": {
        "lr": (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 1.0),
        "alpha": (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85),
    },
    "imagenet_c": {
        "lr": (1e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1),
        "alpha": (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8),
    },
    "cifar100_c_80_20": {
        "lr": (1e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1),
        "alpha": (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    },
}

#: UniEnt's α grid (gaozhengqing/UniEnt ``run.sh``), for α₁ (marginal) and α₂ (OOD entropy).
UNIENT_ALPHAS = (1.0, 0.5, 0.2, 0.1)
#: Tent's LR grid in ``test-time-val.sh``, which Tent+COME's Adam learning rate is tuned over.
TENT_LRS = (1e-4, 2.5e-4, 1e-3, 5e-3)

PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("stamp", "stamp", STAMP_GRIDS, _AUTHORS + "; the stray \"$lamb\" of 1e60cb3 left out (yuyongcan/STAMP issue "
                                                     "#5: a typo, the author said)"),
    Preset("tent", "tent", _every_hyperparameter_set({"lr": TENT_LRS}), _AUTHORS),
    Preset("cotta", "cotta", _by_family(
        {"lr": (1e-4, 1e-3, 5e-3), "restore_prob": (0.005, 0.01, 0.02), "aug_threshold": (0.8, 0.92, 0.95)},
        {"lr": (1e-4, 1e-3, 5e-3), "restore_prob": (0.005, 0.01, 0.02), "aug_threshold": (0.5, 0.72, 0.9)},
        {"lr": (1e-4, 1e-3, 5e-3), "restore_prob": (5e-4, 1e-3, 2e-3), "aug_threshold": (0.05, 0.1, 0.2)},
    ), _AUTHORS),
    Preset("eata", "eata", _by_family(
        {"lr": (1e-3, 5e-3, 0.01), "d_margin": (0.2, 0.4, 0.6), "fisher_alpha": (1.0, 50.0, 400.0, 2000.0)},
        {"lr": (1e-3, 5e-3, 0.01), "d_margin": (0.1, 0.2, 0.4), "fisher_alpha": (1.0, 50.0, 400.0, 2000.0)},
        {"lr": (1e-4, 2.5e-4, 5e-4), "d_margin": (0.025, 0.05, 0.1), "fisher_alpha": (1.0, 50.0, 400.0, 2000.0)},
    ), _AUTHORS),
    Preset("sar", "sar", _by_family(
        {"lr": (1e-3, 5e-3, 0.01), "reset_constant": (0.1, 0.2, 0.3)},
        {"lr": (1e-3, 5e-3, 0.01), "reset_constant": (0.1, 0.2, 0.3)},
        {"lr": (1e-4, 2.5e-4, 5e-4), "reset_constant": (0.1, 0.2, 0.3)},
    ), _AUTHORS),
    Preset("rotta", "rotta", _every_hyperparameter_set({"lr": (1e-4, 1e-3, 5e-3)}), _AUTHORS),
    # The authors' OWTTT never read --OWTTT_DA_SCALE (baselines.md §10: λ = 1 everywhere); here
    # da_scale sets λ, so this grid varies what their runs did not.
    Preset("owttt", "owttt", _by_family(
        {"lr": (1e-4, 1e-3, 5e-3), "da_scale": (0.2, 1.0, 5.0)},
        {"lr": (1e-5, 1e-4, 5e-4), "da_scale": (0.2, 1.0, 5.0)},
        {"lr": (1e-5, 2.5e-5, 1e-4), "da_scale": (0.1, 0.4, 1.0)},
    ), _AUTHORS),
    Preset("sotta", "sotta", _by_family(
        {"lr": (1e-4, 1e-3, 5e-3), "threshold": (0.9, 0.99, 0.995)},
        {"lr": (1e-4, 1e-3, 5e-3), "threshold": (0.5, 0.66, 0.8)},
        {"lr": (1e-4, 1e-3, 5e-3), "threshold": (0.2, 0.33, 0.5)},
    ), _AUTHORS),
    # The newer methods (benchmarks/tune_newer_methods.py): the optimiser is the hyperparameter
    # set's (Adam in the CIFAR ones, SGD in imagenet_c), so each hyperparameter set is its own selection.
    Preset("unient", "unient", _every_hyperparameter_set({"alpha_marginal": UNIENT_ALPHAS, "alpha_ood": UNIENT_ALPHAS}),
           "gaozhengqing/UniEnt run.sh α grid, for α₁ × α₂"),
    Preset("unient_plus", "unient_plus",
           _every_hyperparameter_set({"alpha_marginal": UNIENT_ALPHAS, "alpha_ood": UNIENT_ALPHAS}),
           "gaozhengqing/UniEnt run.sh α grid, for α₁ × α₂"),
    Preset("ostta", "ostta", _every_hyperparameter_set({"alpha_marginal": UNIENT_ALPHAS}),
           "gaozhengqing/UniEnt run.sh α grid"),
    # Tent's grid, CIFAR hyperparameter sets only: the ImageNet-C value is the COME authors' (SGD, 2.5e-4).
    Preset("tent_come", "tent_come", _every_hyperparameter_set({"lr": TENT_LRS}, _CIFAR),
           "Tent's LR grid of yuyongcan/STAMP test-time-val.sh (CIFAR hyperparameter sets)"),
]}


def preset_grid(name: str, method: str, hyperparameter_set: str) -> dict[str, tuple[Any, ...]]:
    """The grid of preset ``name`` for ``method`` under ``hyperparameter_set``."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}, or give {GRID_SYNTAX}")
    preset = PRESETS[name]
    if preset.method != method:
        raise ValueError(f"preset {name!r} is a grid of method {preset.method!r}, not {method!r}")
    return preset.grid(hyperparameter_set)


def preset_lines() -> list[str]:
    """``tune --list-presets``: each preset's name, method, hyperparameter sets and source."""
    return [f"{name:12s} method {p.method:12s} hyperparameter sets {', '.join(p.grids)}  ({p.source})" for name,
            p in PRESETS.items()]


def default_preset(method: str) -> str | None:
    """The preset named after ``method``, if there is one."""
    return method if method in PRESETS and PRESETS[method].method == method else None


# ------------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class TuneJob:
    """One selection by the paper's protocol.

    ``grid`` is an ordered mapping name → values (given as a dict or as pairs; kept as a tuple
    of pairs, so the job is hashable); its values are typed as the method's config fields
    expect. ``hyperparameter_set`` "" means the data set's own; the cells' RunSpecs carry it as
    given (an explicit hyperparameter set is part of a record's key)."""

    method: str
    dataset: str = "digits"
    outlier_set: str = "noise"
    corruption: str = SELECTION_CORRUPTION
    profile: str = "quick"
    seed: int = 0
    hyperparameter_set: str = ""
    grid: Grid = field(default_factory=tuple)
    criterion: str = "h"

    def __post_init__(self) -> None:
        methods.method_class(self.method)
        check_metrics([self.criterion])
        probe = self._spec({})  # names, profile, seed, hyperparameter set: RunSpec's checks (reads no file)
        object.__setattr__(self, "grid", check_grid(self.method, probe.resolved_hyperparameter_set(), self.grid))
        for overrides in self.cells():
            self._spec(overrides)  # every value within its config's bounds

    def _spec(self, overrides: Mapping[str, Any]) -> RunSpec:
        # A value out of its config's bounds (e.g. lr > 0) is a ValueError from resolve_config.
        return RunSpec.make(self.method, overrides=dict(overrides), dataset=self.dataset, outlier_set=self.outlier_set,
                            corruptions=(self.corruption,), profile=self.profile, seed=self.seed,
                            hyperparameter_set=self.hyperparameter_set)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.grid)

    def resolved_hyperparameter_set(self) -> str:
        """``hyperparameter_set``, or the data set's own."""
        return self._spec({}).resolved_hyperparameter_set()

    def cells(self) -> list[dict[str, Any]]:
        """The overrides of every cell, in grid order (the first name varies slowest)."""
        return [dict(zip(self.names, combo)) for combo in itertools.product(*(v for _, v in self.grid))]

    def specs(self) -> list[RunSpec]:
        return [self._spec(overrides) for overrides in self.cells()]

    def current(self) -> dict[str, Any]:
        """The values the method's config uses today for the grid's hyperparameters (the paper's
        where the config follows the paper)."""
        config = methods.resolve_config(self.method, self.resolved_hyperparameter_set())
        return {name: getattr(config, name) for name in self.names}

    def file_stem(self) -> str:
        """``tune__<method>__<dataset>__<outlier set>__<hyperparameter set>__<profile>`` (the
        hyperparameter set's name, e.g. ``cifar10_c``), and the corruption, seed and criterion
        where they are not the protocol's defaults."""
        parts = ["tune", self.method, self.dataset, self.outlier_set, self.resolved_hyperparameter_set(), self.profile]
        if self.corruption != SELECTION_CORRUPTION:
            parts.append(self.corruption)
        if self.seed:
            parts.append(f"seed{self.seed}")
        if self.criterion != "h":
            parts.append(self.criterion)
        # an outside method (package.module:Class) or a file data set (npz:/path) as a file name
        return "__".join(re.sub(r"[^A-Za-z0-9_-]+", "_", part).strip("_") for part in parts)


def make_job(method: str, *, grid_items: Sequence[str] = (), preset: str | None = None,
             **fields: Any) -> TuneJob:
    """A :class:`TuneJob` from the command line's pieces: the preset's grid (``preset``; with
    neither a preset nor ``--grid`` items, the method's own preset if it has one), each
    ``--grid NAME=V1,...`` item replacing that dimension or adding one after it."""
    probe = RunSpec.make(method, dataset=fields.get("dataset", "digits"),
                         outlier_set=fields.get("outlier_set", "noise"),
                         corruptions=(fields.get("corruption", SELECTION_CORRUPTION),),
                         profile=fields.get("profile", "quick"), seed=fields.get("seed", 0),
                         hyperparameter_set=fields.get("hyperparameter_set", ""))
    hyperparameter_set = probe.resolved_hyperparameter_set()
    if preset is None and not grid_items:
        preset = default_preset(method)
        if preset is None:
            raise ValueError(f"method {method!r} has no preset grid: give {GRID_SYNTAX} (presets exist for "
                             f"{', '.join(PRESETS)})")
    grid: dict[str, tuple[Any, ...]] = dict(preset_grid(preset, method, hyperparameter_set)) if preset else {}
    if grid_items:
        grid.update(dict(parse_grid(grid_items, method, hyperparameter_set)))
    return TuneJob(method, grid=tuple(grid.items()), **fields)


# ------------------------------------------------------------------------------- compute


def status_line(job: TuneJob, store: ResultsStore) -> str:
    """The grid's size, its dimensions and how many of its cells are still to compute."""
    cells = job.specs()
    missing = store.status(cells).missing
    return (f"{len(cells)} cells ({' x '.join(f'{n} {len(v)}' for n, v in job.grid)}), {len(missing)} to compute; "
            f"results in {store.root}")


def compute(job: TuneJob, context: RunContext, options: ExecutorOptions | None = None,
            progress: bool = False) -> list[RunSpec]:
    """Compute the job's missing cells where ``context`` says; returns those still missing
    afterwards (none, unless a grid job failed). ``options`` None: one after another in this
    process with :func:`~stamplib.evaluation.runner.run`; else
    :func:`~stamplib.experiments.grid.run_grid` with its executor (waiting for the jobs), as
    ``python -m stamplib grid`` computes notebooks' cells."""
    specs = job.specs()
    if options is None:
        from tqdm.auto import tqdm

        from stamplib.evaluation.runner import run

        for spec in tqdm(specs, desc="cells", unit="cell", disable=not progress):
            run(spec, context)
        return []
    from stamplib.experiments.grid import run_grid

    return run_grid(specs, context, options, wait=True, progress=progress, keep_order=True).missing


# ------------------------------------------------------------------------------- selection


@dataclass
class TuneResult:
    """The grid's table (one row per cell, grid order), the chosen row and the config's values."""

    job: TuneJob
    table: pd.DataFrame  # hyperparameters, metrics (keys of METRICS), collapsed, chosen, current, key
    best: int  # row of the chosen cell
    chosen: dict[str, Any]
    current: dict[str, Any]  # what the method's config uses today for the grid's names
    missing: list[RunSpec] = field(default_factory=list)

    @property
    def value(self) -> float:
        """The chosen cell's criterion."""
        return float(self.table.loc[self.best, self.job.criterion])

    @property
    def current_row(self) -> int | None:
        """The row whose values are the config's today, if the grid has it."""
        rows = [i for i, flag in enumerate(self.table["current"]) if flag]
        return rows[0] if rows else None


def best_index(values: Sequence[float], higher_better: bool) -> int:
    """Position of the best finite value; ties go to the first (grid order). ValueError if
    no value is finite."""
    finite = [(v if higher_better else -v, -i) for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if not finite:
        raise ValueError("no cell of the grid has a finite value of the criterion")
    return -max(finite)[1]


def select(job: TuneJob, store: ResultsStore) -> TuneResult:
    """The job's table from the stored records and the best cell by its criterion (a missing
    cell is a row of NaNs and cannot be chosen)."""
    current = job.current()
    rows, missing = [], []
    for overrides, spec in zip(job.cells(), job.specs()):
        record = store.get(spec)
        if record is None:
            missing.append(spec)
        row: dict[str, Any] = dict(overrides)
        row.update({m: float(record.mean.scores.get(m, math.nan)) if record is not None else math.nan
                    for m in METRIC_LABELS})
        row["collapsed"] = bool(record is not None and record.mean.collapsed)
        row["current"] = all(_same(overrides[n], current[n]) for n in job.names)
        row["key"] = spec.key()
        rows.append(row)
    table = pd.DataFrame(rows)
    table = table[[*job.names, *(m for m in METRIC_LABELS if table[m].notna().any() or m == job.criterion),
                   "collapsed", "current", "key"]]
    best = best_index(list(table[job.criterion]), higher_is_better(job.criterion))
    table.insert(table.columns.get_loc("collapsed"), "chosen", [i == best for i in range(len(table))])
    return TuneResult(job, table, best, dict(job.cells()[best]), current, missing)


def tune(job: TuneJob, context: RunContext, options: ExecutorOptions | None = None,
         progress: bool = False) -> TuneResult:
    """:func:`compute` then :func:`select`."""
    compute(job, context, options, progress)
    return select(job, ResultsStore(context.results))
