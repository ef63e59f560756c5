"""Peak host memory of one grid cell over 15 ImageNet-sized corruptions, against the stream
cache's byte budget (issue 27, item 1).

A synthetic ImageNet-C: per corruption, ``--images`` random 224-px uint8 images stored as the
memory-mapped ``.npy`` that ImageNet-C's decoded copies are (``loaders.load_mapped_folder``),
registered as the data set ``synthetic_imagenet_c`` with 1,000 classes and the ImageNet
hyperparameters. One cell (``--method``, Noise outliers at ratio 0.2, all 15 corruptions,
every sample) runs through ``stamplib.run`` in a fresh child process, which reports:

* ``ru_maxrss`` — the process's peak resident set, mapped file pages included (those belong to
  the page cache, which the system reclaims under pressure);
* the peak of ``RssAnon`` (sampled every 10 ms from /proc/self/status) — the memory the process
  cannot give back, which is what runs a machine out of memory;
* both before the cell (imports, network, source model) and at its end.

The network is a stand-in (a 7×7 average pool in front of the tiny CIFAR ResNet, random
weights): the memory at stake is the streams', and the stand-in keeps the run to a minute.
Compare the peak with the budget and with the 15 streams' total, which the cache of entries
(``lru_cache(maxsize=64)``) used to keep.

Usage: .venv/bin/python benchmarks/stream_memory.py [--images 1000] [--budget 512M]
           [--method source] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from stamplib import data, models
from stamplib.data.corruptions import CORRUPTIONS
from stamplib.data.registry import Dataset
from stamplib.data.streams import outliers_for_ratio
from stamplib.evaluation.runner import run
from stamplib.evaluation.spec import RunSpec
from stamplib.paths import RunContext

NAME, SIZE, CLASSES, STAND_IN = "synthetic_imagenet_c", 224, 1000, "pooled_tiny"


def write_corruptions(folder: Path, images: int) -> None:
    """One ``<corruption>.npy`` of random images per corruption (distinct seeds), written in
    chunks so that the parent process never holds a whole corruption."""
    folder.mkdir(parents=True, exist_ok=True)
    for k, corruption in enumerate(CORRUPTIONS):
        path = folder / f"{corruption}.npy"
        if path.is_file():
            continue
        rng = np.random.default_rng(k)
        out = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(images, SIZE, SIZE, 3))
        for start in range(0, images, 256):
            out[start : start + 256] = rng.integers(0, 256, out[start : start + 256].shape, dtype=np.uint8)
        out.flush()
        del out


def register(folder: Path, checkpoint: Path) -> None:
    """The synthetic data set and its stand-in network (in this process only)."""

    def released(root: Path, corruption: str, severity: int) -> data.Pool:
        images = np.load(folder / f"{corruption}.npy", mmap_mode="c")
        return torch.from_numpy(images), torch.arange(images.shape[0]) % CLASSES

    models.ARCHITECTURES[STAND_IN] = lambda classes: nn.Sequential(nn.AvgPool2d(7), models.resnet_cifar_tiny(classes))
    if not checkpoint.is_file():
        torch.manual_seed(0)
        torch.save(models.ARCHITECTURES[STAND_IN](CLASSES).state_dict(), checkpoint)
    data.register_dataset(Dataset(NAME, classes=CLASSES, hyperparameter_set="imagenet_c", test=None, released=released,
                                  architecture=STAND_IN, checkpoint=str(checkpoint)))


class AnonymousPeak:
    """The peak of RssAnon, sampled in a thread (Linux; None elsewhere)."""

    def __init__(self, every_s: float = 0.01) -> None:
        self.peak_kib: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(every_s,), daemon=True)

    @staticmethod
    def now_kib() -> int | None:
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def _sample(self, every_s: float) -> None:
        while not self._stop.is_set():
            kib = self.now_kib()
            if kib is not None:
                self.peak_kib = max(self.peak_kib or 0, kib)
            time.sleep(every_s)

    def __enter__(self) -> AnonymousPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def max_rss_mib() -> float:
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return kib / 2**20 if sys.platform == "darwin" else kib / 2**10


def measure(args: argparse.Namespace) -> dict[str, object]:
    """The child: one cell over the 15 corruptions, its memory before and at the end."""
    folder = Path(args.measure)
    register(folder, folder / "stand_in.pt")
    data.set_stream_cache_budget(args.budget)
    spec = RunSpec(method=args.method, dataset=NAME, outlier_set="noise", corruptions=CORRUPTIONS,
                   profile="full", hyperparameter_set="imagenet_c")
    models.source_model(NAME)  # the network, before the baseline is read
    data.outlier_set("noise").load(folder, None)
    before = {"max_rss_mib": max_rss_mib(), "rss_anon_mib": (AnonymousPeak.now_kib() or 0) / 1024}
    started = time.perf_counter()
    with AnonymousPeak() as anonymous:
        record = run(spec, RunContext(folder, folder / "results", folder / "figures"), force=True)
    images = int(np.load(folder / f"{CORRUPTIONS[0]}.npy", mmap_mode="r").shape[0])
    stream = (images + outliers_for_ratio(images, 0.2)) * (SIZE * SIZE * 3 + 8)
    return {
        "method": args.method, "corruptions": len(record.per_corruption), "images_per_corruption": images,
        "stream_mib": stream / 2**20, "all_streams_mib": len(CORRUPTIONS) * stream / 2**20,
        "budget_mib": data.stream_cache_budget() / 2**20, "before": before,
        "peak_max_rss_mib": max_rss_mib(), "peak_rss_anon_mib": (anonymous.peak_kib or 0) / 1024,
        "seconds": round(time.perf_counter() - started, 1),
    }


def report(result: dict[str, object]) -> None:
    b = result["before"]
    print(f"one {result['method']} cell, {result['corruptions']} corruptions × "
          f"{result['images_per_corruption']} ID images of 224 px (+ 20 % outliers), {result['seconds']} s")
    print(f"  one stream {result['stream_mib']:.0f} MiB; the 15 streams {result['all_streams_mib']:.0f} MiB; "
          f"stream cache budget {result['budget_mib']:.0f} MiB")
    print(f"  peak RSS (ru_maxrss, mapped pages included) {result['peak_max_rss_mib']:.0f} MiB "
          f"(before the cell {b['max_rss_mib']:.0f} MiB)")
    # what the cache may hold at most: whole streams within the budget
    kept = min(result["budget_mib"] // result["stream_mib"], result["corruptions"]) * result["stream_mib"]
    print(f"  peak anonymous RSS {result['peak_rss_anon_mib']:.0f} MiB (before the cell {b['rss_anon_mib']:.0f} MiB): "
          f"the cell added {result['peak_rss_anon_mib'] - b['rss_anon_mib']:.0f} MiB; the bound is what the cache "
          f"may keep ({kept:.0f} MiB) + the stream being built ({result['stream_mib']:.0f} MiB) "
          f"+ one batch's tensors and the outliers being resized")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=1000, help="ID images per corruption")
    parser.add_argument("--budget", default="512M", help="stream cache budget (e.g. 512M, 64G)")
    parser.add_argument("--method", default="source")
    parser.add_argument("--keep", default=None, help="keep the synthetic data set in this folder (reused)")
    parser.add_argument("--json", action="store_true", help="print the measurement as JSON too")
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)  # the child's data folder
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.measure:
        print(json.dumps(measure(args)))
        return
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="stream_memory-"))
    try:
        write_corruptions(folder, args.images)
        child = subprocess.run(
            [sys.executable, __file__, "--measure", str(folder), "--budget", args.budget, "--method", args.method],
            capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        if child.returncode:
            raise SystemExit(f"the measuring process failed:\n{child.stderr}")
        result = json.loads(child.stdout.strip().splitlines()[-1])
        report(result)
        if args.json:
            print(json.dumps(result))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
