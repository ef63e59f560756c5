"""A notebook's cells → their records: read from the results store, the missing ones run here.

:func:`compute` is what a notebook calls after planning; ``python -m stamplib grid`` hands the
same RunSpecs to :mod:`stamplib.experiments.grid` instead, which runs them in worker processes or
SLURM jobs. Cells a grid job is computing right now are left to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tqdm.auto import tqdm

from stamplib import methods
from stamplib.evaluation.metrics import check_metrics
from stamplib.evaluation.record import Record
from stamplib.evaluation.runner import run
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.paths import RunContext

Records = dict[str, Record]  # spec key → record


class Planned(Protocol):
    """What the executor needs of a plan (:class:`stamplib.experiments.plans.Plan`, which imports
    this module)."""

    @property
    def notebook(self) -> str: ...

    @property
    def specs(self) -> list[RunSpec]: ...


def compute(
    the_plan: Planned,
    context: RunContext,
    *,
    compute_missing: bool = True,
    progress: bool = True,
    metrics: Sequence[str] = (),
    traces: bool = False,
) -> Records:
    """Records of the plan's specs by spec key: read from the context's results store, and the
    missing ones computed here (``compute_missing``) or left out (then the tables show what
    exists). ``context`` (a notebook builds it from its parameters cell) gives the data root,
    the results store and the device.
    A stored record that lacks one of ``metrics`` (a metric newer than the record) is re-scored
    from its per-sample outputs where it has them (no method runs). With ``traces``, a stored
    record of a method that reports traces but made before traces existed is computed again."""
    wanted = check_metrics(metrics) if metrics else ()
    store = ResultsStore(context.results)
    records = _stored_or_run(the_plan, context, compute_missing, store, progress)
    if traces and compute_missing:
        records.update(_with_traces(the_plan.specs, records, context))
    records.update(_rescored(records, wanted, store))
    return records


def _stored_or_run(the_plan: Planned, context: RunContext, compute_missing: bool, store: ResultsStore,
                   progress: bool) -> Records:
    state = store.status(the_plan.specs)
    records: Records = {s.key(): r for s in state.done if (r := store.get(s)) is not None}
    missing = [s for s in the_plan.specs if s.key() not in records and s not in state.running]
    if state.running:
        print(f"{len(state.running)} cells are being computed by grid jobs right now: they are left to "
              "them (re-run this cell later to see them)")
    if missing and not compute_missing:
        print(f"{len(missing)} of {len(the_plan.specs)} cells are not in the results store and "
              "compute_missing is off: the tables show the others")
        return records
    for spec in tqdm(missing, desc=f"{the_plan.notebook}: cells", disable=not progress or not missing):
        records[spec.key()] = run(spec, context)
    return records


def _with_traces(specs: Sequence[RunSpec], records: Records, context: RunContext) -> Records:
    """Records made before their method reported traces, computed again."""
    untraced = [s for s in specs if (r := records.get(s.key())) is not None and not r.trace
                and methods.method_class(s.method).reports_trace]
    return {s.key(): run(s, context, force=True) for s in untraced}


def _rescored(records: Records, wanted: Sequence[str], store: ResultsStore) -> Records:
    """Records that lack one of the ``wanted`` metrics, scored again from their stored outputs."""
    stale = [r for r in records.values()
             if any(name not in row.scores for row in r.per_corruption.values() for name in wanted)]
    return {r.key: r for r in store.rescored(stale, wanted)}
