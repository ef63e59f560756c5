"""The parameters the planned notebooks share, parsed and checked once where they enter.

A notebook's ``parameters`` cell (or ``--param`` on the command line, or a keyword of
:func:`stamplib.experiments.registry.plan`) gives them as text or numbers; :meth:`NotebookParameters.parse`
turns them into one frozen, typed object, and every error names the parameter. The planners, the
executor and the report read that object and check nothing again. A notebook's own parameters
(notebook 07's ``weightings``, 08's ``ratios``, …) are parsed by its planner.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stamplib import data, methods, paths, validation
from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation.metrics import PAPER_METRICS, check_metrics
from stamplib.evaluation.profiles import get_profile


def names(text: str | Sequence[Any], what: str, valid: Iterable[str] | None = None) -> tuple[str, ...]:
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


def number(value: Any, kind: type) -> Any:
    """A parameter as int/float: ``--param`` hands strings such as ``"3"`` through."""
    try:
        return kind(value) if isinstance(value, str) else value
    except ValueError:
        return value  # refused by the check that follows, with its own message


def parse_methods(text: str | Sequence[str]) -> tuple[str, ...]:
    """Comma-separated method names, each a registered method or ``package.module:Class``."""
    chosen = names(text, "methods")
    names([n for n in chosen if ":" not in n], "methods", methods.available())
    for name in chosen:
        methods.method_class(name)  # an outside method that cannot be loaded is refused here
    return chosen


def parse_seeds(text: str | Sequence[int]) -> tuple[int, ...]:
    """Comma-separated seeds; empty (``""``) means the notebook's own: the profile's headline
    seeds for the headline tables on the built-in benchmark, else seed 0
    (:meth:`stamplib.experiments.plans.Experiment.default_seeds`)."""
    items = names(text if isinstance(text, (str, int)) else [str(s) for s in text], "seeds")
    try:
        seeds = tuple(int(s) for s in items)
    except ValueError:
        raise ValueError(f"seeds: expected comma-separated integers such as '0,1,2', got {text!r}") from None
    if any(s < 0 for s in seeds):
        raise ValueError(f"seeds: give non-negative integers (or nothing for the notebook's own), got {text!r}")
    return tuple(dict.fromkeys(seeds))


def parse_networks(text: str | Sequence[int]) -> tuple[int, ...]:
    """Comma-separated source networks (their training seeds); empty means network 0, the data
    set's registered one. Which networks a data set has is the RunSpec's to say
    (:func:`stamplib.evaluation.spec.check_network`)."""
    items = names(text if isinstance(text, (str, int)) else [str(n) for n in text], "networks")
    try:
        return tuple(dict.fromkeys(int(n) for n in items)) or (0,)
    except ValueError:
        raise ValueError(f"networks: expected comma-separated integers such as '0,1', got {text!r}") from None


def parse_metrics(text: str | Sequence[str]) -> tuple[str, ...]:
    """Comma-separated names of :data:`stamplib.evaluation.metrics.METRICS`; empty means the
    paper's ACC, AUROC and H."""
    chosen = names(text, "metric") if text else ()
    return check_metrics(chosen) if chosen else PAPER_METRICS


def parse_corruptions(text: str | Sequence[str], profile: str) -> tuple[str, ...]:
    """Comma-separated corruptions, ``all`` for the 15, empty for the profile's."""
    if text == "all":
        return CORRUPTIONS
    return names(text, "corruptions", [*CORRUPTIONS, "none"]) or get_profile(profile).corruptions


def _check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


@dataclass(frozen=True)
class NotebookParameters:
    """What a planned notebook's parameters cell says, parsed: which cells (everything but the
    last three fields), and how to compute and show them."""

    profile: str
    data_root: str
    scale: str  # builtin | real | paper | stream (SCALES): the data the cells run on
    methods: tuple[str, ...]  # empty: the notebook's own rows
    datasets: tuple[str, ...]  # empty: the notebook's data sets at this scale
    outlier_sets: tuple[str, ...]  # empty: those of each data set
    corruptions: tuple[str, ...]
    seeds: tuple[int, ...]  # empty: the notebook's own (Experiment.default_seeds)
    networks: tuple[int, ...]  # the source networks (RunSpec.network); (0,) unless given
    severity: int
    outlier_ratio: float
    device: str
    compute_missing: bool
    metrics: tuple[str, ...]  # the table's metrics

    @classmethod
    def parse(
        cls, profile: str = "quick", data_root: str = "", scale: str = "", methods: str | Sequence[str] = "",
        datasets: str | Sequence[str] = "", outlier_sets: str | Sequence[str] = "",
        corruptions: str | Sequence[str] = "", seeds: str | Sequence[int] = "", networks: str | Sequence[int] = "",
        severity: int | str = 5,
        outlier_ratio: float | str = 0.2, device: str = "cpu", compute_missing: bool = True,
        metrics: str | Sequence[str] = "", **_: Any,
    ) -> NotebookParameters:
        """The parameters from text or values; other names (a notebook's own) are ignored.
        ``scale`` "" is the profile's with or without a data root (:func:`scale_of`); naming it
        plans real images without a data root where nothing is read (the reference run's
        records are compared and reported without their data)."""
        get_profile(profile)
        return cls(
            profile=profile,
            data_root=str(data_root or ""),
            scale=check_scale(scale, profile) if scale else scale_of(profile, data_root),
            methods=parse_methods(methods),
            datasets=names(datasets, "datasets", data.DATASETS),
            outlier_sets=names(outlier_sets, "outlier_sets", [*data.OUTLIER_SETS, data.HELDOUT, data.CLOSED_SET]),
            corruptions=parse_corruptions(corruptions, profile),
            seeds=parse_seeds(seeds),
            networks=parse_networks(networks),
            # a cell's values are checked once, by the RunSpec each plan makes of them
            severity=number(severity, int),
            outlier_ratio=number(outlier_ratio, float),
            device=paths.parse_device(device),
            compute_missing=_check_flag("compute_missing", compute_missing),
            metrics=parse_metrics(metrics),
        )

    @classmethod
    def from_notebook(cls, namespace: Mapping[str, Any]) -> NotebookParameters:
        """The parameters a notebook defines, read from its namespace (``globals()``) after
        papermill's injected cell: one call, however many parameters the cell has."""
        given = {f.name: namespace[f.name] for f in dataclasses.fields(cls) if f.name in namespace}
        # A module of a parameter's name (notebook 00 imports evaluation.metrics) is no parameter.
        return cls.parse(**{k: v for k, v in given.items() if not isinstance(v, types.ModuleType)})

    def run_context(self) -> paths.RunContext:
        """The notebook's run context (data root, results, figures, device), built at its edge.
        Its data root and device are checked only where cells may be computed: a notebook that
        reads stored records alone (``compute_missing`` off, as the reference run renders its
        committed records on a machine without the data) reads no data."""
        return paths.RunContext.build(self.data_root, device=self.device, check=self.compute_missing)


#: The data a plan's cells run on: the profile's built-in benchmark, real images of a data root
#: at reduced size, or the paper's data sets (the full profile).
SCALES = ("builtin", "real", "paper", "stream")


def scale_of(profile: str, data_root: str | None) -> str:
    """``paper`` for the full profile, else ``real`` with a data root, else ``builtin``."""
    if profile == "full":
        return "paper"
    return "real" if data_root else "builtin"


def check_scale(scale: str, profile: str) -> str:
    """``scale`` where ``profile`` plans it: the full profile plans the paper's data, the others
    the built-in benchmark or real images."""
    allowed = {"full": ("paper",), "stream": ("stream",)}.get(profile, ("builtin", "real"))
    return validation.check_choice(f"scale (profile {profile})", scale, allowed)


#: The parameters that choose cells, as a grid's ``--param`` may give them; the others say
#: how a notebook computes and shows its cells.
PLANNING = ("profile", "data_root", "methods", "datasets", "outlier_sets", "corruptions", "seeds", "networks",
            "severity", "outlier_ratio")
