"""What the ledger's claims still need in the reference store: the cells to compute and how many
are done. Experiment planning (:mod:`stamplib.experiments.reference`) knows the reference run's
tables; which of its cells a claim compares is the ledger's knowledge, so it is asked here."""

from __future__ import annotations

from collections.abc import Sequence

from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import ledger


def claim_cells(store: ResultsStore, device: str, claim_keys: Sequence[str] = ()) -> list[RunSpec]:
    """What every claim of the ledger (or only those of ``claim_keys``) still needs in the reference
    run over seeds 0–2, the claim cheapest to complete on ``device`` first
    (:func:`stamplib.evidence.ledger.cheapest_first` reads the costs of ``store``'s records)."""
    unknown = sorted(set(claim_keys) - set(ledger.BY_KEY))
    if unknown:
        raise ValueError(f"no claim {unknown} in the ledger; its keys: {', '.join(ledger.BY_KEY)}")
    chosen = [ledger.BY_KEY[k] for k in claim_keys] if claim_keys else None
    return ledger.cheapest_first(ledger.REFERENCE, store, device, ledger=chosen)


def status_line(store: ResultsStore) -> str:
    """The line ``reference status`` prints about the ledger's cells."""
    state = store.status(ledger.ledger_cells(ledger.REFERENCE))
    return (f"the ledger's claims over seeds 0–2 (compute --cells claims): {len(state.done)} done, "
            f"{len(state.missing)} missing, {len(state.running)} running")
