"""Build what a RunSpec runs: the method, ready on its device, and the stream of a corruption.

The runner, the explorer, the walkthrough and the benchmarks all build here, so a method run
outside a table gets what a table's run gets: the data set's source model, source data for the
methods that need it (EATA, OWTTT), the availability check and the spec's config (resolved
once, by the spec)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch
from torch import nn

from stamplib import data, methods, models
from stamplib.blocks import graphs
from stamplib.evaluation.profiles import get_profile
from stamplib.evaluation.spec import RunSpec


def stand_in_overrides(method: str, dataset: str, hyperparameter_set: str) -> dict[str, Any]:
    """Overrides a method needs to run another data set's ``hyperparameter_set`` on
    ``dataset``: the ImageNet quirk of clipping *normalised* inputs (CoTTA, RoTTA;
    baselines.md §4) has no meaning for a model that takes raw [0, 1] images, so it is switched
    off. They belong in the spec's overrides (and so in its key): give them to ``RunSpec.make``."""
    if not hyperparameter_set or hyperparameter_set == data.hyperparameter_set_of(dataset):
        return {}
    fields = {f.name for f in dataclasses.fields(methods.method_class(method).config_cls)}
    return {"clip_normalized_inputs": False} if "clip_normalized_inputs" in fields else {}


def source_data(spec: RunSpec, data_root: str | os.PathLike | None) -> methods.SourceData | None:
    """The clean source images the spec's method reads (EATA, OWTTT; None for the others), only
    the first N it needs, so that EATA's 2,000 do not load all 50,000 ImageNet images, read
    from ``data_root`` (None: no data folder, enough for the data sets that ship with the
    package)."""
    cls = methods.method_class(spec.method)
    if not cls.needs_source_data:
        return None
    limit = cls.source_images_needed(spec.config)
    images, labels = data.source_train(spec.dataset, data_root, limit=limit)
    # The name keys the cache of source statistics: a prefix must not pass for the whole set.
    # The statistics are the source network's too: another network of the data set is another key.
    name = spec.dataset if limit is None else f"{spec.dataset}[:{limit}]"
    name = f"{name}@network{spec.network}" if spec.network else name
    return methods.SourceData(name, images, labels)


def network_layout(device: str) -> torch.memory_format:
    """The memory layout a network runs in on ``device``: channels-last on a CPU, the default
    elsewhere. On a CPU, oneDNN then convolves in the layout it computes in, instead of
    converting every activation to its blocked layout and back, and BatchNorm uses its
    channels-last kernel: on one thread a STAMP or CoTTA cell of the quick profile runs about
    1.4x faster (benchmarks/cpu_layout.py). The numbers are the same up to float rounding, as on
    another CPU (tests/methods/test_layout.py runs every method in both layouts). GPU records
    keep the layout they were measured in."""
    return torch.channels_last if torch.device(device).type == "cpu" else torch.contiguous_format


def layout_name(layout: torch.memory_format) -> str:
    """``channels_last`` or ``contiguous``: how a record names the layout its network ran in."""
    return "channels_last" if layout == torch.channels_last else "contiguous"


def build_method(
    spec: RunSpec, device: str = "cpu", progress: bool = False, model: nn.Module | None = None,
    data_root: str | os.PathLike | None = None, replay_graphs: bool = False,
    layout: torch.memory_format | None = None, execution: methods.Execution = methods.RECORD_EXECUTION,
) -> methods.TTAMethod:
    """The spec's method, ready to step on ``device``: around the data set's source model (or
    ``model``, e.g. random weights for a timing), with source data where the method needs it,
    the spec's config and seed. ``progress``: show the model's download;
    ``data_root``: where the data sets are (None: no data folder, enough for the data sets that
    ship with the package);
    ``replay_graphs``: the network's kernels replayed as CUDA graphs (:mod:`stamplib.blocks.graphs`;
    speed measurements only, never records); ``layout``: the network's memory layout (None: the
    device's, :func:`network_layout`, as records run; another only to time the two);
    ``execution``: how the method computes (:class:`stamplib.methods.Execution`; records run the
    defaults, another only to time it)."""
    # A partial data set copy fails here, naming every missing file, not at the 7th corruption.
    data.check_available(spec.dataset, spec.corruptions, spec.severity, data_root)
    network = models.source_model(spec.dataset, progress=progress, network=spec.network) if model is None else model
    network = network.to(device, memory_format=layout or network_layout(device))
    if replay_graphs:
        network = graphs.replayed(network)
    return methods.create(
        spec.method, network, data.dataset(spec.dataset).num_classes, seed=spec.seed,
        source_data=source_data(spec, data_root), config=spec.config, execution=execution,
    )


def build_stream(spec: RunSpec, corruption: str | None = None, max_id: int | None = None,
                 severity: int | None = None, data_root: str | os.PathLike | None = None) -> data.Stream:
    """The stream of one of the spec's corruptions (default: its first) at ``severity`` (default:
    the spec's), made as the spec's StreamSpec says, with ``max_id`` known-class samples
    (default: as many as the profile takes), read from ``data_root`` (None: no data folder,
    enough for the data sets that ship with the package)."""
    if max_id is None:
        max_id = get_profile(spec.profile).id_limit(data.dataset(spec.dataset))
    return data.build_stream(spec.corruption_stream(corruption, max_id, severity), data_root=data_root)
