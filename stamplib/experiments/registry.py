"""The registry of experiments: every notebook's :class:`Experiment`, under its notebook name.

The paper's experiments and the course's register themselves when :mod:`stamplib.experiments`
is imported (:mod:`~stamplib.experiments.plans`, :mod:`~stamplib.experiments.course`). An
installed package adds its own through the entry-point group :data:`ENTRY_POINT_GROUP`::

    [project.entry-points."stamplib.experiments"]
    my_experiments = "my_package.my_experiments"

where the module registers with :func:`register` when imported (or the entry point names an
:class:`Experiment` object, registered when loaded). Every lookup by name (:func:`experiment`,
:func:`resolve_notebooks`, :func:`registered`) loads the group first, as
:func:`stamplib.methods.available` does for methods. This module imports no experiment, so an
outside module may import it and the planners of :mod:`~stamplib.experiments.plans` without an
import cycle.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stamplib import validation
from stamplib.evaluation.profiles import get_profile
from stamplib.evaluation.spec import RunSpec
from stamplib.experiments.parameters import PLANNING, NotebookParameters

#: Entry-point group through which an installed package adds experiments (notebooks) by name.
ENTRY_POINT_GROUP = "stamplib.experiments"
#: The methods an experiment's variants apply to unless it says otherwise: STAMP's.
STAMP_ONLY = ("stamp",)
_FIELDS = {f.name for f in dataclasses.fields(NotebookParameters)}


@dataclass(frozen=True)
class PlannedCell:
    """One RunSpec of a notebook, with where it sits in the table and what the paper reports
    for the corresponding cell (``paper_*``: the paper's data set / outlier set / row)."""

    spec: RunSpec
    variant: str = ""  # row label beyond the method: ablation flags, ratio, K, weighting
    paper_dataset: str = ""
    paper_outlier_set: str = ""
    # The corruptions of the spec's record that the table reads (empty: all): notebook 13's
    # batch-size axis reads the paper's stream from notebook 02's cell, on its own corruptions.
    corruptions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    experiment: Experiment
    scale: str  # builtin | real | paper
    cells: tuple[PlannedCell, ...]
    notes: tuple[str, ...] = ()
    # The baseline cell over the headline's other seeds (an ablation's or a sweep's default
    # row, which stays at its own seeds): computed with the plan, shown only as the band of the
    # seed spread (:func:`stamplib.report.reproduce.baseline_band`), never as rows of its table.
    band_cells: tuple[PlannedCell, ...] = ()

    @property
    def notebook(self) -> str:
        """The experiment's notebook name (for messages and file names)."""
        return self.experiment.notebook

    @property
    def paper_tables(self) -> tuple[str, ...]:
        """The tables of paper_numbers the experiment reproduces."""
        return self.experiment.paper_tables

    @property
    def specs(self) -> list[RunSpec]:
        """The distinct RunSpecs to compute, in table order (then the band's)."""
        return distinct([cell.spec for cell in (*self.cells, *self.band_cells)])


def distinct(specs: Iterable[RunSpec]) -> list[RunSpec]:
    """``specs`` without repeats (same key), in first-seen order."""
    seen: dict[str, RunSpec] = {}
    for spec in specs:
        seen.setdefault(spec.key(), spec)
    return list(seen.values())


@dataclass(frozen=True)
class Setup:
    """One ID data set of a notebook with its outlier sets, what each stands in for in the
    paper's table, and the hyperparameter set to run it with ("" = the data set's own)."""

    dataset: str
    outlier_sets: tuple[str, ...]
    paper_dataset: str = ""
    paper_outlier_sets: tuple[str, ...] = ()
    hyperparameter_set: str = ""

    @classmethod
    def same(cls, dataset: str, outlier_sets: tuple[str, ...]) -> Setup:
        """The paper's own cell: ours is what the paper ran."""
        return cls(dataset, outlier_sets, dataset, outlier_sets)


@dataclass(frozen=True)
class Experiment:
    """One notebook's experiment, registered once (:func:`register`): everything planning, the
    grid, the reference run, the report and the site know of it.

    ``make(experiment, params, **its own parameters)`` plans its cells; ``setups`` are its data
    sets per scale (``paper``, ``real``, ``builtin``; the profile's digits replace the built-in
    CIFAR-10 in smoke); ``paper_tables`` the tables of the paper's numbers it reproduces;
    ``reads`` the planning parameters it takes (06 always plans STAMP, so not ``methods``);
    ``variant_methods`` the methods its variants' hyperparameter overrides apply to;
    ``averages_outlier_sets``: its table adds an average over the outlier sets (Table 1);
    ``headline``: a headline table (02, 04, 05), run over the profile's headline seeds on the
    built-in benchmark; ``bands``: an ablation or sweep, which stays at its seeds and draws
    the seed spread of its baseline row (:attr:`Plan.band_cells`)."""

    notebook: str
    make: Callable[..., Plan]
    setups: Mapping[str, list[Setup]] = dataclasses.field(default_factory=dict)
    paper_tables: tuple[str, ...] = ()
    reads: tuple[str, ...] = PLANNING
    variant_methods: tuple[str, ...] = STAMP_ONLY
    averages_outlier_sets: bool = False
    headline: bool = False
    bands: bool = False

    @property
    def own(self) -> tuple[str, ...]:
        """Its own parameters, such as 07's ``weightings``, parsed by ``make``."""
        return tuple(inspect.signature(self.make).parameters)[2:]

    @property
    def accepts(self) -> set[str]:
        return {*self.reads, *self.own}

    def headline_seeds(self, params: NotebookParameters) -> tuple[int, ...]:
        """The profile's headline seeds on its built-in benchmark; seed 0 elsewhere (on real data
        and at paper scale a cell costs minutes to hours; a data set named in ``datasets`` that
        is not the profile's benchmark is someone's own experiment)."""
        profile = get_profile(params.profile)
        on_benchmark = all(d.startswith(profile.builtin) for d in params.datasets)
        return profile.headline_seeds if params.scale == "builtin" and on_benchmark else (0,)

    def default_seeds(self, params: NotebookParameters) -> tuple[int, ...]:
        """Its seeds when the ``seeds`` parameter is empty: the headline seeds for a headline
        table, else seed 0."""
        return self.headline_seeds(params) if self.headline else (0,)

    def band_seeds(self, params: NotebookParameters) -> tuple[int, ...]:
        """The seeds of its baseline row's band: the headline seeds for an experiment that draws
        bands, none otherwise."""
        return self.headline_seeds(params) if self.bands else ()

    def plan(self, parsed: NotebookParameters | None = None, /, **params: Any) -> Plan:
        """The cells for its parameters parsed once (a notebook's
        ``NotebookParameters.from_notebook(globals())``, plus its own parameters as keywords),
        or for keywords alone. Names that are no parameter of it are ignored, so a whole
        parameters cell can be passed. Empty ``seeds`` become its :meth:`default_seeds`."""
        if parsed is None:
            parsed = NotebookParameters.parse(**params)
        elif twice := sorted(_FIELDS & set(params)):
            raise TypeError(f"{twice} are in the parsed parameters already: give them there, not as keywords")
        if not parsed.seeds:
            parsed = dataclasses.replace(parsed, seeds=self.default_seeds(parsed))
        return self.make(self, parsed, **{k: v for k, v in params.items() if k in self.own})

    def cells(self, **params: Any) -> list[RunSpec]:
        """Its distinct RunSpecs for ``params``."""
        return self.plan(**params).specs


#: Every registered experiment by notebook name, in the order of the notebooks' file names
#: (:func:`register` keeps it so, whichever module registers first).
EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` under its notebook name (once); returns it, for a module constant."""
    name = experiment.notebook
    if not name or name in EXPERIMENTS:
        raise ValueError(f"an experiment is registered once, under a new notebook name; got {name!r}")
    if experiment.reads != ("profile",) and not experiment.setups:
        raise ValueError(f"experiment {name!r} plans data sets from its parameters: give it setups per scale "
                         "(paper, real, builtin)")
    EXPERIMENTS[name] = experiment
    # Reordered in place (modules hold this very dict) into the order of the notebooks' files,
    # as notebook_runner.discover lists them, not the order in which modules were imported.
    for notebook in sorted(EXPERIMENTS, key=lambda name: f"{name}.ipynb"):
        EXPERIMENTS[notebook] = EXPERIMENTS.pop(notebook)
    return experiment


_entry_points_loaded = False


def _load_entry_points() -> None:
    """Import every module (or register every Experiment) that installed packages name under
    :data:`ENTRY_POINT_GROUP`, once."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = ep.load()
        except Exception as exc:  # an outside package's import error, named with its entry point
            raise ValueError(f"entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP}) cannot be "
                             f"imported: {type(exc).__name__}: {exc}") from exc
        if isinstance(loaded, Experiment) and EXPERIMENTS.get(loaded.notebook) is not loaded:
            register(loaded)


def registered() -> dict[str, Experiment]:
    """Every registered experiment by notebook name, the package's and those of installed
    packages (:data:`ENTRY_POINT_GROUP`), in the order of the notebooks' file names."""
    _load_entry_points()
    return dict(EXPERIMENTS)


_FIELDS = {f.name for f in dataclasses.fields(NotebookParameters)}


def experiment(name: str | Experiment) -> Experiment:
    """The registered experiment of a notebook name (an edge: the CLI, a notebook), or itself."""
    if isinstance(name, Experiment):
        return name
    _load_entry_points()
    return EXPERIMENTS[validation.check_choice("notebook", name, EXPERIMENTS)]


def plan(notebook: str | Experiment, parsed: NotebookParameters | None = None, /, **params: Any) -> Plan:
    """``experiment(notebook).plan(parsed, **params)``: a notebook's cells, by name or object."""
    return experiment(notebook).plan(parsed, **params)


def resolve_notebooks(requested: Sequence[str | Experiment]) -> list[Experiment]:
    """Notebook names (or prefixes such as ``02``), or experiments → the experiments, in order."""
    _load_entry_points()
    chosen: list[Experiment] = []
    unknown = []
    for name in requested:
        hits = [name] if isinstance(name, Experiment) else [
            e for nb, e in EXPERIMENTS.items() if nb == name or nb.startswith(name)]
        if not hits:
            unknown.append(name)
        chosen.extend(e for e in hits if e not in chosen)
    if unknown:
        raise ValueError(f"no registered experiment matches {unknown}: one from another package registers "
                         f"through the entry-point group {ENTRY_POINT_GROUP!r} (docs/architecture.md); "
                         f"known: {', '.join(EXPERIMENTS)}")
    order = list(EXPERIMENTS.values())
    return sorted(chosen, key=lambda e: order.index(e) if e in order else len(order))


def check_parameter_names(experiments: Sequence[str | Experiment], params: Iterable[str],
                          flags: Iterable[str] = ()) -> None:
    """Refuse parameters no chosen notebook takes: a typo would silently plan the default grid.
    ``flags``: parameters given another way (the command line's ``--profile``), refused too."""
    accepted = {p for e in experiments for p in experiment(e).accepts} - set(flags)
    unknown = sorted(set(params) - accepted)
    if unknown:
        # a list takes the plural of its field's name (network → networks): say which one was meant
        plurals = [f"{name}s=…" for name in unknown if f"{name}s" in accepted]
        hint = f" (a list takes the plural: {', '.join(plurals)})" if plurals else ""
        raise ValueError(f"--param {unknown}: no chosen notebook takes it; they take {', '.join(sorted(accepted))}"
                         f"{hint}")


def cells_by_notebook(notebooks: str | Experiment | Sequence[str | Experiment], **params: Any
                      ) -> dict[str, list[RunSpec]]:
    """Each experiment's distinct RunSpecs for ``params`` (a notebook's ``parameters`` cell),
    parsed once for all of them, keyed by notebook name."""
    requested = [notebooks] if isinstance(notebooks, (str, Experiment)) else list(notebooks)
    parsed = NotebookParameters.parse(**params)
    return {e.notebook: e.plan(parsed, **{k: v for k, v in params.items() if k not in _FIELDS}).specs
            for e in resolve_notebooks(requested)}


def cells(notebooks: str | Experiment | Sequence[str | Experiment], **params: Any) -> list[RunSpec]:
    """The distinct RunSpecs of one or several experiments, each once: cells shared between
    notebooks (STAMP's default row is in Tables 1, 5, 6 and both figures) are computed once."""
    return distinct(s for specs in cells_by_notebook(notebooks, **params).values() for s in specs)
