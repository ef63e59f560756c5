"""Per-epoch wall time and clean accuracy of a source model's training, read from its files.

The trainer writes its history (epoch, resolution, learning rate, train loss, clean test
accuracy, cumulative seconds) into the checkpoint's sidecar ``<name>.json`` when it finishes,
and into the resume state ``<name>.resume.pt`` after every epoch while it runs. This script
prints that history as a table, so a training run is reported as a benchmark rather than
asserted by a timed test::

    python benchmarks/training_epochs.py ResNet18_10_jpeg
    python benchmarks/training_epochs.py ResNet18_8_jpeg --markdown

The times are those of the machine and load the run had (the sidecar records the thread
count); a run resumed across sessions counts only the time spent training.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

from stamplib import paths
from stamplib.models import checkpoints


def training_history(name: str, directory: Path | None = None) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
    """History of checkpoint ``name``: from its sidecar when training finished, otherwise from
    its resume state. Returns (history, where it came from, the sidecar or {})."""
    directory = directory or paths.checkpoints_dir()
    checkpoint = directory / f"{name}.pt"
    sidecar = checkpoints.read_sidecar(checkpoint) if checkpoint.is_file() else None
    if sidecar and sidecar.get("history"):
        return list(sidecar["history"]), f"sidecar {checkpoints.sidecar_path(checkpoint)}", sidecar
    resume = directory / f"{name}.resume.pt"
    if resume.is_file():
        state = torch.load(resume, map_location="cpu", weights_only=False)
        return list(state.get("history", [])), f"resume state {resume} (training unfinished)", {}
    raise SystemExit(
        f"no training history for {name!r} in {directory}: train it first "
        f"(python -m stamplib train-source --dataset ... --recipe fast) or set STAMPLIB_HOME"
    )


def format_table(history: list[dict[str, Any]], markdown: bool = False) -> str:
    """One row per epoch: its own seconds (not cumulative), resolution, lr, loss, accuracy."""
    header = ["epoch", "px", "lr (start)", "train loss", "test acc %", "epoch min", "total min"]
    rows = []
    previous = 0.0
    for entry in history:
        total = float(entry.get("seconds", float("nan")))
        rows.append([
            str(entry["epoch"]), str(entry.get("resolution", "")), f"{entry.get('lr', float('nan')):.4f}",
            f"{entry.get('train_loss', float('nan')):.3f}", f"{100 * entry.get('test_accuracy', float('nan')):.2f}",
            f"{(total - previous) / 60:.1f}", f"{total / 60:.1f}",
        ])
        previous = total
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), *(fmt.format(*r) for r in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="checkpoint name, e.g. ResNet18_10_jpeg")
    parser.add_argument("--dir", type=Path, default=None, help="checkpoint directory (default: STAMPLIB_HOME's)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    history, origin, sidecar = training_history(args.name, args.dir)
    print(f"{args.name}: {len(history)} epochs, from {origin}")
    for key in ("recipe", "threads", "compile", "clean_accuracy", "sha256"):
        if key in sidecar:
            print(f"  {key}: {sidecar[key]}")
    print(format_table(history, markdown=args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
