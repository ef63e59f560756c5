"""Replaying a network's kernels as CUDA graphs, behind one switch.

At 32 px a GPU waits on kernel launches, not arithmetic (docs/gpu_runbook.md §6): a ResNet-18
forward and backward is a few hundred small kernels, each launched from Python. Compiled with
``torch.compile``'s ``cudagraphs`` backend, a network is traced once per input shape and module
state (a changed :attr:`~stamplib.blocks.bn.BatchStatsNorm2d.groups` or train/eval mode is
guarded and traced anew; after a second batch size the batch dimension is traced symbolically)
and its forward and backward replay as CUDA graphs, one launch each. The backend keeps the
eager kernels (no code generation), so outputs equal the eager ones up to float rounding;
``tests/cuda`` compares every method with and without the switch. On a CPU the trace runs but
nothing is replayed, which lets the CPU suite check the switch's results.

A compiled network is an ``OptimizedModule`` around the original one: a deep copy (a method's
teacher or anchor, made at every reset) is compiled around the copy, parameter names gain the
prefix ``_orig_mod.``, and attribute access reaches the original module.

Off by default and never used for records: a record's numbers come from eager kernels. Measured
on an H200 (results/gpu_throughput/2026-11-26-h200/tests_cuda.txt): at most 1.1× faster where the replays equal the
eager
outputs, and they fail for STAMP and SoTTA (batches that change size) and RoTTA (statistics
assigned from a forward's outputs); after CoTTA's views went into one forward, the methods at
32 px wait mostly on float32 arithmetic, which graphs do not shorten.
"""

from __future__ import annotations

import torch
from torch import nn


def replayed(network: nn.Module) -> nn.Module:
    """``network`` compiled so that its forwards and backwards replay as CUDA graphs."""
    return torch.compile(network, backend="cudagraphs")


def step_begins() -> None:
    """Tell the graph replays that a new step starts: outputs of the last step's replays may
    be overwritten from here on (a no-op when nothing is compiled)."""
    torch.compiler.cudagraph_mark_step_begin()
