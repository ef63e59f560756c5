"""What every notebook computes: its parameters → the cells (RunSpecs) of its table or figure.

One :class:`Experiment` per notebook, registered once in :mod:`~stamplib.experiments.registry`:
its planning function, data sets per scale, the paper tables it reproduces and which methods
its variants apply to. Other modules hold the object (``plans.TABLE1``), never a name; names are
resolved at the edges (the command line, a notebook's ``registry.plan("02_…")``). A notebook parses its
``parameters`` cell into :class:`~stamplib.experiments.parameters.NotebookParameters`, calls
:func:`~stamplib.experiments.registry.plan`, then :func:`stamplib.experiments.execute.compute` (finished cells come
from the
results store); ``python -m stamplib grid`` hands the same plans' RunSpecs to
:mod:`stamplib.experiments.grid`. A notebook and a grid therefore share every cell, and cells
shared between notebooks (STAMP's default row appears in Tables 1, 5, 6 and both figures) are
computed once.

Scales (chosen by the profile and ``data_root``):

* ``builtin`` — ``smoke``/``quick`` without ``data_root``: the profile's built-in benchmark
  (quick: 2,000 CIFAR-10 photographs and compact source networks shipped with the package;
  smoke: the digits, where digits 8–9 are the held-out classes), which stands in for the
  paper's data sets (the Noise set for every outlier set);
* ``real`` — ``smoke``/``quick`` with ``data_root``: the JPEG CIFAR-10 of shared/data (Noise
  outliers, and the 8:2 class split), at reduced size;
* ``paper`` — ``full``: the paper's data sets, 15 corruptions, every sample.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from stamplib import data, methods, validation
from stamplib.evaluation.assembly import stand_in_overrides
from stamplib.evaluation.profiles import get_profile
from stamplib.evaluation.spec import RunSpec
from stamplib.experiments.parameters import (
    PLANNING,
    NotebookParameters,
    names,
    number,
    parse_methods,
)
from stamplib.experiments.registry import STAMP_ONLY, Experiment, Plan, PlannedCell, Setup, register

#: Table 5 rows as (S.A., D.S., RBM, S.W.) = (sam, lr_decay, memory, weighting ≠ none).
ABLATION_ROWS = (
    (False, False, False, False),
    (False, True, False, False),
    (True, False, False, False),
    (True, True, False, False),
    (True, True, False, True),
    (True, True, True, False),
    (True, True, True, True),
)
WEIGHT_STRATEGIES = ("adaptive", "static", "eata")


# ------------------------------------------------------------------------------- defaults


def _stand_in(dataset: str, outlier_sets: tuple[str, ...], paper_dataset: str, paper_outlier_sets: tuple[str, ...],
              hyperparameter_set: str = "") -> Setup:
    return Setup(dataset, outlier_sets, paper_dataset, paper_outlier_sets, hyperparameter_set)


_CIFAR_SETS = ("noise", "svhn", "lsun", "tiny")

#: Each experiment's data sets per scale: the paper's own cells, and the teaching-scale cells
#: with the paper's cell each stands in for (an :class:`Experiment`'s ``setups``).
Setups = dict[str, list[Setup]]


def _noise_stand_in(paper: list[Setup], paper_dataset: str, paper_outlier_sets: tuple[str, ...],
                    hyperparameter_set: str = "") -> Setups:
    """The paper's cells, and at teaching scale Noise outliers on the JPEG (real) or built-in
    CIFAR-10 in their place."""
    return {
        "paper": paper,
        "real": [_stand_in("cifar10_jpeg", ("noise",), paper_dataset, paper_outlier_sets, hyperparameter_set)],
        "builtin": [_stand_in("cifar10_builtin", ("noise",), paper_dataset, paper_outlier_sets, hyperparameter_set)],
        # The paper's stream length: the compact built-in network on all 10,000 JPEG test images.
        "stream": [_stand_in("cifar10_jpeg_compact", ("noise",), paper_dataset, paper_outlier_sets,
                             hyperparameter_set)],
    }


TABLE1_SETUPS = _noise_stand_in([Setup.same("cifar10_c", _CIFAR_SETS), Setup.same("cifar100_c", _CIFAR_SETS)],
                                "cifar10_c", ("noise",))
# No ImageNet here: the ImageNet hyperparameters (crop+flip views, no consistency filter,
# T = 750, …) run on the small data set instead, so the code path is exercised.
IMAGENET_SETUPS = _noise_stand_in([Setup.same("imagenet_c", ("places365", "textures"))], "imagenet_c",
                                  ("places365",), "imagenet_c")
CLASS_SPLIT_SETUPS: Setups = {
    "paper": [Setup.same("cifar10_c_8_2", (data.HELDOUT,)), Setup.same("cifar100_c_80_20", (data.HELDOUT,))],
    "real": [_stand_in("cifar10_jpeg_8_2", (data.HELDOUT,), "cifar10_c_8_2", (data.HELDOUT,))],
    "builtin": [_stand_in("cifar10_builtin_8_2", (data.HELDOUT,), "cifar10_c_8_2", (data.HELDOUT,))],
}
CLOSED_SET_SETUPS: Setups = {
    "paper": [Setup.same("cifar10_c", ("none",)), Setup.same("cifar100_c", ("none",))],
    "real": [_stand_in("cifar10_jpeg", ("none",), "cifar10_c", ("none",))],
    "builtin": [_stand_in("cifar10_builtin", ("none",), "cifar10_c", ("none",))],
}
SVHN_SETUPS = _noise_stand_in([Setup.same("cifar100_c", ("svhn",))], "cifar100_c", ("svhn",))
RATIO_SETUPS = _noise_stand_in([Setup.same("cifar100_c", ("svhn", "lsun", "tiny"))], "cifar100_c", ("svhn",))
AUGMENTATION_SETUPS = _noise_stand_in([Setup.same("cifar10_c", _CIFAR_SETS)], "cifar10_c", ("noise",))
NOISE_SETUPS = _noise_stand_in([Setup.same("cifar10_c", ("noise",))], "cifar10_c", ("noise",))


#: What the smoke profile's digits put in the built-in CIFAR-10's places (data set, outlier set).
DIGITS_IN_PLACE_OF = {"cifar10_builtin": "digits", "cifar10_builtin_8_2": "digits", data.HELDOUT: "digits_heldout"}


def builtin_setup(setup: Setup, benchmark: str) -> Setup:
    """``setup`` of the built-in CIFAR-10 on the profile's built-in ``benchmark``."""
    if benchmark == "cifar10_builtin":
        return setup
    assert benchmark == "digits", f"no stand-ins for the built-in benchmark {benchmark!r}"
    swap = DIGITS_IN_PLACE_OF
    return dataclasses.replace(setup, dataset=swap.get(setup.dataset, setup.dataset),
                               outlier_sets=tuple(swap.get(o, o) for o in setup.outlier_sets))


def _scale_setups(experiment: Experiment, params: NotebookParameters, scale: str) -> list[Setup]:
    setups = experiment.setups.get(scale, [])  # the paper-stream scale has the Noise stand-ins only
    if scale == "builtin":
        benchmark = get_profile(params.profile).builtin
        setups = [builtin_setup(s, benchmark) for s in setups]
    return list(setups)


def _setups(experiment: Experiment, params: NotebookParameters) -> list[Setup]:
    """The notebook's (data set, outlier sets) for this scale, narrowed or replaced by the
    ``datasets``/``outlier_sets`` parameters (a data set of another scale, such as ``digits``
    in the quick profile, keeps its own outlier sets)."""
    defaults = _scale_setups(experiment, params, params.scale)
    if params.datasets:
        others = [s for scale in experiment.setups for s in experiment.setups[scale]]
        digits = [builtin_setup(s, "digits") for s in experiment.setups.get("builtin", [])]
        known = {s.dataset: s for s in [*others, *digits, *defaults]}
        first = defaults[0]
        setups = [known.get(ds, Setup(ds, first.outlier_sets, "", ("",) * len(first.outlier_sets),
                                         first.hyperparameter_set))
                  for ds in params.datasets]
    else:
        setups = list(defaults)
    if wanted := params.outlier_sets:
        setups = [
            dataclasses.replace(s, outlier_sets=wanted, paper_outlier_sets=tuple(
                dict(zip(s.outlier_sets, s.paper_outlier_sets)).get(o, o) for o in wanted))
            for s in setups
        ]
    return setups


# ------------------------------------------------------------------------------- plans

Variant = tuple[str, dict[str, Any], float | None]  # (row label, STAMP overrides, outlier ratio or None)
ONE_ROW: tuple[Variant, ...] = (("", {}, None),)


def _cells(experiment: Experiment, params: NotebookParameters, rows: Sequence[str],
           variants: Sequence[Variant], seeds: Sequence[int] | None = None) -> list[PlannedCell]:
    """Every (data set, outlier set, method, variant, network, seed) cell; a variant's overrides
    apply to the experiment's ``variant_methods``, its ratio (None: the notebook's) to every
    method; ``seeds`` (None: the parameters'). A network other than 0 labels its rows."""
    cells = []
    for setup in _setups(experiment, params):
        for o, po in zip(setup.outlier_sets, setup.paper_outlier_sets):
            for method in rows:
                for label, overrides, ratio in variants:
                    own = overrides if method in experiment.variant_methods else {}
                    stand_ins = stand_in_overrides(method, setup.dataset, setup.hyperparameter_set)
                    share = 0.0 if o == data.CLOSED_SET else (params.outlier_ratio if ratio is None else ratio)
                    for network in params.networks:
                        # another network is a row of its own: its table reads beside network 0's
                        row = label if network == 0 else ", ".join(filter(None, (label, f"network {network}")))
                        for seed in seeds if seeds is not None else params.seeds:
                            spec = RunSpec.make(
                                method, overrides={**stand_ins, **own}, dataset=setup.dataset, outlier_set=o,
                                corruptions=params.corruptions, severity=params.severity, outlier_ratio=share,
                                seed=seed, profile=params.profile, hyperparameter_set=setup.hyperparameter_set,
                                network=network,
                            )
                            cells.append(PlannedCell(spec, row, setup.paper_dataset, po))
    return cells


def plan_rows(experiment: Experiment, params: NotebookParameters, rows: Sequence[str],
              variants: Sequence[Variant] = ONE_ROW) -> Plan:
    """The plan of ``rows`` (methods), each with every variant — (row label, overrides for the
    experiment's ``variant_methods``, outlier ratio or None) — on the experiment's data sets,
    for every seed: what most planners return, and the building block of a new experiment.

    An experiment that draws bands (:attr:`Experiment.bands`: the ablation and the sweeps) adds
    its baseline rows — the variants that change nothing: no override, the notebook's outlier
    ratio — over the headline's other seeds as :attr:`Plan.band_cells`."""
    cells = _cells(experiment, params, rows, variants)
    band: list[PlannedCell] = []
    other_seeds = [s for s in experiment.band_seeds(params) if s not in params.seeds]
    if other_seeds:
        baseline = [v for v in variants if not v[1] and (v[2] is None or v[2] == params.outlier_ratio)]
        band = _cells(experiment, params, rows, baseline, seeds=other_seeds)
    return Plan(experiment, params.scale, tuple(cells), band_cells=tuple(band))



def plan_method_table(experiment: Experiment, params: NotebookParameters) -> Plan:
    """Tables 1–4: every method (the paper's ten in its row order, then the newer ones)."""
    return plan_rows(experiment, params, params.methods or methods.TABLE_ORDER)


def ablation_label(sam: bool, lr_decay: bool, memory: bool, weighting: bool) -> str:
    """Table 5 row label, e.g. ``sam=1,lr_decay=1,memory=0,weighting=adaptive``."""
    return (f"sam={int(sam)},lr_decay={int(lr_decay)},memory={int(memory)},"
            f"weighting={'adaptive' if weighting else 'none'}")


def ablation_variants(rows: Sequence[tuple[bool, bool, bool, bool]] = ABLATION_ROWS) -> list[Variant]:
    """Table 5's rows as variants: each row's label and STAMP's overrides that switch its
    components off (protocol.md §3.3 ablation switches; memory off = entropy minimisation on the
    current batch). The course's notebook 16 walks a path through the same rows."""
    switched_off = {"sam": False, "lr_decay": False, "memory": False, "weighting": "none"}
    variants: list[Variant] = []
    for row in rows:
        overrides = {name: off for (name, off), on in zip(switched_off.items(), row) if not on}
        variants.append((ablation_label(*row), overrides, None))
    return variants


def plan_ablation(experiment: Experiment, params: NotebookParameters) -> Plan:
    """Table 5: STAMP with SAM, step-size decay, the memory and self-weighting switched on and
    off (:func:`ablation_variants`)."""
    return plan_rows(experiment, params, STAMP_ONLY, ablation_variants())


def plan_weight_strategies(experiment: Experiment, params: NotebookParameters,
                           weightings: str = ",".join(WEIGHT_STRATEGIES)) -> Plan:
    """Fig. 3: adaptive self-weights (with gradient) vs static (detached) vs EATA's exp(H_thr − H)."""
    chosen = names(weightings, "weightings", WEIGHT_STRATEGIES) or WEIGHT_STRATEGIES
    variants = [(f"weighting={w}", {} if w == "adaptive" else {"weighting": w}, None) for w in chosen]
    return plan_rows(experiment, params, STAMP_ONLY, variants)


def parse_ratios(text: str | Sequence[float]) -> tuple[float, ...]:
    """Outlier proportions such as ``'0.05,0.1,0.2,1/3,0.5'`` (fractions allowed), each in (0, 1)."""
    items = names(text if isinstance(text, (str, int, float)) else [repr(r) for r in text], "outlier_ratios")
    try:
        ratios = tuple(float(Fraction(r)) for r in items)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"outlier_ratios: expected numbers or fractions such as '0.05,1/3', got {text!r}") from None
    bad = [r for r in ratios if not 0.0 < r < 1.0]
    if not ratios or bad:
        raise ValueError(f"outlier_ratios: every outlier proportion must lie in (0, 1), got {text!r}")
    return ratios


def ratio_label(ratio: float) -> str:
    """``ratio=0.05`` … ``ratio=0.3333``: the row label shared with the paper's numbers."""
    return f"ratio={round(ratio, 4):g}"


def plan_outlier_ratio(experiment: Experiment, params: NotebookParameters,
                       outlier_ratios: str = "0.05,0.1,0.2,1/3,0.5", ratios: str | None = None) -> Plan:
    """Table 6: STAMP's H-score as the outlier proportion outliers/(ID + outliers) varies (each
    row's ratio replaces ``outlier_ratio``; ``outlier_ratios`` is its list, ``ratios`` its old
    spelling, kept one release)."""
    if ratios is not None:
        print("note: the parameter `ratios` is now `outlier_ratios`; the old spelling goes in the next release",
              file=sys.stderr)
        outlier_ratios = ratios
    variants = [(ratio_label(r), {}, r) for r in parse_ratios(outlier_ratios)]
    return plan_rows(experiment, params, params.methods or STAMP_ONLY, variants)


def plan_augmentation_averaging(experiment: Experiment, params: NotebookParameters, num_views: str = "16,1") -> Plan:
    """Fig. 4 (appendix): STAMP with K = 16 averaged views vs K = 1 (no averaging)."""
    counts = tuple(int(k) for k in names(num_views, "num_views"))
    if not counts or any(k < 1 for k in counts):
        raise ValueError(f"num_views: give view counts >= 1 such as '16,1', got {num_views!r}")
    return plan_rows(experiment, params, STAMP_ONLY, [(f"K={k}", {} if k == 16 else {"num_views": k},
                                                       None) for k in counts])


def traced_methods() -> tuple[str, ...]:
    """Notebook 10's default rows: Tent as the reference, then the table's methods that report
    per-batch traces (filter, memory, loss), as each says by its ``reports_trace``."""
    return ("tent", *(m for m in methods.TABLE_ORDER if methods.method_class(m).reports_trace))


STREAM_KINDS = "iid,continual,dirichlet:0.1"


def parse_stream_kinds(text: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """``iid``, ``continual``, ``dirichlet:δ``, ``burst:L`` (comma-separated; ``=`` works too,
    but papermill cannot read it in a parameters cell) → (label, the StreamSpec fields)."""
    kinds = []
    for item in names(text, "streams"):
        name, _, value = item.replace("=", ":").partition(":")
        if name == "iid" and not value:
            kinds.append((item, {}))
        elif name == "continual" and not value:
            kinds.append((item, {"schedule": "continual"}))
        elif name == "dirichlet" and value:
            kinds.append((item, {"dirichlet": validation.check_dirichlet(float(value))}))
        elif name == "burst" and value:
            kinds.append((item, {"outlier_burst": validation.check_outlier_burst(int(value))}))
        else:
            raise ValueError(f"streams: unknown stream {item!r}; give iid, continual, dirichlet:δ or burst:L")
    if not kinds:
        raise ValueError("streams: name at least one stream, e.g. 'iid,continual,dirichlet:0.1'")
    return tuple(kinds)


def plan_inside_the_stream(experiment: Experiment, params: NotebookParameters, streams: str = STREAM_KINDS) -> Plan:
    """Notebook 10: the traced methods on the ordinary stream and on harder ones (continual,
    non-i.i.d. labels, outlier bursts); the variant is the stream kind. The i.i.d. cells are
    those of notebook 02, computed once for both."""
    kinds = parse_stream_kinds(streams)
    cells = [dataclasses.replace(cell, spec=cell.spec.with_stream(**fields), variant=label)
             for cell in _cells(experiment, params, params.methods or traced_methods(), ONE_ROW)
             for label, fields in kinds]
    return Plan(experiment, params.scale, tuple(cells))


#: Notebook 12's two protocols, as row variants.
PAPER_PROTOCOL, REALISTIC_PROTOCOL = "paper protocol", "realistic"


def plan_realistic_stream(experiment: Experiment, params: NotebookParameters, relative_speed: int | str = 0) -> Plan:
    """Notebook 12: every method of Table 1 under the paper's protocol (each batch waits for the
    adaptation) and under the realistic one (the stream does not wait: a method adapts on every
    C(g)-th batch). The paper-protocol cells are notebook 02's, computed once for both.
    ``relative_speed``: C(g) for every method (0: each method's, measured in its run)."""
    speed = validation.check_relative_speed(number(relative_speed, int))
    table = _cells(TABLE1, params, params.methods or methods.TABLE_ORDER, ONE_ROW)
    cells = [dataclasses.replace(cell, variant=label, spec=cell.spec.with_stream(realistic=True, relative_speed=speed)
                                 if label == REALISTIC_PROTOCOL else cell.spec)
             for cell in table for label in (PAPER_PROTOCOL, REALISTIC_PROTOCOL)]
    return Plan(experiment, params.scale, tuple(cells))


#: Notebook 13's three axes, as the first part of its variants ("batch size=4").
BATCH_AXIS, LABEL_AXIS, DOMAIN_AXIS = "batch size", "label shift", "domains"
#: The paper's stream on each axis: batch 64, i.i.d. labels, one corruption at a time.
PAPER_STREAM = {BATCH_AXIS: "64", LABEL_AXIS: "none", DOMAIN_AXIS: "separate"}
DOMAINS = ("separate", "mixed")


def stress_variant(axis: str, value: object) -> str:
    return f"{axis}={value}"


def plan_stress_streams(experiment: Experiment, params: NotebookParameters, batch_sizes: str = "",
                        batch_corruptions: str = "gaussian_noise", label_shifts: str = "imbalance:10,sorted",
                        domains: str = ",".join(DOMAINS)) -> Plan:
    """Notebook 13 (beyond the paper): every method on the paper's stream and on harder ones
    along three axes — batch size, label shift (``imbalance:ρ``, ``sorted``; see
    :class:`stamplib.data.LabelShift`), and all corruptions mixed in one stream against one at
    a time. Each cell's variant is ``axis=value``; the paper's stream (batch 64, no label
    shift, separate domains) is notebook 02's cell. The batch-size axis runs on
    ``batch_corruptions`` only ("": the notebook's corruptions): a batch of one sample costs a
    step per sample, and one corruption keeps the quick profile's run short; its batch of 64
    is read from notebook 02's cell, on those corruptions alone (the method is reset before
    each corruption, so a corruption's numbers do not depend on the others). ``batch_sizes``
    "" means the profile's (quick: 4, 16, 64; full: 1 as well). A batch smaller than a method
    supports and a mixed stream of one corruption are left out, with a note."""
    sizes = tuple(validation.check_positive_int("batch_sizes", number(b, int), "e.g. '1,4,16,64'")
                  for b in names(batch_sizes, "batch_sizes")) or get_profile(params.profile).stress_batch_sizes
    shifts = tuple(str(data.LabelShift.parse(t)) for t in names(label_shifts, "label_shifts"))
    wanted_domains = names(domains, "domains", DOMAINS)
    batch_only = names(batch_corruptions, "batch_corruptions")
    cells, notes = [], []
    for cell in _cells(experiment, params, params.methods or methods.TABLE_ORDER, ONE_ROW):
        spec, smallest = cell.spec, methods.method_class(cell.spec.method).min_batch_size
        batch_spec = spec.with_(corruptions=list(batch_only)) if batch_only else spec
        for size in sizes:
            if size < smallest:
                notes.append(f"{spec.method}: no batch of {size} (it adapts on batches of {smallest} or more)")
                continue
            variant = stress_variant(BATCH_AXIS, size)
            if spec.with_stream(batch_size=size).key() == spec.key():  # the paper's batch: notebook 02's cell
                reads = tuple(c for c in batch_spec.corruptions if c in spec.corruptions)
                cells.append(dataclasses.replace(cell, variant=variant,
                                                 corruptions=() if reads == tuple(spec.corruptions) else reads))
                continue
            cells.append(dataclasses.replace(cell, spec=batch_spec.with_stream(batch_size=size), variant=variant))
        for shift in ("", *shifts):
            cells.append(dataclasses.replace(cell, spec=spec.with_stream(label_shift=shift),
                                             variant=stress_variant(LABEL_AXIS, shift or "none")))
        for domain in wanted_domains:
            if domain == "mixed" and len(spec.corruptions) < 2:
                notes.append("no mixed-domain stream: it needs two or more corruptions")
                continue
            schedule = "mixed" if domain == "mixed" else "episodic"
            cells.append(dataclasses.replace(cell, spec=spec.with_stream(schedule=schedule),
                                             variant=stress_variant(DOMAIN_AXIS, domain)))
    # The paper's stream (notebook 02's cell) over the headline's other seeds: its spread is each
    # method's band in the figure (stamplib.report.stress.paper_stream_spread).
    other_seeds = [s for s in experiment.band_seeds(params) if s not in params.seeds]
    band = _cells(experiment, params, params.methods or methods.TABLE_ORDER, ONE_ROW, seeds=other_seeds)
    return Plan(experiment, params.scale, tuple(cells), tuple(dict.fromkeys(notes)),
                band_cells=tuple(band) if other_seeds else ())


def plan_walkthrough(experiment: Experiment, params: NotebookParameters,
                     methods_to_compare: str = "source,bn_stats,tent,stamp",
                     corruption: str = "gaussian_noise", outlier_set: str = "noise", seed: int | str = 0,
                     outliers: str | None = None) -> Plan:
    """The walkthrough's small comparison: each method on the profile's built-in benchmark, on
    the profile's corruptions and the one studied in detail (first, if the profile lacks it).
    ``corruption``, ``outlier_set`` and ``seed`` go into each RunSpec as they are: it checks them;
    ``outliers`` is ``outlier_set``'s old spelling."""
    if outliers is not None:
        print("note: the parameter `outliers` is now `outlier_set`; the old spelling goes in the next release",
              file=sys.stderr)
        outlier_set = outliers
    prof = get_profile(params.profile)
    corruptions = prof.corruptions if corruption in prof.corruptions else (corruption, *prof.corruptions)
    chosen = parse_methods(methods_to_compare)
    if not chosen:
        raise ValueError(f"methods_to_compare: name at least one method; valid: {', '.join(methods.available())}")
    specs = [RunSpec(method=m, dataset=prof.builtin, outlier_set=outlier_set, corruptions=corruptions,
                     seed=number(seed, int), profile=params.profile) for m in chosen]
    return Plan(experiment, "builtin", tuple(PlannedCell(s) for s in specs))


# ------------------------------------------------------------------------------- the paper's experiments

_FIXED_ROWS = tuple(p for p in PLANNING if p != "methods")

WALKTHROUGH = register(Experiment("00_walkthrough", plan_walkthrough, reads=("profile",)))
TABLE1 = register(Experiment("02_table1_cifar_outlier_aware", plan_method_table, TABLE1_SETUPS, ("1a", "1b"),
                             averages_outlier_sets=True, headline=True))
IMAGENET = register(Experiment("03_table2_imagenet_outlier_aware", plan_method_table, IMAGENET_SETUPS, ("2",)))
CLASS_SPLIT = register(Experiment("04_table3_class_split", plan_method_table, CLASS_SPLIT_SETUPS, ("3",),
                                  headline=True))
CLOSED_SET = register(Experiment("05_table4_closed_set", plan_method_table, CLOSED_SET_SETUPS, ("4a", "4b"),
                                 headline=True))
ABLATION = register(Experiment("06_table5_ablation", plan_ablation, SVHN_SETUPS, ("5",), _FIXED_ROWS, bands=True))
WEIGHTS = register(Experiment("07_fig_weight_strategies", plan_weight_strategies, SVHN_SETUPS, (), _FIXED_ROWS,
                              bands=True))
RATIOS = register(Experiment("08_table6_outlier_ratio", plan_outlier_ratio, RATIO_SETUPS, ("6",),
                             tuple(p for p in PLANNING if p != "outlier_ratio"), bands=True))
AUGMENTATION = register(Experiment("09_fig_augmentation_averaging", plan_augmentation_averaging,
                                   AUGMENTATION_SETUPS, (), _FIXED_ROWS, bands=True))
INSIDE_THE_STREAM = register(Experiment("10_inside_the_stream", plan_inside_the_stream, NOISE_SETUPS))
REALISTIC = register(Experiment("12_realistic_stream", plan_realistic_stream, TABLE1_SETUPS))
STRESS = register(Experiment("13_stress_streams", plan_stress_streams, NOISE_SETUPS, bands=True))

