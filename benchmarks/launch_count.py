"""Operator calls and host synchronisations per step of every method, counted on any device.

At 32 px a GPU waits on kernel launches, not arithmetic (docs/gpu_runbook.md §6), and every
host synchronisation (``.item()``, ``bool(tensor)``, ``nonzero``, a boolean mask index) drains
the launch queue. Both are properties of the code, not of the device, so they can be counted on
a CPU: a ``TorchDispatchMode`` sees every ATen operator a step dispatches (about one kernel
launch each on CUDA) and the ones whose output size or value the host must wait for.

Of the syncs, "optimiser" counts the reads of the optimisers' ``step`` counters, which PyTorch
keeps on the CPU (not capturable, not fused): host scalars on any device, so no GPU wait;
"device" is the rest. A ``.cpu()``/``.tolist()`` copy of a device tensor is a wait too, but on a
CPU run it dispatches nothing and is not counted here: the methods say in a comment where they
copy (issue 51: one copy per step in OWTTT, RoTTA and SoTTA).

Some blocks take another code path on a GPU than on a CPU (the CoTTA views' masked colour jitter
and flip, without the index lists whose ``nonzero`` is a sync): ``--gpu-paths`` makes them take
the GPU's paths on the CPU, so the counts are what a GPU dispatches.

Same worlds as ``gpu_throughput.py`` (synthetic stream, stand-in network at the paper's shapes,
batch 64); one warm-up step, then ``--steps`` counted steps.

Usage: .venv/bin/python benchmarks/launch_count.py [--methods cotta,stamp] [--steps 2]
           [--override cotta:view_chunk=32] [--gpu-paths] [--out counts.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_throughput import PAPER, SMALL, Synthetic, parse_overrides, split_options  # noqa: E402

from stamplib import methods  # noqa: E402
from stamplib.blocks import views  # noqa: E402

#: Operators whose result the host must see before it can go on (a sync on CUDA).
SYNCING = {"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2", "repeat_interleave",
           "nonzero_static", "equal", "is_nonzero", "allclose", "item"}
#: Metadata and aliasing operators that launch no kernel.
NO_KERNEL = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze",
             "as_strided", "slice", "select", "detach", "alias", "unbind", "split", "split_with_sizes", "chunk",
             "narrow", "lift_fresh", "empty", "empty_like", "empty_strided", "_reshape_alias", "view_as",
             "expand_as", "set_", "resize_", "_to_copy_noop"}


class Counting(TorchDispatchMode):
    """Counts every operator; ``host_scalars`` (data pointers) names tensors that live on the host
    on any device, whose reads are counted apart in ``host_reads`` rather than as syncs."""

    def __init__(self, host_scalars: frozenset[int] = frozenset()) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.host_scalars = host_scalars
        self.host_reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        name = func.overloadpacket.__name__
        if name == "_local_scalar_dense" and args[0].data_ptr() in self.host_scalars:
            self.host_reads += 1
        self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def optimizer_step_counters(method: Any) -> frozenset[int]:
    """The data pointers of the method's optimisers' ``step`` counters. PyTorch keeps them on the
    CPU unless an optimiser is capturable or fused, so reading one (``_get_value(step)``: Adam's
    bias corrections, once per parameter per-tensor, twice with foreach) never waits for a GPU."""
    return frozenset(state["step"].data_ptr() for o in method.optimizers() for state in o.state.values()
                     if isinstance(state.get("step"), torch.Tensor) and state["step"].device.type == "cpu")


def count_method(world: Synthetic, name: str, steps: int, device: str, options: dict[str, Any]) -> dict[str, Any]:
    overrides, execution = split_options(options, methods.Execution())
    method = world.method(name, device, overrides, execution)
    batches = iter(world.stream.batches(device))
    method.step(next(batches).x)  # warm-up: lazy state, caches
    mode = Counting(optimizer_step_counters(method))
    with mode:
        for _ in range(steps):
            method.step(next(batches).x)
    kernels = sum(n for op, n in mode.ops.items() if op not in NO_KERNEL)
    syncs = sum(n for op, n in mode.ops.items() if op in SYNCING)
    top = [f"{op} {n / steps:.0f}" for op, n in mode.ops.most_common(8)]
    return {"method": name, "options": options, "ops_per_step": round(kernels / steps, 1),
            "syncs_per_step": round(syncs / steps, 1), "optimizer_reads_per_step": round(mode.host_reads / steps, 1),
            "device_syncs_per_step": round((syncs - mode.host_reads) / steps, 1), "top_ops": top}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--methods", default="", help="comma-separated (default: the 14 of the tables)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--small", action="store_true", help="the tiny network (CI smoke run)")
    parser.add_argument("--size", type=int, default=0,
                        help="image side (default: the paper's 32 px); the counts hardly depend on it, the CPU time "
                             "does")
    parser.add_argument("--override", action="append", default=[], help="method:field=value, repeatable")
    parser.add_argument("--gpu-paths", action="store_true",
                        help="blocks take the code paths they take on a GPU (counts of what a GPU dispatches)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.gpu_paths:
        views._gpu_paths = lambda x: True  # the one switch between the views' CPU and GPU paths
    args.batches, args.batch_size, args.bf16, args.channels_last = args.steps + 1, 8 if args.small else 64, False, False
    names = [n for n in args.methods.split(",") if n] or list(methods.TABLE_ORDER)
    overrides = parse_overrides(args.override)
    shape = (SMALL if args.small else PAPER)["cifar10_c"]
    world = Synthetic(dataclasses.replace(shape, size=args.size) if args.size else shape, args)
    rows = [count_method(world, name, args.steps, args.device, overrides.get(name, {})) for name in names]
    print(f"{'method':<12} {'ops/step':>9} {'syncs/step':>11} {'optimiser':>10} {'device':>7}  most frequent")
    for r in rows:
        print(f"{r['method']:<12} {r['ops_per_step']:9.0f} {r['syncs_per_step']:11.0f} "
              f"{r['optimizer_reads_per_step']:10.0f} {r['device_syncs_per_step']:7.0f}  {', '.join(r['top_ops'])}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": args.device, "steps": args.steps, "gpu_paths": args.gpu_paths,
                                              "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
