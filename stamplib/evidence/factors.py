"""Why STAMP wins or loses setting (a) on a benchmark, measured: what its traces say it adapted on,
and which counterfactual arm (:mod:`stamplib.evaluation.diagnostics`) restores its lead.

Two kinds of evidence, both read from records:

* **Traces** (:func:`trace_shares`): per batch, STAMP's record says how many of the samples its
  update was computed on were outlier images, how many of its memory's items were, how many of the
  batch's outliers its filter let through, and (for every method) how many known-class samples it
  got right. Pooled over a network's corruptions and batches they give the share of Noise STAMP
  adapts on, its filter's precision and recall as a Noise detector, and its accuracy beside BN
  Stats'.
* **Arms** (:func:`counterfactual`): the claim with STAMP replaced by each of its counterfactuals (an
  oracle filter, no memory, half the step size), judged by the same rule on the same replicates.
  The arm whose lead holds is the measured factor; where none does, what was ruled out is said.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from stamplib.evaluation import diagnostics
from stamplib.evaluation.record import Record, Trace
from stamplib.evidence import benchmarks
from stamplib.evidence.benchmarks import Design, Replicate
from stamplib.evidence.ledger import Arm, Claim, Lead
from stamplib.experiments import plans

STAMP_A = Arm(plans.TABLE1.notebook, "stamp")
BN_STATS_A = Arm(plans.TABLE1.notebook, "bn_stats")
#: A network adapts "on Noise" where at least this share of what STAMP's updates are computed on is
#: Noise images (the stream holds 20 % outliers; a filter that keeps out most of them stays below).
NOISE_SHARE = 0.10


@dataclass(frozen=True)
class Shares:
    """One network's trace, pooled over its corruptions and batches (NaN where not recorded):
    ``adapted`` the share of Noise among the samples STAMP's updates were computed on, ``memory``
    among its memory's items, ``precision``/``recall`` its filter's as a Noise detector (of the
    samples it kept out, the share that were Noise; of the Noise, the share it kept out),
    ``accuracy`` its accuracy on the known classes, ``batches`` how many batches it pools."""

    adapted: float
    memory: float
    precision: float
    recall: float
    accuracy: float
    batches: int
    #: Whether precision, recall and accuracy come from the same cell's record on another CPU kind.
    borrowed: bool = False


def _total(traces: Iterable[Trace], name: str) -> float:
    found = [v for t in traces for v in (getattr(t, name) or ()) if v is not None]
    return float(np.sum(found)) if found else float("nan")


def _ratio(part: float, whole: float) -> float:
    return part / whole if whole else float("nan")


def trace_shares(traces: Sequence[Trace]) -> Shares:
    """:class:`Shares` of one record's traces (one per corruption). The adapted share falls back
    on the memory's where a trace predates the ``adapted_*`` columns (STAMP adapts on its memory)."""
    adapted = _ratio(_total(traces, "adapted_outliers"), _total(traces, "adapted_size"))
    memory = _ratio(_total(traces, "memory_outliers"), _total(traces, "memory_size"))
    passed, passed_noise = _total(traces, "n_passed"), _total(traces, "passed_outliers")
    known, noise = _total(traces, "n_known"), _total(traces, "n_outliers")
    rejected, rejected_noise = known + noise - passed, noise - passed_noise
    return Shares(adapted if not np.isnan(adapted) else memory, memory, _ratio(rejected_noise, rejected),
                  _ratio(rejected_noise, noise), _ratio(_total(traces, "n_correct"), known),
                  max((t.batches for t in traces), default=0) * len(traces))


def record_shares(record: Record | None) -> Shares | None:
    """:func:`trace_shares` of a record's traces (None without a record or a trace)."""
    if record is None or not record.trace:
        return None
    return trace_shares(list(record.trace.values()))


def network_shares(design: Design, records: Mapping[str, Record], arm: Arm = STAMP_A,
                   fallback: Mapping[str, Sequence[Record]] | None = None) -> dict[Replicate, Shares]:
    """Per replicate of ``design``: the :class:`Shares` of ``arm``'s record where it has a trace.
    ``fallback``: records of the same cells computed elsewhere (another CPU kind, by key), whose
    trace gives the filter's precision and recall and the accuracy where the record's own trace
    predates those columns (:func:`borrowed` says which replicates)."""
    out = {}
    for replicate in design.replicates:
        spec = benchmarks.spec(arm, design, replicate)
        found = record_shares(records.get(spec.key()) if spec is not None else None)
        if found is not None and np.isnan(found.recall) and fallback and spec is not None:
            richer = next((s for r in fallback.get(spec.key(), ()) if not np.isnan((s := record_shares(r)).recall)),
                          None) if fallback.get(spec.key()) else None
            if richer is not None:
                found = dataclasses.replace(found, precision=richer.precision, recall=richer.recall,
                                            accuracy=richer.accuracy, borrowed=True)
        if found is not None:
            out[replicate] = found
    return out


def counterfactual(claim: Claim, diagnostic: str) -> Claim:
    """``claim`` with setting (a)'s STAMP replaced by its ``diagnostic`` arm (the others unchanged)."""
    arm = dataclasses.replace(STAMP_A, diagnostic=diagnostic)

    def swap(margin: object) -> object:
        fields = {f.name: getattr(margin, f.name) for f in dataclasses.fields(margin)}  # type: ignore[arg-type]
        for name, value in fields.items():
            if value == STAMP_A:
                fields[name] = arm
            elif isinstance(value, tuple):
                fields[name] = tuple(arm if v == STAMP_A else v for v in value)
        return type(margin)(**fields)

    return dataclasses.replace(claim, key=f"{claim.key}_{diagnostic}", margins=tuple(swap(m) for m in claim.margins),
                               stand_in="", where="a diagnostic, not the paper's")


def reads_stamp_a(claim: Claim) -> bool:
    """Whether ``claim`` is a lead of setting (a)'s STAMP (the rows a counterfactual arm speaks to)."""
    return any(isinstance(m, Lead) and m.arm == STAMP_A for m in claim.margins)


def stamp_diagnostics() -> tuple[str, ...]:
    return tuple(d.name for d in diagnostics.DIAGNOSTICS.values() if d.method == "stamp")


def restores(margins: Mapping[Replicate, float]) -> int:
    """On how many replicates a margin holds (rounds above 0 at one decimal)."""
    return sum(round(v, 1) > 0 for v in margins.values())


def factor_text(arms: Mapping[str, Mapping[Replicate, float]], shares: Mapping[Replicate, Shares],
                plain: Mapping[Replicate, float], unit: str = "networks") -> tuple[str, str]:
    """What drives a STAMP lead in setting (a), from each arm's margin per replicate (``arms``, by
    diagnostic name), STAMP's own (``plain``) and its traces (``shares``): the full sentence and a
    short one (at most 40 characters). Empty where no arm has a margin."""
    found = {name: m for name, m in arms.items() if m}
    noisy = [r for r, s in shares.items() if not np.isnan(s.adapted) and s.adapted >= NOISE_SHARE]
    share = float(np.mean([shares[r].adapted for r in noisy])) if noisy else float("nan")
    if not found:
        if not shares:
            return "", ""
        if noisy:
            return (f"STAMP adapts on {_percent(share)} Noise on {len(noisy)} of {len(shares)} {unit}",
                    f"adapts on {_percent(share)} Noise ({len(noisy)} of {len(shares)} {unit[:3]}.)")
        top = max(s.adapted for s in shares.values())
        return (f"STAMP adapts on at most {_percent(top)} Noise on every one of {len(shares)} {unit}",
                f"adapts on ≤ {_percent(top)} Noise")
    n = len(plain) or max(len(m) for m in found.values())
    best = max(found, key=lambda name: (restores(found[name]), float(np.mean(list(found[name].values())))))
    mean = float(np.mean(list(found[best].values())))
    held, plain_held = restores(found[best]), restores(plain)
    label = diagnostics.DIAGNOSTICS[best].label.split(" (")[0]
    parts = []
    if shares:
        parts.append(f"STAMP adapts on {_percent(share)} Noise on {len(noisy)} of {len(shares)} {unit}" if noisy
                     else f"STAMP adapts on under {_percent(NOISE_SHARE)} Noise on every one of {len(shares)} {unit}")
    if held > plain_held:
        parts.append(f"with {label} it leads by {mean:+.1f} on {held} of {n} {unit} (itself: {plain_held})")
        short = f"{_short_label(best)}: {mean:+.1f}, {held} of {n} {unit[:3]}."
    else:
        itself = float(np.mean(list(plain.values()))) if plain else float("nan")
        closest = max(found, key=lambda name: float(np.mean(list(found[name].values()))))
        others = ", ".join(f"{_short_label(k)} {float(np.mean(list(v.values()))):+.1f}" for k, v in found.items()
                           if k != closest)
        parts.append(f"no arm restores its lead: {diagnostics.DIAGNOSTICS[closest].label.split(' (')[0]} comes "
                     f"closest ({float(np.mean(list(found[closest].values()))):+.1f}, holds on "
                     f"{restores(found[closest])} of {n}) against {itself:+.1f} itself ({plain_held} of {n}); "
                     f"{others}")
        short = f"none restores it; {_short_label(closest)} closest"
    return "; ".join(parts), short[:40]


_SHORT = {"oracle_filter": "oracle filter", "no_memory": "no memory", "half_step": "half step"}


def _percent(share: float) -> str:
    """``31 %``; one decimal under 10 % (``0.3 %``), where a whole number would read as none."""
    return f"{100 * share:.0f} %" if 100 * share >= 10 else f"{100 * share:.1f} %"


def _short_label(name: str) -> str:
    return _SHORT.get(name, name.replace("_", " "))


def share_curve(traces: Sequence[Trace], part: str = "memory_outliers", whole: str = "memory_size") -> np.ndarray:
    """Per batch position of a corruption's stream, ``part / whole`` pooled over the corruptions
    (the same position of every corruption's stream): how the share moves over a stream. NaN
    where no corruption has the columns at that position."""
    length = max((t.batches for t in traces), default=0)
    parts, wholes = np.zeros(length), np.zeros(length)
    for trace in traces:
        p, w = getattr(trace, part), getattr(trace, whole)
        if p is None or w is None:
            continue
        for index, (a, b) in enumerate(zip(p, w)):
            if a is not None and b is not None:
                parts[index] += a
                wholes[index] += b
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(wholes > 0, parts / np.where(wholes > 0, wholes, 1), np.nan)


def network_curves(design: Design, records: Mapping[str, Record], arm: Arm = STAMP_A, part: str = "memory_outliers",
                   whole: str = "memory_size", fallback: Mapping[str, Sequence[Record]] | None = None,
                   ) -> dict[Replicate, np.ndarray]:
    """Per replicate of ``design``: :func:`share_curve` of ``arm``'s record where its trace has the
    columns, else of the same cell's record in ``fallback`` (another CPU kind's, by key)."""
    out = {}
    for replicate in design.replicates:
        spec = benchmarks.spec(arm, design, replicate)
        if spec is None:
            continue
        candidates = [records.get(spec.key()), *((fallback or {}).get(spec.key(), ()))]
        for record in candidates:
            if record is not None and record.trace and any(getattr(t, whole) for t in record.trace.values()):
                out[replicate] = share_curve(list(record.trace.values()), part, whole)
                break
    return out
