"""The short course on outlier-aware test-time adaptation (notebooks 14–17, docs/teaching.md).

* :mod:`~stamplib.teaching.exercises` — exercises with checks (:func:`check`), their markup;
* :mod:`~stamplib.teaching.records` — per-batch outputs, seed spreads, the lessons' colours;
* one module per lesson — its exercises' reference solutions and checks, its figures and the
  sentences computed from its records: :mod:`~stamplib.teaching.adapting` (14),
  :mod:`~stamplib.teaching.outliers` (15), :mod:`~stamplib.teaching.piece_by_piece` (16),
  :mod:`~stamplib.teaching.breaking` (17); :mod:`~stamplib.teaching.overview` closes notebook 00.

What the lessons compute is planned in :mod:`stamplib.experiments.course`.
"""

# Importing the lessons registers their exercises (check() finds every one by name).
from stamplib.teaching import adapting, breaking, outliers, overview, piece_by_piece
from stamplib.teaching.exercises import EXERCISES, check

__all__ = ["EXERCISES", "adapting", "breaking", "check", "outliers", "overview", "piece_by_piece"]
