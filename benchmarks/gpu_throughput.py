"""Images per second of every method on one corruption at the paper's shapes (issue 27, item 5).

Two shapes, each with the paper's network and hyperparameter set:

* ``cifar10_c`` — 32-px images, ResNet-18 (CIFAR variant), 10 classes; a corruption's stream is
  12,500 images (10,000 + 2,500 outliers);
* ``imagenet_c`` — 224-px images, ResNet-50, 1,000 classes; a stream is 62,500 images.

``--data synthetic`` (default) needs no data set and no checkpoint: seeded random images and a
stand-in network (random weights, BatchNorm calibrated on random images, head scaled so that
predictions range from confident to uncertain: ``stamplib.methods.contract.Probe``). Filters
then pass other shares of a batch than on real data, so EATA, SAR and SoTTA may run more or
fewer backward passes than in a table; ``--data real`` times each data set's own first
corruption (gaussian_noise, Noise outliers) with its source model instead (both must be in
place: ``python -m stamplib doctor``).

Per method: one untimed warm-up batch, a reset, then ``--batches`` batches of ``--batch-size``
through ``stamplib.evaluation.runner.run_stream`` (the loop a table's cell runs), timed after a
``torch.cuda.synchronize``; images/s, the peak GPU memory, and the hours a corruption and a
table take at that rate (Table 1's CIFAR-10 half: 14 methods × 4 outlier sets × 15 corruptions;
Table 2: 14 × 2 × 15). The report names the device, torch, CUDA and cuDNN versions and the
options: ``--bf16`` and ``--channels-last`` (execution options, :class:`stamplib.methods.Execution`,
that only STAMP reads), ``--tf32`` (off unless given, as in records). ``--override
method:field=value`` sets a hyperparameter or an execution option (``cotta:view_chunk=1``).

``--small`` is the CPU smoke run CI makes: the tiny CIFAR network at 32 px for both shapes,
10 classes, 2 batches of 8.

Usage: .venv/bin/python benchmarks/gpu_throughput.py [--device cuda] [--shapes cifar10_c,imagenet_c]
           [--methods stamp,tent] [--batches 20] [--bf16] [--channels-last] [--tf32]
           [--data synthetic|real] [--out results.json]
       .venv/bin/python benchmarks/gpu_throughput.py --device cpu --small --out smoke.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from stamplib import data, methods, models
from stamplib.blocks import graphs
from stamplib.evaluation.assembly import build_method, build_stream
from stamplib.evaluation.precision import set_tf32, tf32_state
from stamplib.evaluation.runner import run_stream
from stamplib.evaluation.spec import RunSpec
from stamplib.methods.contract import Probe, source_images

CORRUPTIONS = 15


@dataclass(frozen=True)
class Shape:
    hyperparameter_set: str  # the methods', and the data set of --data real (a row's "setting" before the rename)
    network: str
    size: int  # image side in pixels
    classes: int
    stream_images: int  # one corruption's stream at paper scale
    outlier_sets: int  # of the paper's table
    table: str


PAPER = {
    "cifar10_c": Shape("cifar10_c", "resnet18_cifar", 32, 10, 12_500, 4, "Table 1, CIFAR-10"),
    "imagenet_c": Shape("imagenet_c", "resnet50", 224, 1000, 62_500, 2, "Table 2"),
}
SMALL = {name: Shape(s.hyperparameter_set, "resnet_cifar_tiny", 32, 10, s.stream_images, s.outlier_sets, s.table)
         for name, s in PAPER.items()}


def nvidia_driver() -> str | None:
    """The NVIDIA driver's version, from nvidia-smi where it is installed."""
    if shutil.which("nvidia-smi") is None:
        return None
    done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def environment(args: argparse.Namespace) -> dict[str, Any]:
    cuda = args.device == "cuda"
    props = torch.cuda.get_device_properties(0) if cuda else None
    return {
        "device": args.device,
        "device_name": props.name if props else (platform.processor() or platform.machine()),
        "compute_capability": f"{props.major}.{props.minor}" if props else None,
        "device_memory_gib": round(props.total_memory / 2**30, 1) if props else None,
        "driver": nvidia_driver() if cuda else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "bf16": args.bf16, "channels_last": args.channels_last, "tf32": tf32_state(),
        "replay_graphs": args.replay_graphs, "warmup": args.warmup,
        "threads": torch.get_num_threads(), "data": args.data, "small": args.small,
        "batch_size": args.batch_size, "batches": args.batches,
    }


class Synthetic:
    """One shape's stand-in network, source data and stream, built once for every method."""

    def __init__(self, shape: Shape, args: argparse.Namespace) -> None:
        self.shape = shape
        calibration = 16 if args.small else 128
        self.probe = Probe(partial(models.create, shape.network), shape.classes, shape.size, calibration)
        self.net = self.probe.net()
        n_source = 32 if args.small else 2000  # EATA's Fisher reads 2,000 at paper scale
        self.source = methods.SourceData(f"synthetic-{shape.hyperparameter_set}-{shape.network}-{shape.size}",
                                         source_images(n_source, 1, shape.size), torch.arange(n_source) % shape.classes)
        self.stream = synthetic_stream(shape, args.batches * args.batch_size, args.batch_size)

    def method(self, name: str, device: str, overrides: dict[str, Any], execution: methods.Execution,
               replay_graphs: bool = False) -> methods.TTAMethod:
        fields = {f.name for f in dataclasses.fields(methods.method_class(name).config_cls)}
        if "fisher_samples" in fields:  # EATA's Fisher reads exactly the source images there are
            overrides = {"fisher_samples": self.source.images.shape[0], **overrides}
        if "clip_normalized_inputs" in fields and not isinstance(self.net, models.InputNormalization):
            # the tiny network of --small takes raw images: the ImageNet quirk has nothing to clip
            overrides = {"clip_normalized_inputs": False, **overrides}
        source = self.source if methods.method_class(name).needs_source_data else None
        net = graphs.replayed(self.net.to(device)) if replay_graphs else self.net.to(device)
        return methods.create(name, net, self.shape.classes, hyperparameter_set=self.shape.hyperparameter_set,
                              seed=0, source_data=source, execution=execution, **overrides)


def synthetic_stream(shape: Shape, n: int, batch_size: int) -> data.Stream:
    """``n`` seeded random images, a fifth of them outliers, in a seeded order."""
    g = torch.Generator().manual_seed(2)
    n_out = n // 5
    images = torch.randint(0, 256, (n, shape.size, shape.size, 3), dtype=torch.uint8, generator=g)
    labels = torch.arange(n - n_out) % shape.classes
    return data.mix(images[n_out:], labels, images[:n_out], n_out, seed=0,
                    stream=data.StreamSpec(batch_size=batch_size))


class Real:
    """The data set's own first corruption and source model (--data real)."""

    def __init__(self, shape: Shape, args: argparse.Namespace) -> None:
        self.shape = shape
        self.spec = RunSpec(method="source", dataset=shape.hyperparameter_set, outlier_set="noise",
                            corruptions=("gaussian_noise",), profile="full")
        stream = build_stream(self.spec, max_id=args.batches * args.batch_size * 4 // 5)
        self.stream = data.Stream(stream.images, stream.labels, args.batch_size)

    def method(self, name: str, device: str, overrides: dict[str, Any], execution: methods.Execution,
               replay_graphs: bool = False) -> methods.TTAMethod:
        return build_method(RunSpec.make(name, dataset=self.spec.dataset, outlier_set="noise",
                                         corruptions=("gaussian_noise",), profile="full", overrides=overrides),
                            device, replay_graphs=replay_graphs, execution=execution)


def parse_overrides(items: list[str]) -> dict[str, dict[str, Any]]:
    """``method:field=value`` (value read as JSON, else as a string) -> {method: {field: value}}."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        method, _, assignment = item.partition(":")
        field, _, value = assignment.partition("=")
        if not (method and field and value):
            raise SystemExit(f"--override {item!r}: write method:field=value")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        out.setdefault(method, {})[field] = parsed
    return out


def split_options(options: dict[str, Any], execution: methods.Execution) -> tuple[dict[str, Any], methods.Execution]:
    """One method's ``--override`` options as its hyperparameter overrides, and ``execution``
    with the execution options among them (:class:`stamplib.methods.Execution`) set."""
    names = methods.Execution.names()
    speed = {name: value for name, value in options.items() if name in names}
    return {k: v for k, v in options.items() if k not in speed}, dataclasses.replace(execution, **speed)


def time_method(world: Synthetic | Real, name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One row: the method's images/s on the world's stream (or the error that stopped it)."""
    shape = world.shape
    given = methods.Execution(bf16_autocast=args.bf16, channels_last=args.channels_last)
    overrides, execution = split_options(args.overrides.get(name, {}), given)
    row: dict[str, Any] = {**asdict(shape), "method": name, "options": overrides, "execution": asdict(execution)}
    row["replay_graphs"] = args.replay_graphs
    try:
        method = world.method(name, args.device, overrides, execution, args.replay_graphs)
        warm_up = list(zip(range(args.warmup), world.stream.batches(args.device)))
        for _, batch in warm_up:  # cuDNN picks its kernels, lazy state is made (graphs: traced)
            if args.replay_graphs:
                graphs.step_begins()
            method.step(batch.x)
        method.reset()
        if args.replay_graphs:  # the copies a reset makes (teachers) are traced too
            for _, batch in warm_up:
                graphs.step_begins()
                method.step(batch.x)
            method.reset()
        if args.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        result = run_stream(method, world.stream, args.device, replay_graphs=args.replay_graphs)
    except Exception as exc:  # one method failing must not hide the others' numbers
        return {**row, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    n = int(result.labels.shape[0])
    per_s = n / result.seconds
    hours = shape.stream_images / per_s / 3600
    return {**row, "images": n, "seconds": round(result.seconds, 3), "images_per_s": round(per_s, 1),
            "hours_per_corruption": round(hours, 4),
            "hours_per_table_cells": round(hours * shape.outlier_sets * CORRUPTIONS, 3),
            "peak_gpu_memory_mib": round(torch.cuda.max_memory_allocated() / 2**20) if args.device == "cuda" else None,
            "error": None}


def estimates(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Hours of each table's cells of the timed methods at the measured rates (None where a
    method failed)."""
    tables: dict[str, float | None] = {}
    for row in rows:
        hours = row.get("hours_per_table_cells")
        old = tables.get(row["table"], 0.0)
        tables[row["table"]] = None if hours is None or old is None else old + hours
    return {table: None if h is None else round(h, 2) for table, h in tables.items()}


def report(env: dict[str, Any], rows: list[dict[str, Any]], tables: dict[str, float | None]) -> None:
    print(f"{env['device']} ({env['device_name']}), torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, "
          f"bf16={env['bf16']} channels_last={env['channels_last']} tf32={env['tf32']}, {env['data']} data, "
          f"{env['batches']} batches of {env['batch_size']}")
    print(f"{'shape':<11} {'method':<12} {'images/s':>9} {'h/corruption':>13} {'GPU MiB':>8}")
    for r in rows:
        if r["error"]:
            print(f"{r['hyperparameter_set']:<11} {r['method']:<12} failed: {r['error']}")
            continue
        gpu = "" if r["peak_gpu_memory_mib"] is None else r["peak_gpu_memory_mib"]
        print(f"{r['hyperparameter_set']:<11} {r['method']:<12} {r['images_per_s']:9.1f} "
              f"{r['hours_per_corruption']:13.3f} {gpu:>8}")
    for table, hours in tables.items():
        timed = [r for r in rows if r["table"] == table]
        shown = "incomplete (a method failed)" if hours is None else f"{hours:.1f} h"
        print(f"estimate for {table} ({len(timed)} methods × {timed[0]['outlier_sets']} outlier sets × "
              f"{CORRUPTIONS} corruptions) on one such device: {shown}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cpu", "cuda"))
    parser.add_argument("--shapes", default="cifar10_c,imagenet_c", help="comma-separated: cifar10_c, imagenet_c")
    parser.add_argument("--methods", default="", help="comma-separated (default: the 14 of the tables)")
    parser.add_argument("--batches", type=int, default=None, help="timed batches (default 20; --small 2)")
    parser.add_argument("--batch-size", type=int, default=None, help="default 64 (the paper's); --small 8")
    parser.add_argument("--data", default="synthetic", choices=("synthetic", "real"))
    parser.add_argument("--bf16", action="store_true", help="STAMP's bfloat16 autocast (CUDA only)")
    parser.add_argument("--channels-last", action="store_true", help="STAMP's channels-last model and inputs")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 (records never do)")
    parser.add_argument("--replay-graphs", action="store_true",
                        help="the network's kernels replayed as CUDA graphs (stamplib.blocks.graphs; not for records)")
    parser.add_argument("--override", action="append", default=[],
                        help="method:field=value, a hyperparameter or execution option (e.g. cotta:view_chunk=1); "
                             "repeatable")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed batches before the reset (default 1; with --replay-graphs also after it)")
    parser.add_argument("--small", action="store_true", help="CPU smoke sizes: tiny network, 32 px, 2 batches of 8")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--out", default=None, help="also write the report as JSON here")
    args = parser.parse_args(argv)
    args.overrides = parse_overrides(args.override)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU; use --device cpu (with --small for a quick run)")
    args.batches = args.batches or (2 if args.small else 20)
    args.batch_size = args.batch_size or (8 if args.small else 64)
    if args.threads:
        torch.set_num_threads(args.threads)
    set_tf32(args.tf32)
    catalogue = SMALL if args.small else PAPER
    names = [n for n in args.methods.split(",") if n] or list(methods.TABLE_ORDER)
    env = environment(args)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()

    def save() -> None:  # after every method, so that a run cut short keeps what it measured
        if args.out:
            result = {**env, "rows": rows, "table_hours": estimates(rows),
                      "seconds": round(time.perf_counter() - started, 1)}
            Path(args.out).write_text(json.dumps(result, indent=1))

    for shape_name in [s for s in args.shapes.split(",") if s]:
        if shape_name not in catalogue:
            raise SystemExit(f"unknown shape {shape_name!r}; choose from {', '.join(catalogue)}")
        world = Synthetic(catalogue[shape_name], args) if args.data == "synthetic" else Real(catalogue[shape_name],
                                                                                             args)
        for name in names:
            rows.append(time_method(world, name, args))
            save()
    report(env, rows, estimates(rows))


if __name__ == "__main__":
    main()
