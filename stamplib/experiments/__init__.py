"""Experiments: what the notebooks, grids, tuning jobs and the reference run compute, built on
the evaluation core (:mod:`stamplib.evaluation`: a RunSpec in, a record out).

* :mod:`~stamplib.experiments.parameters` — a notebook's parameters, parsed and checked once;
* :mod:`~stamplib.experiments.plans` — the experiments (one per notebook), parameters → RunSpecs;
* :mod:`~stamplib.experiments.execute` — a plan's records: stored, or computed here;
* :mod:`~stamplib.experiments.grid` — many RunSpecs at once: a process pool, SLURM;
* :mod:`~stamplib.experiments.tune` — a grid of hyperparameters, the best cell by a metric;
* :mod:`~stamplib.experiments.reference` — the committed reference run on real images.
"""
