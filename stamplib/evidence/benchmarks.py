"""Where the ledger's claims are judged: a :class:`Benchmark` (its committed store, its page, its
title) and the :class:`Design`\\ s that decide its claims, best evidence first.

A design is a set of cells: a profile at a scale over :class:`Replicate`\\ s × corruptions. A
replicate draws every source of variation anew — the source network *and* the stream seed —
because one network's answer to an outlier set is itself a draw (a ReLU network's confidence far
from its data is arbitrary; two ResNet-18s of one recipe reject Noise at AUROC 52 and 86): on the
built-in benchmark replicate k is network k met by stream seed k. A design that holds network 0
and varies the seed alone stays as a second view, "one network, five streams", so a reader sees
how far one network can mislead. The corruptions are the paper's fifteen, fixed; a design over
three of them takes them as a sample of the fifteen (:mod:`stamplib.evidence.statistics`).

A claim is judged on the first design of its benchmark that can test it and has its cells under
:data:`ENOUGH_REPLICATES` replicates, else on the last one that can test it
(:func:`stamplib.evidence.judge.judge_benchmark`). This module says only which cells that takes
(:func:`spec`, :func:`cells`, :func:`cheapest_first`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation.profiles import get_profile
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence.ledger import DIAGNOSTIC_CLAIMS, LEDGER, SCALES, Arm, Claim
from stamplib.experiments import plans, registry
from stamplib.experiments.registry import EXPERIMENTS


@dataclass(frozen=True, order=True)
class Replicate:
    """One draw of every source of variation a design varies: the source network (the training
    seed of the data set's checkpoint, :attr:`stamplib.evaluation.RunSpec.network`) and the
    stream seed."""

    network: int
    seed: int

    def text(self) -> str:
        return f"network {self.network} × seed {self.seed}"


def over_seeds(seeds: Sequence[int], network: int = 0) -> tuple[Replicate, ...]:
    """One network met by each of ``seeds``."""
    return tuple(Replicate(network, s) for s in seeds)


def over_networks(networks: Sequence[int]) -> tuple[Replicate, ...]:
    """Network k met by stream seed k, for each k of ``networks``: network 0 with seed 0 is the
    cell that one-network designs already have."""
    return tuple(Replicate(k, k) for k in networks)


@dataclass(frozen=True)
class Design:
    """The cells that decide claims: ``profile`` at ``scale`` over ``replicates`` and
    ``corruptions``; ``paper_stream`` where each corruption's stream is the paper's length (10,000
    known-class images + 2,500 outliers, about 196 batches), which the claims on the step-size
    decay need; ``experiments``: the notebooks whose cells it has (empty: all of them), so that a
    design computed for some tables only tests the claims that read those."""

    name: str
    title: str
    profile: str
    scale: str
    replicates: tuple[Replicate, ...]
    corruptions: tuple[str, ...]
    paper_stream: bool = False
    experiments: tuple[str, ...] = ()
    #: Whether it also computes and judges STAMP's counterfactual arms (:data:`ledger.DIAGNOSTIC_CLAIMS`).
    diagnostics: bool = False

    def __post_init__(self) -> None:
        assert self.scale in SCALES and self.replicates, (self.scale, self.replicates)
        assert set(self.corruptions) <= set(CORRUPTIONS) and self.corruptions, self.corruptions
        assert len(set(self.replicates)) == len(self.replicates), "each replicate once"
        assert set(self.experiments) <= set(EXPERIMENTS), self.experiments

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(sorted({r.seed for r in self.replicates}))

    @property
    def networks(self) -> tuple[int, ...]:
        return tuple(sorted({r.network for r in self.replicates}))

    @property
    def varies_networks(self) -> bool:
        return len(self.networks) > 1

    def replicates_text(self) -> str:
        """``networks 0–4 (each with its own stream seed)`` or ``network 0, seeds 0–4``."""
        if self.varies_networks:
            return f"{_range_text('networks', self.networks)} (network k with stream seed k)"
        return f"network {self.networks[0]}, {_range_text('seeds', self.seeds)}"

    def corruptions_text(self) -> str:
        if len(self.corruptions) == len(CORRUPTIONS):
            return "the paper's 15 corruptions"
        names = [c.replace("_", " ") for c in self.corruptions]
        listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        return f"{len(names)} of the 15 corruptions ({listed})"


def _range_text(word: str, numbers: Sequence[int]) -> str:
    found = sorted(numbers)
    if len(found) > 2 and found == list(range(found[0], found[-1] + 1)):
        return f"{word} {found[0]}–{found[-1]}"
    return f"{word} " + ", ".join(map(str, found))


@dataclass(frozen=True)
class Benchmark:
    """A benchmark: its committed store (``store``, under the checkout), its page (a generated
    block in it, :mod:`stamplib.evidence.pages`), its title, and the designs that decide its claims,
    best evidence first. Its page's tables plan the notebooks' cells at ``profile`` and ``scale``
    over ``table_seeds``; ``subtracts``: ours − the paper's is shown (the benchmark runs the paper's
    data set, not a stand-in for it); ``figure`` names its headline figure under ``figures/``, with
    ``figure_caption`` (what one stream is, and the network)."""

    name: str
    title: str
    store: Path
    designs: tuple[Design, ...]
    page: Path | None = field(default=None, compare=False)
    profile: str = "quick"
    scale: str = "builtin"
    table_seeds: tuple[int, ...] = (0,)
    subtracts: bool = False
    figure: str = ""
    figure_caption: str = field(default="", compare=False)

    def design(self, name: str) -> Design:
        for d in self.designs:
            if d.name == name:
                return d
        raise ValueError(f"benchmark {self.name} has no design {name!r}; its designs: "
                         + ", ".join(d.name for d in self.designs))


#: The paper's stream length per corruption on CIFAR-10 (10,000 known-class images + 2,500 Noise
#: outliers, about 196 batches), over the fifteen corruptions, seeds 0–2: the compact network on
#: the 10,000 JPEG test images of ``shared/data``. Only the claims on the step-size decay are
#: planned here (about 200 CPU-s a corruption, row and seed).
_PAPER_STREAM = Design("stream", "the paper's stream length (network 0, seeds 0–2)", "stream", "stream",
                       over_seeds((0, 1, 2)), CORRUPTIONS, paper_stream=True)

#: The built-in CIFAR-10 benchmark (the quick profile's stream size, offline): five compact source
#: networks, each met by its own stream seed, over the fifteen corruptions; beside it, network 0
#: under five stream seeds (over the fifteen, and over the notebooks' three), and the paper's
#: stream length for the decay's claims.
BUILTIN = Benchmark(
    "builtin", "built-in benchmark", Path("results") / "builtin_benchmark",
    (
        _PAPER_STREAM,
        Design("networks", "five networks", "quick", "builtin", over_networks(range(5)), CORRUPTIONS,
               diagnostics=True),
        Design("streams", "one network, five streams", "quick", "builtin", over_seeds(range(5)), CORRUPTIONS),
        # The notebooks' three corruptions: what decided the claims before the fifteen were computed;
        # it decides none while the fifteen have their cells.
        Design("three", "one network, five streams, 3 corruptions", "quick", "builtin", over_seeds(range(5)),
               get_profile("quick").corruptions),
    ),
    Path("docs") / "builtin_benchmark.md", "quick", "builtin", (0, 1, 2), False, "builtin_benchmark",
    "1,024 photographs + 256 outliers per corruption (3 corruptions, severity 5), compact ResNets (0.3 M parameters)",
)

#: The ResNet-18 reference run on the JPEG CIFAR-10 (results/reference): three networks of one
#: recipe, each met by its own stream seed, in setting (a) over the fifteen corruptions (and, as a
#: view, over the notebooks' three); network 0 under
#: seeds 0–2 over the fifteen corruptions (the claims that read only the methods a CPU affords
#: there, :data:`CPU_REFERENCE_METHODS`) and over three.
REFERENCE = Benchmark(
    "reference", "reference run (real images)", Path("results") / "reference",
    (
        Design("networks", "three networks, setting (a), 15 corruptions", "quick", "real", over_networks(range(3)),
               CORRUPTIONS, experiments=(plans.TABLE1.notebook,)),
        # The same three networks over the notebooks' three corruptions: what decided Table 1a's
        # claims before the fifteen were computed; it decides none while the fifteen have their cells.
        Design("networks_three", "three networks, setting (a), 3 corruptions", "quick", "real",
               over_networks(range(3)), get_profile("quick").corruptions, experiments=(plans.TABLE1.notebook,)),
        Design("fifteen", "one network, three streams, 15 corruptions", "quick", "real", over_seeds(range(3)),
               CORRUPTIONS),
        Design("three", "one network, three streams", "quick", "real", over_seeds(range(3)),
               get_profile("quick").corruptions),
    ),
    Path("docs") / "reference_run.md", "quick", "real", (0, 1, 2), True, "reference_run",
    "the JPEG CIFAR-10, our CIFAR-10-C (3 corruptions, 2,000 images each), CPU-trained ResNet-18s",
)

#: Every committed benchmark, in the order the pages show them.
BENCHMARKS = (BUILTIN, REFERENCE)
#: The methods whose 15-corruption reference cells a CPU computes in about 40 minutes a seed
#: (the rest keep 16 views or a teacher and cost hours).
CPU_REFERENCE_METHODS = ("source", "bn_stats", "tent", "eata")
#: Replicates a better design needs before it decides a claim: two give a t-interval on one
#: degree of freedom.
ENOUGH_REPLICATES = 3


def full_benchmark(seeds: Sequence[int] = (0,), store: Path = Path("results")) -> Benchmark:
    """A user's full-profile store on the paper's data sets (the paper's stream length)."""
    design = Design("full", "full profile (the paper's data)", "full", "paper", over_seeds(seeds), CORRUPTIONS,
                    paper_stream=True)
    return Benchmark("full", "full profile (the paper's data)", store, (design,))


def by_name(name: str) -> Benchmark:
    """A committed benchmark by name (``builtin``, ``reference``)."""
    for benchmark in BENCHMARKS:
        if benchmark.name == name:
            return benchmark
    raise ValueError(f"no benchmark {name!r}; the committed ones: {', '.join(b.name for b in BENCHMARKS)}")


def for_store(root: Path) -> Benchmark | None:
    """The committed benchmark whose store ``root`` is (by its last two path parts), else None."""
    parts = Path(root).resolve().parts[-2:]
    return next((b for b in BENCHMARKS if b.store.parts == parts), None)


# ------------------------------------------------------------------------------- arms -> cells


@cache
def _plan_cells(experiment: str, params: tuple[tuple[str, str], ...], profile: str, scale: str,
                seed: int, corruptions: tuple[str, ...]) -> tuple[plans.PlannedCell, ...]:
    if scale not in EXPERIMENTS[experiment].setups:  # the paper-stream scale has the Noise stand-ins only
        return ()
    return EXPERIMENTS[experiment].plan(profile=profile, scale=scale, seeds=str(seed),
                                        corruptions=",".join(corruptions),
                                        **dict(params)).cells


def spec(arm: Arm, design: Design, replicate: Replicate) -> RunSpec | None:
    """The cell behind ``arm`` under ``replicate`` on ``design``; None where that scale has no
    such row (a data set it does not stand in for) or the design does not hold its experiment."""
    if design.experiments and arm.experiment not in design.experiments:
        return None
    cells = _plan_cells(arm.experiment, arm.params, design.profile, design.scale, replicate.seed, design.corruptions)
    for cell in cells:
        if (cell.spec.method == arm.method and cell.variant == arm.variant and cell.paper_dataset == arm.dataset
                and cell.paper_outlier_set == arm.outlier_set):
            changes = {"network": replicate.network} if replicate.network else {}
            if arm.diagnostic:
                changes["diagnostic"] = arm.diagnostic
            return cell.spec.with_(**changes) if changes else cell.spec
    return None


def testable(claim: Claim, design: Design) -> bool:
    """Whether ``design`` can test ``claim``: its scale is one the claim names, it has a cell for
    every arm, and the paper-stream design tests only the claims that need its length."""
    if design.paper_stream and design.scale == "stream" and not claim.stream:
        return False
    return design.scale in claim.scales and all(spec(a, design, design.replicates[0]) is not None
                                                for a in claim.arms)


def needs_stream(claim: Claim, design: Design) -> bool:
    """Whether ``claim`` needs a longer stream than ``design``'s: with T = 150 the cosine step size
    is still 0.96× its start at a quick stream's last batch (0.84× on the reference run's 40
    batches), against 0.21× at the paper's 196, so the decay has not acted yet."""
    return claim.stream and not design.paper_stream


def cells(claim: Claim, design: Design, replicates: Sequence[Replicate] | None = None) -> list[RunSpec]:
    """The distinct cells ``claim`` reads on ``design`` over ``replicates`` (None: the design's),
    replicate by replicate; none where it cannot test it or needs a longer stream."""
    if not testable(claim, design) or needs_stream(claim, design):
        return []
    found = [spec(a, design, r) for r in (design.replicates if replicates is None else replicates) for a in claim.arms]
    return registry.distinct([s for s in found if s is not None])


def claims_of(design: Design) -> tuple[Claim, ...]:
    """The claims whose cells ``design`` computes: the ledger's, and STAMP's counterfactual arms
    where the design computes them."""
    return LEDGER + DIAGNOSTIC_CLAIMS if design.diagnostics else LEDGER


def ledger_cells(design: Design, replicates: Sequence[Replicate] | None = None,
                 ledger: Sequence[Claim] | None = None) -> list[RunSpec]:
    """Every cell of the ledger's claims that ``design`` tests (and its diagnostics'), claim by claim."""
    found: list[RunSpec] = []
    for claim in claims_of(design) if ledger is None else ledger:
        found += cells(claim, design, replicates)
    return registry.distinct(found)


#: The headline tables a benchmark's figure and page show for every method (Tables 1a, 3, 4a).
HEADLINE_TABLES = (plans.TABLE1, plans.CLASS_SPLIT, plans.CLOSED_SET)


def headline_cells(design: Design, replicates: Sequence[Replicate] | None = None) -> list[RunSpec]:
    """Every method's cells of the headline tables (the notebooks' own, over the profile's
    corruptions) under the stream seeds of ``replicates`` (None: the design's), network 0."""
    chosen = design.replicates if replicates is None else replicates
    found: list[RunSpec] = []
    for experiment in HEADLINE_TABLES:
        found += experiment.plan(profile=design.profile, scale=design.scale,
                                 seeds=",".join(str(r.seed) for r in chosen)).specs
    return registry.distinct(found)


def _cost_key(spec_: RunSpec) -> tuple:
    fields = spec_.to_dict()
    fields.pop("seed", None)
    fields.pop("network", None)
    return tuple(sorted((k, repr(v)) for k, v in fields.items()))


def cheapest_first(design: Design, store: ResultsStore, device: str, replicates: Sequence[Replicate] | None = None,
                   ledger: Sequence[Claim] | None = None) -> list[RunSpec]:
    """The ledger's missing cells on ``design``, the claim that costs least to complete first (each
    cell's cost estimated from the store's records computed on the same kind of ``device`` — ``cpu``
    or ``cuda`` — of the same cell under another replicate, else the method's mean, else an hour),
    and within a claim its cells replicate by replicate: an interrupted computation leaves the
    most claims decided."""
    records = store.records()
    known: dict[tuple, float] = {}
    per_method: dict[str, list[float]] = {}
    kind = device.split(":")[0]
    for record in records:
        seconds = float(record.seconds or math.nan)
        if math.isnan(seconds) or str(record.device or "").split(":")[0] != kind:
            continue
        known.setdefault(_cost_key(record.spec), seconds)
        per_method.setdefault(record.spec.method, []).append(seconds)
    by_method = {m: sum(v) / len(v) for m, v in per_method.items()}
    stored = {r.key for r in records}
    pending = []
    for order, claim in enumerate(claims_of(design) if ledger is None else ledger):
        missing = [s for s in cells(claim, design, replicates) if s.key() not in stored]
        if missing:
            cost = sum(known.get(_cost_key(s), by_method.get(s.method, 3600.0)) for s in missing)
            pending.append((cost, order, missing))
    return registry.distinct([s for _, _, missing in sorted(pending, key=lambda p: p[:2]) for s in missing])


def evidence_cells(design: Design, store: ResultsStore, device: str,
                   replicates: Sequence[Replicate] | None = None) -> list[RunSpec]:
    """What ``claims compute`` computes for ``design`` over ``replicates`` (None: the design's):
    the ledger's missing cells, the claim cheapest to complete first, then, on a design of one
    network, the rest of the headline tables' cells for every method (what the benchmark's page
    and figure show; not on the paper-stream design, which holds only the decay's claims)."""
    todo = cheapest_first(design, store, device, replicates)
    if design.paper_stream or design.varies_networks:
        return todo
    return registry.distinct(todo + headline_cells(design, replicates))


def of_methods(cells: Sequence[RunSpec], methods: Sequence[str], design: Design) -> list[RunSpec]:
    """``cells`` of the named ``methods``, method by method in the order named (a person who knows
    what each costs orders them cheapest first); a name that is none of ``design``'s methods is
    refused with the list of those that are."""
    known = {s.method for s in ledger_cells(design)}
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise ValueError(f"--methods: {', '.join(unknown)} has no cell in design {design.name}; its methods are "
                         f"{', '.join(sorted(known))}")
    return [s for method in dict.fromkeys(methods) for s in cells if s.method == method]


def table6_rows(design: Design) -> list[RunSpec]:
    """Table 6's plan over ``design``'s replicates with the other methods beside STAMP's rows
    (Source, BN Stats, Tent, EATA at each outlier share): what the stores hold from a claim the
    paper does not make, kept as notebook 08's rows; no claim reads them now."""
    found = []
    for r in design.replicates:
        for c in _plan_cells(plans.RATIOS.notebook, (("methods", "source,bn_stats,tent,eata,stamp"),), design.profile,
                             design.scale, r.seed, design.corruptions):
            found.append(c.spec.with_(network=r.network) if r.network else c.spec)
    return found


def parse_numbers(text: str, what: str = "seeds") -> tuple[int, ...]:
    """``0-4``, ``0,1,2`` or ``0-2,5`` as numbers, in order, each once."""
    found: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise ValueError(f"{what}: expected numbers or ranges such as '0-4' or '0,1,2', got {text!r}") from None
        if first < 0 or last < first:
            raise ValueError(f"{what}: a range runs from a number >= 0 up, got {part!r}")
        found += range(first, last + 1)
    if not found:
        raise ValueError(f"{what}: name at least one, got {text!r}")
    return tuple(dict.fromkeys(found))


def chosen_replicates(design: Design, text: str) -> tuple[Replicate, ...]:
    """The replicates of ``design`` that ``text`` names: network numbers on a design that varies
    networks, stream seeds on one that does not (``0-4``, ``1,2``); every one that is not the
    design's is refused."""
    numbers = parse_numbers(text, "networks" if design.varies_networks else "seeds")
    by_number = {(r.network if design.varies_networks else r.seed): r for r in design.replicates}
    unknown = [n for n in numbers if n not in by_number]
    if unknown:
        raise ValueError(f"{design.title} has no {'network' if design.varies_networks else 'seed'} "
                         f"{', '.join(map(str, unknown))}; its replicates: {design.replicates_text()}")
    return tuple(by_number[n] for n in numbers)


def networks_of(design: Design, replicates: Sequence[Replicate] | None = None) -> list[tuple[str, int]]:
    """The (data set, network) pairs whose source networks ``design``'s ledger cells use over
    ``replicates`` (None: the design's), in order."""
    return list(dict.fromkeys((s.dataset, s.network) for s in ledger_cells(design, replicates)))


def replicate_of(spec_: RunSpec) -> Replicate:
    return Replicate(spec_.network, spec_.seed)


def missing_by_replicate(specs: Sequence[RunSpec], stored: Mapping[str, object]) -> dict[Replicate, int]:
    """How many of ``specs`` lack a record in ``stored`` (by key), per replicate."""
    out: dict[Replicate, int] = {}
    for s in specs:
        if s.key() not in stored:
            out[replicate_of(s)] = out.get(replicate_of(s), 0) + 1
    return out
