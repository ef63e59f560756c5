"""Where a method's step spends its time (issue 51, item 3): ``torch.profiler`` over a few steps.

For each method: the synthetic world of ``gpu_throughput.py`` (same network, shape and stream),
warm-up steps, then ``--steps`` profiled steps. Printed and written as JSON:

* wall seconds per step, device-busy seconds per step (the sum of the kernels' own times) and
  their ratio: a ratio far below 1 means the device waits on the host (launches, syncs);
* the kernels' own device time by family (convolution, matrix product, batch norm,
  element-wise, reduction, copy, other), so the non-convolution costs are named;
* the top operators by own device time and by host time, with their call counts per step.

Usage: python benchmarks/gpu_profile.py [--device cuda] [--methods cotta,stamp] [--tf32]
           [--steps 5] [--out profile.json]
       python benchmarks/gpu_profile.py --device cpu --small   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_throughput import PAPER, SMALL, Synthetic  # noqa: E402

from stamplib import methods  # noqa: E402
from stamplib.evaluation.precision import set_tf32, tf32_state  # noqa: E402

FAMILIES = (  # first match wins; matched against the lower-cased kernel or operator name
    ("batch norm", ("batch_norm", "batchnorm", "bn_fw", "bn_bw", "welford")),
    ("layout", ("nchwtonhwc", "nhwctonchw")),  # cuDNN's format conversions around its kernels
    ("convolution", ("conv", "cudnn", "implicit_gemm", "wgrad", "dgrad", "fprop", "xmma", "sm90_xmma")),
    ("matrix product", ("gemm", "matmul", "addmm", "cublas", "mm_", "bmm", "cutlass")),
    ("reduction", ("reduce", "sum", "mean", "norm", "max", "min", "softmax", "argmax", "topk", "sort")),
    ("copy", ("copy", "memcpy", "memset", "cat", "index", "gather", "scatter", "stack")),
    ("element-wise", ("elementwise", "vectorized", "unrolled", "pointwise", "foreach", "mul", "add",
                      "div", "exp", "log", "clamp", "where", "triton")),
)


def family(name: str) -> str:
    low = name.lower()
    for label, keys in FAMILIES:
        if any(key in low for key in keys):
            return label
    return "other"


def own_device_us(event: Any) -> float:
    for attr in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(event, attr):
            return float(getattr(event, attr))
    return 0.0


def profile_method(world: Synthetic, name: str, args: argparse.Namespace) -> dict[str, Any]:
    method = world.method(name, args.device, {}, methods.Execution())  # as records run
    batches = [b.x for _, b in zip(range(args.warmup + args.steps), world.stream.batches(args.device))]
    for x in batches[: args.warmup]:
        method.step(x)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    started = time.perf_counter()
    with profile(activities=activities) as prof:
        for x in batches[args.warmup:]:
            method.step(x)
        sync()
    wall = (time.perf_counter() - started) / args.steps
    events = prof.key_averages()
    kernels = [e for e in events if own_device_us(e) > 0 and e.device_type != torch.autograd.DeviceType.CPU] \
        if args.device == "cuda" else []
    busy_us = sum(own_device_us(e) for e in kernels)
    by_family: dict[str, float] = {}
    for e in kernels:
        by_family[family(e.key)] = by_family.get(family(e.key), 0.0) + own_device_us(e) / args.steps / 1e3
    ops = [e for e in events if e.key.startswith("aten::")]
    top_device = sorted(kernels, key=own_device_us, reverse=True)[: args.top]
    top_host = sorted(ops, key=lambda e: e.self_cpu_time_total, reverse=True)[: args.top]
    return {
        "method": name,
        "wall_ms_per_step": round(wall * 1e3, 3),
        "device_busy_ms_per_step": round(busy_us / args.steps / 1e3, 3),
        "busy_ratio": round(busy_us / args.steps / 1e3 / (wall * 1e3), 3) if wall > 0 else None,
        "kernels_per_step": round(sum(e.count for e in kernels) / args.steps, 1),
        "aten_ops_per_step": round(sum(e.count for e in ops) / args.steps, 1),
        "device_ms_by_family": {k: round(v, 3) for k, v in sorted(by_family.items(), key=lambda kv: -kv[1])},
        "top_device": [{"name": e.key[:120], "ms_per_step": round(own_device_us(e) / args.steps / 1e3, 4),
                        "calls_per_step": e.count / args.steps, "family": family(e.key)} for e in top_device],
        "top_host": [{"name": e.key, "ms_per_step": round(e.self_cpu_time_total / args.steps / 1e3, 4),
                      "calls_per_step": e.count / args.steps} for e in top_host],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cpu", "cuda"))
    parser.add_argument("--methods", default="cotta,stamp")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 (records never do)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--small", action="store_true", help="the tiny CPU network: a smoke run")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    set_tf32(args.tf32)
    args.batches = args.warmup + args.steps
    if args.small:
        args.batch_size = 8
    shape = (SMALL if args.small else PAPER)["cifar10_c"]
    world = Synthetic(shape, args)
    rows = []
    for name in args.methods.split(","):
        row = profile_method(world, name, args)
        rows.append(row)
        print(f"{name}: {row['wall_ms_per_step']} ms/step wall, {row['device_busy_ms_per_step']} ms device-busy "
              f"(ratio {row['busy_ratio']}), {row['kernels_per_step']} kernels, {row['aten_ops_per_step']} aten ops")
        print("  device ms/step by family:", row["device_ms_by_family"])
        for item in row["top_device"][:15]:
            print(f"  dev {item['ms_per_step']:8.3f} ms x{item['calls_per_step']:6.1f} [{item['family']}] "
                  f"{item['name']}")
        for item in row["top_host"][:15]:
            print(f"  host {item['ms_per_step']:8.3f} ms x{item['calls_per_step']:6.1f} {item['name']}")
    if args.out:
        env = {"device": args.device, "torch": torch.__version__, "tf32": tf32_state(),
               "device_name": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
               "steps": args.steps, "batch_size": args.batch_size}
        Path(args.out).write_text(json.dumps({"environment": env, "methods": rows}, indent=1))


if __name__ == "__main__":
    main()
