"""Data sets, corruptions and test streams.

* :mod:`~stamplib.data.registry` — the frozen :class:`Dataset` / :class:`OutlierSet`
  descriptions and the two registries;
* :mod:`~stamplib.data.catalog` — the built-in entries, one per data set;
* :mod:`~stamplib.data.lookup` — names (and ``npz:``/``folder:`` paths) → entries, name checks,
  partial-copy checks, the doctor listing, source-training data;
* :mod:`~stamplib.data.streams` — :class:`StreamSpec` (how a stream is made and fed) and
  :func:`build_stream`: ID set + outlier set + corruption → an ordered, batched :class:`Stream`;
  :mod:`~stamplib.data.orders` — the harder orders; :mod:`~stamplib.data.stream_cache` — built
  streams kept for reuse within a byte budget (:func:`set_stream_cache_budget`,
  ``$STAMPLIB_STREAM_CACHE``);
* ``loaders``, ``downloads``, ``outlier_c``, ``corruptions``, ``benchmark``, ``noise`` — file
  formats, downloads, generated outlier-C sets, the 15 corruptions, the digits benchmark and
  the Noise set (the slow per-image transcription of the corruption code that the tests and
  the benchmark check ``corruptions`` against is a test oracle: ``tests/oracles/corruptions.py``).
"""

from stamplib.data.lookup import (
    check_available,
    check_names,
    class_split_names,
    dataset,
    dataset_status,
    hyperparameter_set_of,
    num_classes,
    outlier_set,
    source_train,
)
from stamplib.data.orders import LabelShift
from stamplib.data.registry import (
    CLOSED_SET,
    DAMAGED,
    DATASETS,
    HELDOUT,
    OUTLIER_SETS,
    Dataset,
    OutlierSet,
    Pool,
    class_split,
    interleave_classes,
    register_dataset,
    register_outlier_set,
)
from stamplib.data.stream_cache import set_stream_cache_budget, stream_cache_budget
from stamplib.data.streams import (
    PAPER_STREAM,
    SCHEDULE_FLAGS,
    SCHEDULES,
    Batch,
    CorruptionStreamSpec,
    Stream,
    StreamSpec,
    apply_corruption,
    build_stream,
    gradual_severities,
    interleave,
    mix,
    outliers_for_ratio,
)

__all__ = [
    "Batch",
    "CLOSED_SET",
    "CorruptionStreamSpec",
    "DAMAGED",
    "LabelShift",
    "DATASETS",
    "Dataset",
    "HELDOUT",
    "OUTLIER_SETS",
    "OutlierSet",
    "PAPER_STREAM",
    "Pool",
    "SCHEDULE_FLAGS",
    "SCHEDULES",
    "Stream",
    "StreamSpec",
    "apply_corruption",
    "build_stream",
    "check_available",
    "check_names",
    "class_split",
    "class_split_names",
    "dataset",
    "dataset_status",
    "gradual_severities",
    "hyperparameter_set_of",
    "interleave",
    "interleave_classes",
    "mix",
    "num_classes",
    "outlier_set",
    "outliers_for_ratio",
    "register_dataset",
    "register_outlier_set",
    "set_stream_cache_budget",
    "source_train",
    "stream_cache_budget",
]
