"""The closing section of the overview (notebook 00): what its comparison shows — why STAMP's
worst corruption is the lowest bar, how large the seed noise is (the notebook's last cell then
points to the four lessons). Every number comes from the records (the walkthrough's, the committed quick run's, the
committed reference run's)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from stamplib.evaluation.record import Record
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import plans, reference
from stamplib.report.paper import method_label
from stamplib.teaching import breaking
from stamplib.teaching.records import SeedSpread, default_stores, seed_spread


def reference_stamp_spread() -> SeedSpread:
    """STAMP's H in setting (a) of the ResNet-18 reference run on real images, over the seeds
    committed in ``results/reference``."""
    spec = reference.experiment_cells(plans.TABLE1, methods="stamp")[0]
    return seed_spread(spec, [("`results/reference`", ResultsStore(reference.reference_dir()))])


def closing(plan: plans.Plan, records: Mapping[str, Record], results: str | Path) -> str:
    """The overview's closing paragraphs, as Markdown: why STAMP's worst corruption is the
    lowest bar, and how large the seed noise is."""
    by_method = {c.spec.method: records.get(c.spec.key()) for c in plan.cells}
    stamp, bn = by_method.get("stamp"), by_method.get("bn_stats")
    lines = []
    if stamp is not None and bn is not None and stamp.trace:
        worst = min(stamp.per_corruption, key=lambda c: stamp.per_corruption[c].h)
        names = breaking.class_names(stamp.spec.dataset)
        others = [c for c in stamp.corruptions if c != worst]
        lowest = min(row.h for r in by_method.values() if r for row in r.per_corruption.values())
        heading = (f"Why STAMP's {worst.replace('_', ' ')} bar is the lowest."
                   if stamp.per_corruption[worst].h <= lowest else f"STAMP on {worst.replace('_', ' ')}.")
        lines += [f"**{heading}** "
                  + breaking.collapse_text({"STAMP": stamp, "BN Stats": bn}, worst, names)
                  + (f" On {' and '.join(o.replace('_', ' ') for o in others)} STAMP's H is "
                     + " and ".join(f"{stamp.per_corruption[o].h:.1f}" for o in others)
                     + " against BN Stats' " + " and ".join(f"{bn.per_corruption[o].h:.1f}" for o in others)
                     + "." if others else "")
                  + (" A class-balanced memory can only balance the classes that pass its filters; entropy "
                     "minimisation on a memory mostly of one class can pull the network towards that class."
                     if _top_share(stamp.trace[worst].memory_counts[-1]) > 0.5 else "")
                  + " Lesson 17 takes this apart (and runs STAMP without self-weights on the same stream).", ""]
    stores = default_stores(results)
    spreads = {c.spec.method: seed_spread(c.spec, stores) for c in plan.cells}
    several = {m: s for m, s in spreads.items() if s.several}
    lines.append("**How large the seed noise is.** A seed fixes the stream's order, the corruption draws and the "
                 "methods' random choices. ")
    if several:
        lines[-1] += "H over the seeds whose records exist: " + "; ".join(
            f"{method_label(m)} {s.text()}" for m, s in spreads.items()) + "."
    else:
        lines[-1] += ("This table has one seed per method (no other seed's record is in the results store or the "
                      "committed quick run), so a difference of a few points here may be noise.")
    ref = reference_stamp_spread()
    if ref.several:
        lines[-1] += (f" On real images, the ResNet-18 reference run gives STAMP an H of "
                      f"{' / '.join(f'{ref.values[s]:.1f}' for s in ref.seeds)} over seeds "
                      f"{', '.join(map(str, ref.seeds))} in the same setting: a spread of "
                      f"{ref.high - ref.low:.1f} points from the seed alone.")
    return "\n".join(lines)


def _top_share(counts: list[int]) -> float:
    """The largest class's share of a memory's content (0 for an empty memory)."""
    return max(counts) / sum(counts) if sum(counts) else 0.0
