"""What the ledger's claims still need in the reference store: the cells to compute and how many
are done. Experiment planning (:mod:`stamplib.experiments.reference`) knows the reference run's
tables; which of its cells a claim compares is the ledger's knowledge, so it is asked here."""

from __future__ import annotations

from collections.abc import Sequence

from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import ledger

#: ``reference compute --cells``' groups of the ledger's cells: over the quick profile's three
#: corruptions (claims), over all fifteen for every method (claims_all: a GPU's share), or over
#: all fifteen for the claims that read only Source, BN Stats, Tent and EATA (claims_all_cpu: a
#: CPU's share, about 40 CPU-minutes a seed).
CLAIM_GROUPS = ("claims", "claims_all", "claims_all_cpu")


def claim_cells(store: ResultsStore, device: str, claim_keys: Sequence[str] = (), group: str = "claims"
                ) -> list[RunSpec]:
    """What every claim of the ledger (or only those of ``claim_keys``) still needs in the reference
    run over seeds 0–2 in ``group`` (:data:`CLAIM_GROUPS`), the claim cheapest to complete on
    ``device`` first (:func:`stamplib.evidence.ledger.cheapest_first` reads the costs of ``store``'s
    records)."""
    if group not in CLAIM_GROUPS:
        raise ValueError(f"the ledger's cell groups are {', '.join(CLAIM_GROUPS)}, got {group!r}")
    unknown = sorted(set(claim_keys) - set(ledger.BY_KEY))
    if unknown:
        raise ValueError(f"no claim {unknown} in the ledger; its keys: {', '.join(ledger.BY_KEY)}")
    chosen = [ledger.BY_KEY[k] for k in claim_keys] if claim_keys else list(ledger.LEDGER)
    if group == "claims_all_cpu":
        chosen = [c for c in chosen if ledger.reads_only(c, ledger.CPU_REFERENCE_METHODS)]
    benchmark = ledger.REFERENCE if group == "claims" else ledger.REFERENCE_ALL
    return ledger.cheapest_first(benchmark, store, device, ledger=chosen)


def status_line(store: ResultsStore) -> str:
    """The line ``reference status`` prints about the ledger's cells."""
    state = store.status(ledger.ledger_cells(ledger.REFERENCE))
    return (f"the ledger's claims over seeds 0–2 (compute --cells claims): {len(state.done)} done, "
            f"{len(state.missing)} missing, {len(state.running)} running")
