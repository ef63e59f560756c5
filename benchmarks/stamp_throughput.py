"""Throughput of STAMP's per-batch step against its compute floor (issue 9).

CIFAR-10 hyperparameter set (stamp.md §6, §7): K = 16 views, batch 64, a memory that is full before the
first timed batch (64 random samples with known labels), so every batch adapts. Paths:

(a) fast     ``Stamp.step``: fast views, view forwards chunked as ``view_chunk`` says (auto:
             one view per forward on CPU, all views in one forward on CUDA), filters, memory,
             adaptation.
(a16)        the same, all 16 views in one forward (the previous default), for comparison.
(b) plain    the plain transcription: views from the plain CoTTA code kept as the oracle in
             tests/oracles/views.py, then one forward per view (``batched_views=False``).
(c) floor    only the compute stamp.md §6 counts, on pre-made tensors: the 16 view forwards
             (chunked like (a)), 1 reference forward of 64, and 2 forward+backward passes on
             the 64 memory samples (SAM); no augmentation, no bookkeeping.

The last line gives ratios of seconds per batch: ``(a)/(b)`` below 1 means the fast path is
faster than the plain one; ``(c)/(a)`` is the share of the compute floor (a) reaches (the
issue asks for at least 0.85). A breakdown of (a) and, with ``--chunks``, the view forward
for several views-per-forward counts are printed above it.

``--all-methods`` instead times every registered method on one corruption stream of the
built-in digits benchmark (gaussian noise, severity 5, Noise outliers) and prints images/s.

Usage: .venv/bin/python benchmarks/stamp_throughput.py [--device cpu|cuda] [--batches 3]
           [--warmup 1] [--model resnet18_cifar|tiny] [--threads 1] [--chunks 1,2,4,16]
           [--channels-last] [--bf16]
       .venv/bin/python benchmarks/stamp_throughput.py --all-methods [--max-id 256]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch

from stamplib import data, methods, models
from stamplib.blocks.bn import view_groups
from stamplib.blocks.entropy import logit_entropy
from stamplib.blocks.views import make_views
from stamplib.evaluation.assembly import build_method, build_stream
from stamplib.evaluation.runner import run_stream
from stamplib.evaluation.spec import RunSpec
from stamplib.methods.stamp import Stamp

# The oracle is the test suite's (tests/oracles/): a benchmark runs from the checkout that holds it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.oracles.views import plain_make_views  # noqa: E402

ARCHITECTURES = {"resnet18_cifar": "resnet18_cifar", "tiny": "resnet_cifar_tiny"}
BATCH, VIEWS, CLASSES = 64, 16, 10


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_batch(
    step: Callable[[int], object], batches: int, warmup: int, device: torch.device
) -> tuple[float, float]:
    """Mean wall time and mean process CPU time of ``step(i)`` over ``batches`` calls after
    ``warmup`` untimed ones. On a busy CPU the process time is the steadier of the two."""
    for i in range(warmup):
        step(i)
    _sync(device)
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(batches):
        step(warmup + i)
    _sync(device)
    return (time.perf_counter() - wall) / batches, (time.process_time() - cpu) / batches


def build_stamp(args: argparse.Namespace, **execution) -> Stamp:
    """STAMP (CIFAR10-C hyperparameters) around a seeded random network, memory already full,
    computing as ``--channels-last``, ``--bf16`` and the ``execution`` options (e.g. view_chunk) say."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = models.create(ARCHITECTURES[args.model], CLASSES)
    stamp = methods.create(
        "stamp", net.to(args.device), CLASSES, hyperparameter_set="cifar10_c",
        execution=methods.Execution(channels_last=args.channels_last, bf16_autocast=args.bf16, **execution),
    )
    assert isinstance(stamp, Stamp)
    g = torch.Generator().manual_seed(1)
    stamp.memory.add(torch.rand(BATCH, 3, 32, 32, generator=g).to(args.device), torch.arange(BATCH) % CLASSES)
    return stamp


def floor_step(stamp: Stamp, views: torch.Tensor, memory: torch.Tensor, bf16: bool) -> Callable[[int], None]:
    """(c): the forwards and backwards of one STAMP batch on pre-made tensors, nothing else."""
    k, b, _, h, w = views.shape
    model, chunk = stamp.model, stamp.views_per_forward(k, views.device, b * h * w)
    parts = [p.reshape(-1, *views.shape[2:]) for p in views.split(chunk)]
    if stamp.execution.channels_last:
        parts = [p.contiguous(memory_format=torch.channels_last) for p in parts]
        memory = memory.contiguous(memory_format=torch.channels_last)
    clean = parts[0][:BATCH] if chunk > 1 else parts[0]
    cast = torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else nullcontext()

    def step(_: int) -> None:
        with torch.no_grad(), cast:
            for part in parts:
                with view_groups(model, part.shape[0] // BATCH):
                    model(part)
            stamp.reference(clean)
        for _ in range(2):  # SAM: two forward+backward passes on the memory
            with cast:
                logits = model(memory).float()
            logit_entropy(logits).mean().backward()
        model.zero_grad(set_to_none=True)

    return step


def stamp_table(args: argparse.Namespace) -> None:
    device = torch.device(args.device)
    g = torch.Generator().manual_seed(2)
    n = args.warmup + args.batches
    inputs = [torch.rand(BATCH, 3, 32, 32, generator=g).to(device) for _ in range(n)]

    fast = build_stamp(args)
    one_forward = build_stamp(args, view_chunk=VIEWS)
    plain = build_stamp(args, batched_views=False)
    plain_gen = torch.Generator(device=device).manual_seed(0)
    floor = build_stamp(args)
    premade = make_views(inputs[0], VIEWS, "cotta", torch.Generator(device=device).manual_seed(3))

    def timed(step: Callable[[int], object]) -> tuple[float, float]:
        return seconds_per_batch(step, args.batches, args.warmup, device)

    rows = {
        "(a) fast: Stamp.step": timed(lambda i: fast.step(inputs[i])),
        "(a16) fast views, all 16 views in one forward": timed(lambda i: one_forward.step(inputs[i])),
        "(b) plain: plain views, one forward per view": timed(
            lambda i: plain.step_on_views(plain_make_views(inputs[i], VIEWS, plain_gen))
        ),
        "(c) floor: 17 forwards of 64 + 2 fwd/bwd of 64": timed(
            floor_step(floor, premade, floor.memory.samples(), floor.autocast)
        ),
    }
    parts = {
        "make_views fast": timed(lambda i: make_views(inputs[i], VIEWS, "cotta", fast.generator)),
        "make_views plain": timed(lambda i: plain_make_views(inputs[i], VIEWS, plain_gen)),
        "step_on_views (a without views)": timed(lambda i: fast.step_on_views(premade)),
    }
    with torch.no_grad():
        for chunk in args.chunks:
            probe = build_stamp(args, view_chunk=chunk)
            parts[f"view forwards, {chunk} view(s) per forward"] = timed(lambda i, p=probe: p._view_logits(premade))

    _, batch, _, height, width = premade.shape
    chunk = fast.views_per_forward(VIEWS, device, batch * height * width)
    print(
        f"STAMP throughput: {args.model}, {device}, {torch.get_num_threads()} thread(s), batch {BATCH}, "
        f"K={VIEWS}, auto view chunk {chunk}, channels_last={args.channels_last}, bf16={fast.autocast}, "
        f"{args.batches} timed batch(es) after {args.warmup} warm-up"
    )
    width = max(len(k) for k in (*rows, *parts))
    print(f"{'path':<{width}}  {'ms/batch':>9}  {'images/s':>9}  {'cpu ms/batch':>12}")
    for name, (wall, cpu) in rows.items():
        print(f"{name:<{width}}  {wall * 1e3:9.1f}  {BATCH / wall:9.1f}  {cpu * 1e3:12.1f}")
    print(f"{'parts of the step':<{width}}  {'ms/batch':>9}  {'':>9}  {'cpu ms/batch':>12}")
    for name, (wall, cpu) in parts.items():
        print(f"{name:<{width}}  {wall * 1e3:9.1f}  {'':>9}  {cpu * 1e3:12.1f}")
    (a, a_cpu), (b, b_cpu), (c, c_cpu) = (rows[k] for k in rows if not k.startswith("(a16)"))
    print(f"same ratios of process CPU time: (a)/(b) = {a_cpu / b_cpu:.2f}  (c)/(a) = {c_cpu / a_cpu:.2f}")
    print("ratios of wall seconds per batch: (a)/(b) < 1 = faster than plain; (c)/(a) = share of the floor reached")
    print(f"(a)/(b) = {a / b:.2f}  (c)/(a) = {c / a:.2f}")


def all_methods(args: argparse.Namespace) -> None:
    device = torch.device(args.device)
    model = None  # --model tiny: the trained digits model, as a table's run gets it
    if args.model != "tiny":  # the paper's CIFAR network, random weights: for timing only (slices of paper-scale cells)
        torch.manual_seed(0)
        model = models.create(ARCHITECTURES[args.model], data.num_classes("digits")).eval()
    # one per method below
    spec = RunSpec(method="source", dataset="digits", outlier_set="noise", corruptions=("gaussian_noise",))
    stream = build_stream(spec, max_id=args.max_id)
    n_images = stream.images.shape[0]
    print(
        f"digits, gaussian_noise 5, Noise outliers: {n_images} images in {len(stream)} batches, "
        f"{device}, {torch.get_num_threads()} thread(s), model {args.model}"
    )
    print(f"{'method':<10}  {'images/s':>9}  {'seconds':>8}")
    for name in args.methods.split(",") if args.methods else methods.available():
        method = build_method(spec.with_(method=name), str(device), model=model)
        first = next(iter(stream.batches(device)))
        try:
            for _ in range(args.warmup):
                method.step(first.x)
            method.reset()
            result = run_stream(method, stream, str(device))
        except Exception as exc:  # e.g. OWTTT's Gaussians on random weights: time the others
            print(f"{name:<10}  failed: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            continue
        print(f"{name:<10}  {n_images / result.seconds:9.1f}  {result.seconds:8.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--batches", type=int, default=3, help="timed batches per path")
    parser.add_argument("--warmup", type=int, default=1, help="untimed batches before timing")
    parser.add_argument("--model", default="resnet18_cifar", choices=sorted(ARCHITECTURES))
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument(
        "--chunks", type=lambda s: [int(v) for v in s.split(",") if v], default=[],
        help="also time the view forwards with these views-per-forward counts, e.g. 1,2,4,16",
    )
    parser.add_argument("--channels-last", action="store_true", help="channels-last model and inputs (all paths)")
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast (CUDA only; ignored on CPU)")
    parser.add_argument("--methods", default="", help="with --all-methods: comma-separated names (default: every "
                                                      "method)")
    parser.add_argument("--all-methods", action="store_true",
                        help="images/s of every method on a digits stream (--model tiny: the trained digits model; "
                             "resnet18_cifar: the paper's network with random weights)")
    parser.add_argument("--max-id", type=int, default=256, help="--all-methods: known-class images in the stream")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.all_methods:
        all_methods(args)
    else:
        stamp_table(args)


if __name__ == "__main__":
    main()
