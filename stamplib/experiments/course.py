"""The short course on outlier-aware test-time adaptation (notebooks 14–17): what
each of its four notebooks computes.

Wherever a paper notebook computes the cell a lesson needs, the lesson plans that very cell, so
the results store shares it (a RunSpec's key is the hash of its fields) and under
``./run_all.sh`` the lesson only renders: Source, BN Stats and Tent are notebook 02's cells,
the filtering methods notebook 10's i.i.d. cells, the closed set notebook 05's, STAMP's
components Table 5's rows (06), the harder streams notebook 13's. The one stream no paper
notebook has is the long one of lesson 14 (all fifteen corruptions in turn, no reset), where
entropy minimisation shows whether it drifts.

The course's parameters are the profile and the data root; every lesson runs on the profile's
built-in benchmark (the CIFAR-10 photographs in the quick profile, the digits in smoke).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from stamplib.data.corruptions import CORRUPTIONS
from stamplib.experiments import plans
from stamplib.experiments.parameters import NotebookParameters

#: The stream of lesson 14: every corruption in turn, adapted without a reset (``continual``).
LONG_STREAM, LONG_STREAM_CLOSED = "long stream", "long stream, no outliers"
#: Lesson 16's path from Tent to STAMP: Table 5's rows in the order they add a component.
PATH_ROWS = tuple(plans.ABLATION_ROWS[i] for i in (0, 2, 3, 5, 6))
#: Table 5's rows that lie off that path, and Fig. 4's single view (notebook 09): shown where
#: notebooks 06 and 09 have computed them, never computed by the lesson itself.
OFF_PATH_ROWS = tuple(row for row in plans.ABLATION_ROWS if row not in PATH_ROWS)
SINGLE_VIEW = "K=1"
#: Lesson 17's harder streams: the few methods it compares, on notebook 13's axes.
STRESS_METHODS = ("source", "bn_stats", "tent", "stamp")
STRESS_AXES = {"batch_sizes": "16,64", "batch_corruptions": "gaussian_noise", "label_shifts": "sorted",
               "domains": "separate,mixed"}
#: Lesson 17's contrast run without self-weights (Table 5's second-to-last row).
WITHOUT_SELF_WEIGHTS = plans.ablation_label(True, True, True, False)


def filtering_methods() -> tuple[str, ...]:
    """The methods that filter samples or keep a memory and report per-batch traces (notebook 10's
    rows but Tent), as each says by its ``reports_trace``."""
    return tuple(m for m in plans.traced_methods() if m != "tent")


def long_stream(cells: Sequence[plans.PlannedCell], closed_set: bool = False) -> list[plans.PlannedCell]:
    """``cells`` on the long stream: all fifteen corruptions in turn without a reset, with the
    cells' outliers or (``closed_set``) none."""
    out = []
    for cell in cells:
        spec = cell.spec.with_(corruptions=list(CORRUPTIONS)).with_stream(schedule="continual")
        if closed_set:
            spec = spec.with_(outlier_set="none", outlier_ratio=0.0)
        out.append(dataclasses.replace(cell, spec=spec, variant=LONG_STREAM_CLOSED if closed_set else LONG_STREAM))
    return out


def closed_set(cells: Sequence[plans.PlannedCell]) -> list[plans.PlannedCell]:
    """``cells`` without outliers: notebook 05's cells of the same methods."""
    return [dataclasses.replace(cell, spec=cell.spec.with_(outlier_set="none", outlier_ratio=0.0), variant="closed set")
            for cell in cells]


def plan_adapting(experiment: plans.Experiment, params: NotebookParameters) -> plans.Plan:
    """Lesson 14: Source, BN Stats and Tent on the paper's stream (notebook 02's cells), and BN
    Stats and Tent on the long stream, with and without outliers."""
    base = plans.plan_rows(experiment, params, ("source", "bn_stats", "tent")).cells
    adapting = [c for c in base if c.spec.method != "source"]
    cells = [*base, *long_stream(adapting), *long_stream(adapting, closed_set=True)]
    return plans.Plan(experiment, params.scale, tuple(cells))


def plan_outliers(experiment: plans.Experiment, params: NotebookParameters) -> plans.Plan:
    """Lesson 15: Source, BN Stats, Tent and the filtering methods on the paper's stream
    (notebooks 02 and 10), BN Stats and Tent without outliers (notebook 05), and lesson 14's long
    streams."""
    base = plans.plan_rows(experiment, params, ("source", "bn_stats", "tent", *filtering_methods())).cells
    entropy_minimisation = [c for c in base if c.spec.method in ("bn_stats", "tent")]
    cells = [*base, *closed_set(entropy_minimisation), *long_stream(entropy_minimisation),
             *long_stream(entropy_minimisation, closed_set=True)]
    return plans.Plan(experiment, params.scale, tuple(cells))


def plan_piece_by_piece(experiment: plans.Experiment, params: NotebookParameters) -> plans.Plan:
    """Lesson 16: Tent (notebook 02's cell), then STAMP along :data:`PATH_ROWS`, Table 5's rows
    that add one component at a time (notebook 06's cells); the last is STAMP itself."""
    tent = plans.plan_rows(experiment, params, ("tent",)).cells
    path = plans.plan_rows(experiment, params, plans.STAMP_ONLY, plans.ablation_variants(PATH_ROWS)).cells
    return plans.Plan(experiment, params.scale, (*tent, *path))


def off_path(experiment: plans.Experiment, params: NotebookParameters) -> plans.Plan:
    """The rest of Table 5 (:data:`OFF_PATH_ROWS`) and STAMP with one view: cells of notebooks 06
    and 09 that lesson 16 shows where they are stored (it reads them, never computes them)."""
    variants = [*plans.ablation_variants(OFF_PATH_ROWS), (SINGLE_VIEW, {"num_views": 1}, None)]
    return plans.plan_rows(experiment, params, plans.STAMP_ONLY, variants)


def plan_when_it_breaks(experiment: plans.Experiment, params: NotebookParameters) -> plans.Plan:
    """Lesson 17: STAMP (with its traces) and STAMP without self-weights on the paper's stream
    (notebooks 02 and 06), and :data:`STRESS_METHODS` on notebook 13's harder streams
    (:data:`STRESS_AXES`: batch size, a class-sorted order, mixed domains)."""
    stamp = plans.plan_rows(experiment, params, plans.STAMP_ONLY,
                            [("", {}, None), *plans.ablation_variants([plans.ABLATION_ROWS[5]])]).cells
    if not params.seeds:  # Experiment.plan fills them: with none, notebook 13's axes would plan no cell
        raise ValueError("plan lesson 17 through its Experiment.plan (registry.plan), which fills the default seeds")
    stress = plans.plan_stress_streams(experiment, dataclasses.replace(params, methods=STRESS_METHODS), **STRESS_AXES)
    return plans.Plan(experiment, params.scale, (*stamp, *stress.cells), stress.notes)


def harder_streams(plan: plans.Plan) -> plans.Plan:
    """Lesson 17's plan cut to notebook 13's cells (variants ``axis=value`` on its stress axes),
    for :func:`stamplib.report.stress.stress_table`: the cells the lesson planned, with the seeds
    its ``Experiment.plan`` filled in, never planned a second time from the raw parameters."""
    cells = tuple(c for c in plan.cells if c.variant.partition("=")[0] in plans.PAPER_STREAM)
    return dataclasses.replace(plan, cells=cells, band_cells=())


_READS = ("profile", "data_root")
ADAPTING = plans.register(plans.Experiment("14_course_adapting_at_test_time", plan_adapting, plans.NOISE_SETUPS,
                                           reads=_READS))
OUTLIERS = plans.register(plans.Experiment("15_course_outliers_in_the_stream", plan_outliers, plans.NOISE_SETUPS,
                                           reads=_READS))
# Table 5's setups (notebook 06's): the same cells on the built-in benchmark, and the paper's
# Table 5 cell (CIFAR100-C with SVHN-C outliers) beside each row.
PIECE_BY_PIECE = plans.register(plans.Experiment("16_course_stamp_piece_by_piece", plan_piece_by_piece,
                                                 plans.SVHN_SETUPS, ("5",), reads=_READS))
WHEN_IT_BREAKS = plans.register(plans.Experiment("17_course_when_it_breaks", plan_when_it_breaks,
                                                 plans.NOISE_SETUPS, reads=_READS))
#: The course in order, after the overview (notebook 00).
LESSONS = (ADAPTING, OUTLIERS, PIECE_BY_PIECE, WHEN_IT_BREAKS)
