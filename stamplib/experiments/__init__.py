"""Experiments: what the notebooks, grids, tuning jobs and the reference run compute, built on
the evaluation core (:mod:`stamplib.evaluation`: a RunSpec in, a record out).

* :mod:`~stamplib.experiments.parameters` — a notebook's parameters, parsed and checked once;
* :mod:`~stamplib.experiments.registry` — every notebook's experiment by name, the package's and
  those of installed packages (entry-point group ``stamplib.experiments``);
* :mod:`~stamplib.experiments.plans` — the paper's experiments (one per notebook) and the planners
  they share, parameters → RunSpecs;
* :mod:`~stamplib.experiments.course` — the short course's four notebooks (14–17), planned from
  the paper notebooks' cells;
* :mod:`~stamplib.experiments.execute` — a plan's records: stored, or computed here;
* :mod:`~stamplib.experiments.grid` — many RunSpecs at once: a process pool, SLURM;
* :mod:`~stamplib.experiments.tune` — a grid of hyperparameters, the best cell by a metric;
* :mod:`~stamplib.experiments.reference` — the committed reference run on real images.
"""

# The course registers its experiments after the paper notebooks' (the registry orders them by
# notebook name whatever the order of registration). Imported here, not by plans, whose planners
# it calls: no import cycle, and every import of plans goes through this package first.
from stamplib.experiments import course as course  # noqa: E402
