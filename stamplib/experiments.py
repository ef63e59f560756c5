"""What every notebook computes: its parameters → the cells (RunSpecs) of its table or figure.

One planning function per notebook, registered in :data:`EXPERIMENTS`. The notebook calls
:func:`plan` with its ``parameters`` cell, then :func:`compute` (finished cells come from the
results store); ``stamplib.grid`` expands the same plans for a cluster. A notebook and a grid
therefore share every cell, and cells shared between notebooks (STAMP's default row appears in
Tables 1, 5, 6 and both figures) are computed once.

Scales (chosen by the profile and ``data_root``):

* ``builtin`` — ``smoke``/``quick`` without ``data_root``: the built-in digits benchmark, which
  stands in for the paper's datasets (digits 8–9 stand in for the held-out classes, the Noise
  set for every outlier set);
* ``real`` — ``smoke``/``quick`` with ``data_root``: the JPEG CIFAR-10 of shared/data (Noise
  outliers, and the 8:2 class split), at reduced size;
* ``paper`` — ``full``: the paper's data sets, 15 corruptions, every sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from stamplib.evaluation.spec import RunSpec
from stamplib.profiles import ALL_CORRUPTIONS, PROFILES, get_profile

#: Registry names in the paper's row order of Tables 1–3.
PAPER_METHODS = ("source", "bn_stats", "tent", "eata", "sar", "cotta", "rotta", "sotta", "owttt", "stamp")

#: Newer open-set methods (newer_methods.md), extra rows of Tables 1–4 without paper numbers.
NEWER_METHODS = ("unient", "unient_plus", "ostta", "tent_come")

#: Default rows of notebooks 02–05: the paper's ten, then the newer methods.
TABLE_METHODS = PAPER_METHODS + NEWER_METHODS

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
PAPER_RATIOS = (0.05, 0.1, 0.2, 1 / 3, 0.5)


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
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def specs(self) -> list[RunSpec]:
        """The distinct RunSpecs, in table order."""
        seen: dict[str, RunSpec] = {}
        for cell in self.cells:
            seen.setdefault(cell.spec.key(), cell.spec)
        return list(seen.values())


# ------------------------------------------------------------------------------- parameters


def _names(text: str | Sequence[str], what: str, valid: Iterable[str] | None = None) -> tuple[str, ...]:
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


def check_common(profile: str, device: str, severity: int, outlier_ratio: float) -> None:
    """Validate the parameters every notebook has; each error names the parameter."""
    get_profile(profile)
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("device='cuda' but torch sees no GPU; use device='cpu'")
    if not 1 <= int(severity) <= 5:
        raise ValueError(f"severity must be an integer in 1..5, got {severity}")
    if not 0.0 <= float(outlier_ratio) < 1.0:
        raise ValueError(f"outlier_ratio must lie in [0, 1), got {outlier_ratio}")


def scale_of(profile: str, data_root: str = "") -> str:
    get_profile(profile)
    if profile == "full":
        return "paper"
    return "real" if data_root else "builtin"


# ------------------------------------------------------------------------------- defaults

# (ID data set, its outlier sets, the paper's data set it stands for, the paper's outlier set
# each of ours stands for, hyperparameter setting).
_Setup = tuple[str, tuple[str, ...], str, tuple[str, ...], str]

_DEFAULTS: dict[str, dict[str, list[_Setup]]] = {
    "02_table1_cifar_outlier_aware": {
        "paper": [
            ("cifar10_c", ("noise", "svhn", "lsun", "tiny"), "cifar10_c", ("noise", "svhn", "lsun", "tiny"), ""),
            ("cifar100_c", ("noise", "svhn", "lsun", "tiny"), "cifar100_c", ("noise", "svhn", "lsun", "tiny"), ""),
        ],
        "real": [("cifar10_jpeg", ("noise",), "cifar10_c", ("noise",), "")],
        "builtin": [("digits", ("noise",), "cifar10_c", ("noise",), "")],
    },
    "03_table2_imagenet_outlier_aware": {
        "paper": [("imagenet_c", ("places365", "textures"), "imagenet_c", ("places365", "textures"), "")],
        # No ImageNet here: the ImageNet hyperparameters (crop+flip views, no consistency
        # filter, T = 750, …) run on the small data set instead, so the code path is exercised.
        "real": [("cifar10_jpeg", ("noise",), "imagenet_c", ("places365",), "imagenet_c")],
        "builtin": [("digits", ("noise",), "imagenet_c", ("places365",), "imagenet_c")],
    },
    "04_table3_class_split": {
        "paper": [
            ("cifar10_c_8_2", ("heldout_classes",), "cifar10_c_8_2", ("heldout_classes",), ""),
            ("cifar100_c_80_20", ("heldout_classes",), "cifar100_c_80_20", ("heldout_classes",), ""),
        ],
        "real": [("cifar10_jpeg_8_2", ("heldout_classes",), "cifar10_c_8_2", ("heldout_classes",), "")],
        "builtin": [("digits", ("digits_heldout",), "cifar10_c_8_2", ("heldout_classes",), "")],
    },
    "05_table4_closed_set": {
        "paper": [("cifar10_c", ("none",), "cifar10_c", ("none",), ""), ("cifar100_c", ("none",), "cifar100_c", ("none",), "")],
        "real": [("cifar10_jpeg", ("none",), "cifar10_c", ("none",), "")],
        "builtin": [("digits", ("none",), "cifar10_c", ("none",), "")],
    },
    "06_table5_ablation": {
        "paper": [("cifar100_c", ("svhn",), "cifar100_c", ("svhn",), "")],
        "real": [("cifar10_jpeg", ("noise",), "cifar100_c", ("svhn",), "")],
        "builtin": [("digits", ("noise",), "cifar100_c", ("svhn",), "")],
    },
    "07_fig_weight_strategies": {
        "paper": [("cifar100_c", ("svhn",), "cifar100_c", ("svhn",), "")],
        "real": [("cifar10_jpeg", ("noise",), "cifar100_c", ("svhn",), "")],
        "builtin": [("digits", ("noise",), "cifar100_c", ("svhn",), "")],
    },
    "08_table6_outlier_ratio": {
        "paper": [("cifar100_c", ("svhn", "lsun", "tiny"), "cifar100_c", ("svhn", "lsun", "tiny"), "")],
        "real": [("cifar10_jpeg", ("noise",), "cifar100_c", ("svhn",), "")],
        "builtin": [("digits", ("noise",), "cifar100_c", ("svhn",), "")],
    },
    "09_fig_augmentation_averaging": {
        "paper": [("cifar10_c", ("noise", "svhn", "lsun", "tiny"), "cifar10_c", ("noise", "svhn", "lsun", "tiny"), "")],
        "real": [("cifar10_jpeg", ("noise",), "cifar10_c", ("noise",), "")],
        "builtin": [("digits", ("noise",), "cifar10_c", ("noise",), "")],
    },
}

_PAPER_TABLES = {
    "02_table1_cifar_outlier_aware": ("1a", "1b"),
    "03_table2_imagenet_outlier_aware": ("2",),
    "04_table3_class_split": ("3",),
    "05_table4_closed_set": ("4a", "4b"),
    "06_table5_ablation": ("5",),
    "07_fig_weight_strategies": (),
    "08_table6_outlier_ratio": ("6",),
    "09_fig_augmentation_averaging": (),
}


def _setups(notebook: str, scale: str, datasets: str, outlier_sets: str) -> list[_Setup]:
    """The notebook's (data set, outlier sets) for this scale, narrowed or replaced by the
    ``datasets``/``outlier_sets`` parameters."""
    from stamplib import data

    defaults = _DEFAULTS[notebook][scale]
    chosen = _names(datasets, "datasets", list(data.ID_SETS))
    if chosen:
        known = {d[0]: d for d in _DEFAULTS[notebook]["paper"] + defaults}
        setups = [known.get(ds, (ds, defaults[0][1], "", ("",) * len(defaults[0][1]), defaults[0][4])) for ds in chosen]
    else:
        setups = list(defaults)
    wanted = _names(outlier_sets, "outlier_sets", [*data.OUTLIER_SETS, data.HELDOUT, "none"])
    if wanted:
        out = []
        for ds, outs, pds, pouts, setting in setups:
            paper_of = dict(zip(outs, pouts))
            out.append((ds, wanted, pds, tuple(paper_of.get(o, o) for o in wanted), setting))
        setups = out
    return setups


# ------------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Options:
    """The parameters shared by notebooks 02–09, parsed and validated."""

    notebook: str
    profile: str
    scale: str
    methods: tuple[str, ...]
    setups: list[_Setup]
    corruptions: tuple[str, ...]
    seeds: tuple[int, ...]
    severity: int
    outlier_ratio: float


def _options(notebook: str, profile: str, data_root: str, methods: str, default_methods: Sequence[str],
             datasets: str, outlier_sets: str, corruptions: str, seeds: str, severity: int,
             outlier_ratio: float) -> Options:
    from stamplib import methods as registry

    check_common(profile, "cpu", severity, outlier_ratio)
    scale = scale_of(profile, data_root)
    chosen = _names(methods, "methods", registry.available()) or tuple(default_methods)
    if corruptions == "all":
        corruptions = ",".join(ALL_CORRUPTIONS)
    corr = _names(corruptions, "corruptions", [*ALL_CORRUPTIONS, "none"]) or get_profile(profile).corruptions
    return Options(notebook, profile, scale, chosen, _setups(notebook, scale, datasets, outlier_sets),
                   corr, parse_seeds(seeds), int(severity), float(outlier_ratio))


def _stand_in_overrides(method: str, setting: str, dataset: str) -> dict[str, Any]:
    """Overrides a method needs to run another data set's hyperparameter setting here: the
    ImageNet quirk of clipping *normalised* inputs (CoTTA, RoTTA; baselines.md §4) has no
    meaning for a model that takes raw [0, 1] images, so it is switched off."""
    import dataclasses

    from stamplib import methods as registry

    if not setting or setting == dataset:
        return {}
    fields = {f.name for f in dataclasses.fields(registry.resolve_config(method, setting))}
    return {"clip_normalized_inputs": False} if "clip_normalized_inputs" in fields else {}


def _cells(opt: Options, variants: Sequence[tuple[str, dict[str, Any], float | None]]) -> list[Cell]:
    """Every (data set, outlier set, method, variant, seed) cell; a variant is (label,
    hyperparameter overrides, outlier ratio or None for the notebook's)."""
    cells = []
    for ds, outs, pds, pouts, setting in opt.setups:
        for o, po in zip(outs, pouts):
            for method in opt.methods:
                for label, overrides, ratio in variants:
                    for seed in opt.seeds:
                        own = overrides if method == "stamp" else {}
                        spec = RunSpec.make(
                            method, overrides={**_stand_in_overrides(method, setting, ds), **own}, dataset=ds,
                            outliers=o,
                            corruptions=opt.corruptions, severity=opt.severity,
                            outlier_ratio=0.0 if o == "none" else (opt.outlier_ratio if ratio is None else ratio),
                            seed=seed, profile=opt.profile, setting=setting,
                        )
                        cells.append(Cell(spec, label, pds, po))
    return cells


def _plan(opt: Options, variants: Sequence[tuple[str, dict[str, Any], float | None]] = (("", {}, None),),
          notes: Sequence[str] = ()) -> Plan:
    return Plan(opt.notebook, opt.scale, tuple(_cells(opt, variants)), _PAPER_TABLES[opt.notebook], tuple(notes))


def _method_table(notebook: str) -> Callable[..., Plan]:
    def make(profile: str = "quick", data_root: str = "", methods: str = "", datasets: str = "",
             outlier_sets: str = "", corruptions: str = "", seeds: str = "0", severity: int = 5,
             outlier_ratio: float = 0.2, **_: Any) -> Plan:
        opt = _options(notebook, profile, data_root, methods, TABLE_METHODS, datasets, outlier_sets,
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


EXPERIMENTS: dict[str, Callable[..., Plan]] = {
    "02_table1_cifar_outlier_aware": _method_table("02_table1_cifar_outlier_aware"),
    "03_table2_imagenet_outlier_aware": _method_table("03_table2_imagenet_outlier_aware"),
    "04_table3_class_split": _method_table("04_table3_class_split"),
    "05_table4_closed_set": _method_table("05_table4_closed_set"),
    "06_table5_ablation": plan_ablation,
    "07_fig_weight_strategies": plan_weight_strategies,
    "08_table6_outlier_ratio": plan_outlier_ratio,
    "09_fig_augmentation_averaging": plan_augmentation_averaging,
}


def plan(notebook: str, **params: Any) -> Plan:
    """The cells of ``notebook`` for its parameters (unknown parameters such as ``device`` are
    ignored, so a notebook can pass its whole parameters cell)."""
    if notebook not in EXPERIMENTS:
        raise ValueError(f"no experiment for notebook {notebook!r}; known: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[notebook](**params)


# ------------------------------------------------------------------------------- computing


def compute(
    the_plan: Plan,
    device: str = "cpu",
    compute_missing: bool = True,
    store: Any = None,
    progress: bool = True,
) -> dict[str, dict[str, Any]]:
    """Records of the plan's specs by spec key: read from the results store, and the missing
    ones computed here (``compute_missing``) or left out (then the tables show what exists)."""
    from tqdm.auto import tqdm

    from stamplib import grid
    from stamplib.evaluation.runner import run
    from stamplib.evaluation.store import ResultsStore

    store = store if store is not None else ResultsStore()
    state = grid.status(the_plan.specs, store)
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


def results(the_plan: Plan, records: dict[str, dict[str, Any]], per_corruption: bool = False):
    """Tidy frame of the plan's cells: one row per (cell, seed) with the mean over corruptions
    (``corruption == "mean"``) and, with ``per_corruption``, one more per corruption; columns
    ``acc``, ``auroc``, ``h`` (percent), ``collapsed`` and the paper's coordinates."""
    import pandas as pd

    rows = []
    for cell in the_plan.cells:
        record = records.get(cell.spec.key())
        if record is None:
            continue
        s = cell.spec
        base = {"dataset": s.dataset, "outliers": s.outliers, "method": s.method, "variant": cell.variant,
                "seed": s.seed, "paper_dataset": cell.paper_dataset, "paper_outliers": cell.paper_outliers,
                "outlier_ratio": s.outlier_ratio}
        if per_corruption:
            for corruption, m in record["per_corruption"].items():
                rows.append({**base, "corruption": corruption, "acc": m["acc"], "auroc": m["auroc"], "h": m["h"],
                             "collapsed": bool(m["collapsed"]), "seconds": m.get("seconds", math.nan)})
        mean = record["mean"]
        rows.append({**base, "corruption": "mean", "acc": mean["acc"], "auroc": mean["auroc"], "h": mean["h"],
                     "collapsed": bool(record["collapsed"]), "seconds": record.get("seconds", math.nan)})
    return pd.DataFrame(rows)


def over_seeds(frame):
    """Mean over seeds, with ``*_std`` columns (NaN for a single seed) and ``n_seeds``."""
    keys = ["dataset", "outliers", "method", "variant", "paper_dataset", "paper_outliers", "corruption"]
    if frame.empty:
        return frame
    grouped = frame.groupby(keys, sort=False, dropna=False)
    out = grouped[["acc", "auroc", "h"]].mean()
    std = grouped[["acc", "auroc", "h"]].std(ddof=0).add_suffix("_std")
    out = out.join(std)
    out["collapsed"] = grouped["collapsed"].any()
    out["n_seeds"] = grouped["seed"].nunique()
    single = out["n_seeds"] < 2
    out.loc[single, ["acc_std", "auroc_std", "h_std"]] = math.nan
    return out.reset_index()


def profiles() -> list[str]:
    return list(PROFILES)
