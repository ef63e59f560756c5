"""What every notebook computes: its parameters → the cells (RunSpecs) of its table or figure.

One planning function per notebook, registered in :data:`EXPERIMENTS`. A notebook calls
:func:`plan` with its ``parameters`` cell, then :func:`compute` (finished cells come from the
results store); ``python -m stamplib grid`` hands the same plans' RunSpecs to
:mod:`stamplib.evaluation.grid`. A notebook and a grid therefore share every cell, and cells
shared between notebooks (STAMP's default row appears in Tables 1, 5, 6 and both figures) are
computed once.

Scales (chosen by the profile and ``data_root``):

* ``builtin`` — ``smoke``/``quick`` without ``data_root``: the built-in digits benchmark, which
  stands in for the paper's data sets (digits 8–9 stand in for the held-out classes, the Noise
  set for every outlier set);
* ``real`` — ``smoke``/``quick`` with ``data_root``: the JPEG CIFAR-10 of shared/data (Noise
  outliers, and the 8:2 class split), at reduced size;
* ``paper`` — ``full``: the paper's data sets, 15 corruptions, every sample.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tqdm.auto import tqdm

from stamplib import data, methods, validation
from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation.assembly import stand_in_overrides
from stamplib.evaluation.metrics import PAPER_METRICS, check_metrics
from stamplib.evaluation.profiles import PROFILES, get_profile
from stamplib.evaluation.runner import run
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore

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


@dataclass(frozen=True)
class Cell:
    """One RunSpec of a notebook, with where it sits in the table and what the paper reports
    for the corresponding cell (``paper_*``: the paper's data set / outlier set / row)."""

    spec: RunSpec
    variant: str = ""  # row label beyond the method: ablation flags, ratio, K, weighting
    paper_dataset: str = ""
    paper_outliers: str = ""


@dataclass(frozen=True)
class Plan:
    notebook: str
    scale: str  # builtin | real | paper
    cells: tuple[Cell, ...]
    paper_tables: tuple[str, ...] = ()  # tables of paper_numbers this notebook reproduces
    notes: tuple[str, ...] = ()

    @property
    def specs(self) -> list[RunSpec]:
        """The distinct RunSpecs, in table order."""
        return distinct([cell.spec for cell in self.cells])


def distinct(specs: Iterable[RunSpec]) -> list[RunSpec]:
    """``specs`` without repeats (same key), in first-seen order."""
    seen: dict[str, RunSpec] = {}
    for spec in specs:
        seen.setdefault(spec.key(), spec)
    return list(seen.values())


# ------------------------------------------------------------------------------- parameters


def _names(text: str | Sequence[str], what: str, valid: Iterable[str] | None = None) -> tuple[str, ...]:
    """Comma-separated names (or a sequence of them); with ``valid``, unknown ones are refused."""
    if isinstance(text, (int, float)):  # papermill and --param turn "0" into 0
        text = str(text)
    items = [t.strip() for t in text.split(",")] if isinstance(text, str) else [str(t).strip() for t in text]
    items = [t for t in items if t]
    if valid is not None:
        valid = list(valid)
        bad = [t for t in items if t not in valid]
        if bad:
            raise ValueError(f"{what}: unknown {bad}; valid: {', '.join(valid)}")
    return tuple(items)


def parse_methods(text: str | Sequence[str]) -> tuple[str, ...]:
    """Comma-separated method names, each a registered method or ``package.module:Class``."""
    names = _names(text, "methods")
    _names([n for n in names if ":" not in n], "methods", methods.available())
    for name in names:
        methods.method_class(name)  # an outside method that cannot be loaded is refused here
    return names


def parse_seeds(text: str | Sequence[int]) -> tuple[int, ...]:
    items = _names(text if isinstance(text, (str, int)) else [str(s) for s in text], "seeds")
    try:
        seeds = tuple(int(s) for s in items)
    except ValueError:
        raise ValueError(f"seeds: expected comma-separated integers such as '0,1,2', got {text!r}") from None
    if not seeds or any(s < 0 for s in seeds):
        raise ValueError(f"seeds: give at least one non-negative integer, got {text!r}")
    return seeds


def parse_ratios(text: str | Sequence[float]) -> tuple[float, ...]:
    """Outlier proportions such as ``'0.05,0.1,0.2,1/3,0.5'`` (fractions allowed), each in (0, 1)."""
    items = _names(text if isinstance(text, (str, int, float)) else [repr(r) for r in text], "ratios")
    try:
        ratios = tuple(float(Fraction(r)) for r in items)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"ratios: expected numbers or fractions such as '0.05,1/3', got {text!r}") from None
    bad = [r for r in ratios if not 0.0 < r < 1.0]
    if not ratios or bad:
        raise ValueError(f"ratios: every outlier proportion must lie in (0, 1), got {text!r}")
    return ratios


def ratio_label(ratio: float) -> str:
    """``ratio=0.05`` … ``ratio=0.3333``: the row label shared with the paper's numbers."""
    return f"ratio={round(ratio, 4):g}"


def _number(value: Any, kind: type) -> Any:
    """A notebook parameter as int/float: ``--param`` hands strings such as ``"3"`` through."""
    try:
        return kind(value) if isinstance(value, str) else value
    except ValueError:
        return value  # refused by the check that follows, with its own message


def check_common(profile: str, device: str, severity: int | str, outlier_ratio: float | str) -> None:
    """Validate the parameters every notebook has; each error names the parameter."""
    get_profile(profile)
    validation.check_device(device)
    validation.check_severity(_number(severity, int))
    validation.check_outlier_ratio(_number(outlier_ratio, float))


def scale_of(profile: str, data_root: str = "") -> str:
    get_profile(profile)
    if profile == "full":
        return "paper"
    return "real" if data_root else "builtin"


# ------------------------------------------------------------------------------- defaults


@dataclass(frozen=True)
class Setup:
    """One ID data set of a notebook with its outlier sets, what each stands in for in the
    paper's table, and the hyperparameter setting to run it with ("" = the data set's own)."""

    dataset: str
    outliers: tuple[str, ...]
    paper_dataset: str = ""
    paper_outliers: tuple[str, ...] = ()
    setting: str = ""

    @classmethod
    def same(cls, dataset: str, outliers: tuple[str, ...]) -> Setup:
        """The paper's own cell: ours is what the paper ran."""
        return cls(dataset, outliers, dataset, outliers)


def _stand_in(dataset: str, outliers: tuple[str, ...], paper_dataset: str, paper_outliers: tuple[str, ...],
              setting: str = "") -> Setup:
    return Setup(dataset, outliers, paper_dataset, paper_outliers, setting)


_CIFAR_SETS = ("noise", "svhn", "lsun", "tiny")

#: Each notebook's data sets per scale: the paper's own cells, and the teaching-scale cells
#: with the paper's cell each stands in for.
DEFAULTS: dict[str, dict[str, list[Setup]]] = {
    "02_table1_cifar_outlier_aware": {
        "paper": [Setup.same("cifar10_c", _CIFAR_SETS), Setup.same("cifar100_c", _CIFAR_SETS)],
        "real": [_stand_in("cifar10_jpeg", ("noise",), "cifar10_c", ("noise",))],
        "builtin": [_stand_in("digits", ("noise",), "cifar10_c", ("noise",))],
    },
    "03_table2_imagenet_outlier_aware": {
        "paper": [Setup.same("imagenet_c", ("places365", "textures"))],
        # No ImageNet here: the ImageNet hyperparameters (crop+flip views, no consistency
        # filter, T = 750, …) run on the small data set instead, so the code path is exercised.
        "real": [_stand_in("cifar10_jpeg", ("noise",), "imagenet_c", ("places365",), "imagenet_c")],
        "builtin": [_stand_in("digits", ("noise",), "imagenet_c", ("places365",), "imagenet_c")],
    },
    "04_table3_class_split": {
        "paper": [Setup.same("cifar10_c_8_2", (data.HELDOUT,)), Setup.same("cifar100_c_80_20", (data.HELDOUT,))],
        "real": [_stand_in("cifar10_jpeg_8_2", (data.HELDOUT,), "cifar10_c_8_2", (data.HELDOUT,))],
        "builtin": [_stand_in("digits", ("digits_heldout",), "cifar10_c_8_2", (data.HELDOUT,))],
    },
    "05_table4_closed_set": {
        "paper": [Setup.same("cifar10_c", ("none",)), Setup.same("cifar100_c", ("none",))],
        "real": [_stand_in("cifar10_jpeg", ("none",), "cifar10_c", ("none",))],
        "builtin": [_stand_in("digits", ("none",), "cifar10_c", ("none",))],
    },
    **{
        nb: {
            "paper": [Setup.same("cifar100_c", ("svhn",))],
            "real": [_stand_in("cifar10_jpeg", ("noise",), "cifar100_c", ("svhn",))],
            "builtin": [_stand_in("digits", ("noise",), "cifar100_c", ("svhn",))],
        }
        for nb in ("06_table5_ablation", "07_fig_weight_strategies")
    },
    "08_table6_outlier_ratio": {
        "paper": [Setup.same("cifar100_c", ("svhn", "lsun", "tiny"))],
        "real": [_stand_in("cifar10_jpeg", ("noise",), "cifar100_c", ("svhn",))],
        "builtin": [_stand_in("digits", ("noise",), "cifar100_c", ("svhn",))],
    },
    "09_fig_augmentation_averaging": {
        "paper": [Setup.same("cifar10_c", _CIFAR_SETS)],
        "real": [_stand_in("cifar10_jpeg", ("noise",), "cifar10_c", ("noise",))],
        "builtin": [_stand_in("digits", ("noise",), "cifar10_c", ("noise",))],
    },
    "10_inside_the_stream": {
        "paper": [Setup.same("cifar10_c", ("noise",))],
        "real": [_stand_in("cifar10_jpeg", ("noise",), "cifar10_c", ("noise",))],
        "builtin": [_stand_in("digits", ("noise",), "cifar10_c", ("noise",))],
    },
}

_PAPER_TABLES = {
    "00_walkthrough": (),
    "02_table1_cifar_outlier_aware": ("1a", "1b"),
    "03_table2_imagenet_outlier_aware": ("2",),
    "04_table3_class_split": ("3",),
    "05_table4_closed_set": ("4a", "4b"),
    "06_table5_ablation": ("5",),
    "07_fig_weight_strategies": (),
    "08_table6_outlier_ratio": ("6",),
    "09_fig_augmentation_averaging": (),
    "10_inside_the_stream": (),
}


def _setups(notebook: str, scale: str, datasets: str, outlier_sets: str) -> list[Setup]:
    """The notebook's (data set, outlier sets) for this scale, narrowed or replaced by the
    ``datasets``/``outlier_sets`` parameters."""
    defaults = DEFAULTS[notebook][scale]
    chosen = _names(datasets, "datasets", list(data.DATASETS))
    if chosen:
        known = {s.dataset: s for s in DEFAULTS[notebook]["paper"] + defaults}
        first = defaults[0]
        setups = [known.get(ds, Setup(ds, first.outliers, "", ("",) * len(first.outliers), first.setting))
                  for ds in chosen]
    else:
        setups = list(defaults)
    wanted = _names(outlier_sets, "outlier_sets", [*data.OUTLIER_SETS, data.HELDOUT, data.CLOSED_SET])
    if wanted:
        setups = [
            dataclasses.replace(s, outliers=wanted,
                                paper_outliers=tuple(dict(zip(s.outliers, s.paper_outliers)).get(o, o) for o in wanted))
            for s in setups
        ]
    return setups


# ------------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Options:
    """The parameters shared by notebooks 02–09, parsed and validated."""

    notebook: str
    profile: str
    scale: str
    methods: tuple[str, ...]
    setups: list[Setup]
    corruptions: tuple[str, ...]
    seeds: tuple[int, ...]
    severity: int
    outlier_ratio: float


def _options(notebook: str, profile: str, data_root: str, methods_text: str, default_methods: Sequence[str],
             datasets: str, outlier_sets: str, corruptions: str, seeds: str, severity: int | str,
             outlier_ratio: float | str) -> Options:
    check_common(profile, "cpu", severity, outlier_ratio)
    scale = scale_of(profile, data_root)
    chosen = parse_methods(methods_text) or tuple(default_methods)
    if corruptions == "all":
        corruptions = ",".join(CORRUPTIONS)
    corr = _names(corruptions, "corruptions", [*CORRUPTIONS, "none"]) or get_profile(profile).corruptions
    return Options(notebook, profile, scale, chosen, _setups(notebook, scale, datasets, outlier_sets),
                   corr, parse_seeds(seeds), int(_number(severity, int)), float(_number(outlier_ratio, float)))


Variant = tuple[str, dict[str, Any], float | None]  # (row label, STAMP overrides, outlier ratio or None)


def _cells(opt: Options, variants: Sequence[Variant]) -> list[Cell]:
    """Every (data set, outlier set, method, variant, seed) cell; a variant's overrides apply
    to STAMP, its ratio (None: the notebook's) to every method."""
    cells = []
    for setup in opt.setups:
        for o, po in zip(setup.outliers, setup.paper_outliers):
            for method in opt.methods:
                for label, overrides, ratio in variants:
                    for seed in opt.seeds:
                        own = overrides if method == "stamp" else {}
                        stand_ins = stand_in_overrides(method, setup.dataset, setup.setting)
                        spec = RunSpec.make(
                            method, overrides={**stand_ins, **own}, dataset=setup.dataset,
                            outliers=o, corruptions=opt.corruptions, severity=opt.severity,
                            outlier_ratio=0.0 if o == data.CLOSED_SET else (opt.outlier_ratio if ratio is None else ratio),
                            seed=seed, profile=opt.profile, setting=setup.setting,
                        )
                        cells.append(Cell(spec, label, setup.paper_dataset, po))
    return cells


def _plan(opt: Options, variants: Sequence[Variant] = (("", {}, None),), notes: Sequence[str] = ()) -> Plan:
    return Plan(opt.notebook, opt.scale, tuple(_cells(opt, variants)), _PAPER_TABLES[opt.notebook], tuple(notes))


#: The default methods of the method tables (the paper's in its row order, then the newer
#: methods). A module constant because the planning functions' ``methods`` parameter shadows the
#: package name.
TABLE_ORDER = methods.TABLE_ORDER


def _method_table(notebook: str) -> Callable[..., Plan]:
    def make(profile: str = "quick", data_root: str = "", methods: str = "", datasets: str = "",
             outlier_sets: str = "", corruptions: str = "", seeds: str = "0", severity: int = 5,
             outlier_ratio: float = 0.2, **_: Any) -> Plan:
        opt = _options(notebook, profile, data_root, methods, TABLE_ORDER, datasets, outlier_sets,
                       corruptions, seeds, severity, outlier_ratio)
        return _plan(opt)

    make.__name__ = f"plan_{notebook}"
    return make



def ablation_label(sam: bool, lr_decay: bool, memory: bool, weighting: bool) -> str:
    """Table 5 row label, e.g. ``sam=1,lr_decay=1,memory=0,weighting=adaptive``."""
    return (f"sam={int(sam)},lr_decay={int(lr_decay)},memory={int(memory)},"
            f"weighting={'adaptive' if weighting else 'none'}")


def plan_ablation(profile: str = "quick", data_root: str = "", datasets: str = "", outlier_sets: str = "",
                  corruptions: str = "", seeds: str = "0", severity: int = 5, outlier_ratio: float = 0.2,
                  **_: Any) -> Plan:
    """Table 5: STAMP with SAM, step-size decay, the memory and self-weighting switched on and
    off (stamp.md ablation switches; memory off = entropy minimisation on the current batch)."""
    opt = _options("06_table5_ablation", profile, data_root, "", ("stamp",), datasets, outlier_sets,
                   corruptions, seeds, severity, outlier_ratio)
    variants = []
    for sam, decay, memory, weighting in ABLATION_ROWS:
        overrides: dict[str, Any] = {}
        if not sam:
            overrides["sam"] = False
        if not decay:
            overrides["lr_decay"] = False
        if not memory:
            overrides["memory"] = False
        if not weighting:
            overrides["weighting"] = "none"
        variants.append((ablation_label(sam, decay, memory, weighting), overrides, None))
    return _plan(opt, variants)


def plan_weight_strategies(profile: str = "quick", data_root: str = "", datasets: str = "",
                           outlier_sets: str = "", corruptions: str = "", seeds: str = "0", severity: int = 5,
                           outlier_ratio: float = 0.2, weightings: str = ",".join(WEIGHT_STRATEGIES),
                           **_: Any) -> Plan:
    """Fig. 3: adaptive self-weights (with gradient) vs static (detached) vs EATA's exp(H_thr − H)."""
    opt = _options("07_fig_weight_strategies", profile, data_root, "", ("stamp",), datasets, outlier_sets,
                   corruptions, seeds, severity, outlier_ratio)
    chosen = _names(weightings, "weightings", WEIGHT_STRATEGIES) or WEIGHT_STRATEGIES
    variants = [(f"weighting={w}", {} if w == "adaptive" else {"weighting": w}, None) for w in chosen]
    return _plan(opt, variants)


def plan_outlier_ratio(profile: str = "quick", data_root: str = "", methods: str = "", datasets: str = "",
                       outlier_sets: str = "", corruptions: str = "", seeds: str = "0", severity: int = 5,
                       ratios: str = "0.05,0.1,0.2,1/3,0.5", **_: Any) -> Plan:
    """Table 6: STAMP's H-score as the outlier proportion outliers/(ID + outliers) varies."""
    opt = _options("08_table6_outlier_ratio", profile, data_root, methods, ("stamp",), datasets, outlier_sets,
                   corruptions, seeds, severity, 0.2)
    return _plan(opt, [(ratio_label(r), {}, r) for r in parse_ratios(ratios)])


def plan_augmentation_averaging(profile: str = "quick", data_root: str = "", datasets: str = "",
                                outlier_sets: str = "", corruptions: str = "", seeds: str = "0",
                                severity: int = 5, outlier_ratio: float = 0.2, num_views: str = "16,1",
                                **_: Any) -> Plan:
    """Fig. 4 (appendix): STAMP with K = 16 averaged views vs K = 1 (no averaging)."""
    opt = _options("09_fig_augmentation_averaging", profile, data_root, "", ("stamp",), datasets,
                   outlier_sets, corruptions, seeds, severity, outlier_ratio)
    counts = tuple(int(k) for k in _names(num_views, "num_views"))
    if not counts or any(k < 1 for k in counts):
        raise ValueError(f"num_views: give view counts >= 1 such as '16,1', got {num_views!r}")
    return _plan(opt, [(f"K={k}", {} if k == 16 else {"num_views": k}, None) for k in counts])


def plan_walkthrough(profile: str = "quick", methods_to_compare: str = "source,bn_stats,tent,stamp",
                     corruption: str = "gaussian_noise", outliers: str = "noise", seed: int | str = 0,
                     **_: Any) -> Plan:
    """The walkthrough's small comparison: each method on the digits benchmark, on the
    profile's corruptions and the one studied in detail (first, if the profile lacks it)."""
    prof = get_profile(profile)
    corruptions = prof.corruptions if corruption in prof.corruptions else (corruption, *prof.corruptions)
    chosen = parse_methods(methods_to_compare)
    if not chosen:
        raise ValueError(f"methods_to_compare: name at least one method; valid: {', '.join(methods.available())}")
    seed = validation.check_seed(_number(seed, int))
    specs = [RunSpec(method=m, dataset="digits", outliers=outliers, corruptions=corruptions, seed=seed,
                     profile=profile) for m in chosen]
    return Plan("00_walkthrough", "builtin", tuple(Cell(s) for s in specs))


def traced_methods() -> tuple[str, ...]:
    """Notebook 10's default rows: Tent as the reference, then the table's methods that report
    per-batch traces (filter, memory, loss), as each says by its ``reports_trace``."""
    return ("tent", *(m for m in methods.TABLE_ORDER if methods.method_class(m).reports_trace))


STREAM_KINDS = "iid,continual,dirichlet:0.1"


def parse_stream_kinds(text: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """``iid``, ``continual``, ``dirichlet:δ``, ``burst:L`` (comma-separated; ``=`` works too,
    but papermill cannot read it in a parameters cell) → (label, the RunSpec fields)."""
    kinds = []
    for item in _names(text, "streams"):
        name, _, value = item.replace("=", ":").partition(":")
        if name == "iid" and not value:
            kinds.append((item, {}))
        elif name == "continual" and not value:
            kinds.append((item, {"continual": True}))
        elif name == "dirichlet" and value:
            kinds.append((item, {"dirichlet": validation.check_dirichlet(float(value))}))
        elif name == "burst" and value:
            kinds.append((item, {"outlier_burst": validation.check_outlier_burst(int(value))}))
        else:
            raise ValueError(f"streams: unknown stream {item!r}; give iid, continual, dirichlet:δ or burst:L")
    if not kinds:
        raise ValueError("streams: name at least one stream, e.g. 'iid,continual,dirichlet:0.1'")
    return tuple(kinds)


def plan_inside_the_stream(profile: str = "quick", data_root: str = "", methods: str = "", datasets: str = "",
                           outlier_sets: str = "", corruptions: str = "", seeds: str = "0", severity: int = 5,
                           outlier_ratio: float = 0.2, streams: str = STREAM_KINDS, **_: Any) -> Plan:
    """Notebook 10: the traced methods on the ordinary stream and on harder ones (continual,
    non-i.i.d. labels, outlier bursts); the variant is the stream kind. The i.i.d. cells are
    those of notebook 02, computed once for both."""
    opt = _options("10_inside_the_stream", profile, data_root, methods, traced_methods(), datasets, outlier_sets,
                   corruptions, seeds, severity, outlier_ratio)
    cells = []
    for cell in _cells(opt, (("", {}, None),)):
        for label, fields in parse_stream_kinds(streams):
            cells.append(dataclasses.replace(cell, spec=cell.spec.with_(**fields), variant=label))
    return Plan(opt.notebook, opt.scale, tuple(cells), (), ())


EXPERIMENTS: dict[str, Callable[..., Plan]] = {
    "00_walkthrough": plan_walkthrough,
    **{nb: _method_table(nb) for nb in ("02_table1_cifar_outlier_aware", "03_table2_imagenet_outlier_aware",
                                        "04_table3_class_split", "05_table4_closed_set")},
    "06_table5_ablation": plan_ablation,
    "07_fig_weight_strategies": plan_weight_strategies,
    "08_table6_outlier_ratio": plan_outlier_ratio,
    "09_fig_augmentation_averaging": plan_augmentation_averaging,
    "10_inside_the_stream": plan_inside_the_stream,
}


def plan(notebook: str, **params: Any) -> Plan:
    """The cells of ``notebook`` for its parameters (unknown parameters such as ``device`` are
    ignored, so a notebook can pass its whole parameters cell)."""
    validation.check_choice("notebook", notebook, EXPERIMENTS)
    return EXPERIMENTS[notebook](**params)


def resolve_notebooks(names: Sequence[str]) -> list[str]:
    """Notebook names (or prefixes such as ``02``) → the planned notebooks, in order."""
    chosen: list[str] = []
    unknown = []
    for name in names:
        hits = [nb for nb in EXPERIMENTS if nb == name or nb.startswith(name)]
        if not hits:
            unknown.append(name)
        chosen.extend(nb for nb in hits if nb not in chosen)
    if unknown:
        raise ValueError(f"no planned notebook matches {unknown}; known: {', '.join(EXPERIMENTS)}")
    return [nb for nb in EXPERIMENTS if nb in chosen]


def check_parameter_names(notebooks: Sequence[str], params: Iterable[str], flags: Iterable[str] = ()) -> None:
    """Refuse parameters no chosen notebook takes: a typo would silently plan the default grid.
    ``flags``: parameters given another way (the command line's ``--profile``), refused too."""
    accepted = {p for nb in notebooks for p in inspect.signature(EXPERIMENTS[nb]).parameters} - {"_", *flags}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise ValueError(f"--param {unknown}: no chosen notebook takes it; they take {', '.join(sorted(accepted))}")


def cells_by_notebook(notebooks: str | Sequence[str], **params: Any) -> dict[str, list[RunSpec]]:
    """Each notebook's distinct RunSpecs for ``params`` (a notebook's ``parameters`` cell)."""
    names = resolve_notebooks([notebooks] if isinstance(notebooks, str) else list(notebooks))
    return {nb: plan(nb, **params).specs for nb in names}


def cells(notebooks: str | Sequence[str], **params: Any) -> list[RunSpec]:
    """The distinct RunSpecs of one or several notebooks, each once: cells shared between
    notebooks (STAMP's default row is in Tables 1, 5, 6 and both figures) are computed once."""
    return distinct(s for specs in cells_by_notebook(notebooks, **params).values() for s in specs)


def profiles() -> list[str]:
    return list(PROFILES)


# ------------------------------------------------------------------------------- computing


def compute(
    the_plan: Plan,
    device: str = "cpu",
    compute_missing: bool = True,
    store: ResultsStore | None = None,
    progress: bool = True,
    metrics: Sequence[str] = (),
    traces: bool = False,
) -> dict[str, dict[str, Any]]:
    """Records of the plan's specs by spec key: read from the results store, and the missing
    ones computed here (``compute_missing``) or left out (then the tables show what exists).
    A stored record that lacks one of ``metrics`` (a metric newer than the record) is re-scored
    from its per-sample outputs where it has them (no method runs). With ``traces``, a stored
    record of a method that reports traces but made before traces existed is computed again."""
    store = store if store is not None else ResultsStore()
    records = _compute(the_plan, device, compute_missing, store, progress)
    if traces and compute_missing:
        for spec in the_plan.specs:
            record = records.get(spec.key())
            if record is not None and "trace" not in record and methods.method_class(spec.method).reports_trace:
                records[spec.key()] = run(spec, store=store, device=device, force=True)
    wanted = check_metrics(metrics) if metrics else ()
    stale = [r for r in records.values()
             if any(name not in row for row in r["per_corruption"].values() for name in wanted)]
    for record in store.rescored(stale, wanted):
        records[record["key"]] = record
    return records


def parse_metrics(text: str | Sequence[str]) -> tuple[str, ...]:
    """A notebook's ``metrics`` parameter: comma-separated names of
    :data:`stamplib.evaluation.metrics.METRICS`; empty means the paper's ACC, AUROC and H."""
    names = _names(text, "metric") if text else ()
    return check_metrics(names) if names else PAPER_METRICS


def _compute(the_plan: Plan, device: str, compute_missing: bool, store: ResultsStore,
             progress: bool) -> dict[str, dict[str, Any]]:
    state = store.status(the_plan.specs)
    records: dict[str, dict[str, Any]] = {s.key(): r for s in state.done if (r := store.get(s)) is not None}
    missing = [s for s in the_plan.specs if s.key() not in records and s not in state.running]
    if state.running:
        print(f"{len(state.running)} cells are being computed by grid jobs right now: they are left to "
              "them (re-run this cell later to see them)")
    if missing and not compute_missing:
        print(f"{len(missing)} of {len(the_plan.specs)} cells are not in the results store and "
              "compute_missing is off: the tables show the others")
        return records
    for spec in tqdm(missing, desc=f"{the_plan.notebook}: cells", disable=not progress or not missing):
        records[spec.key()] = run(spec, store=store, device=device)
    return records
