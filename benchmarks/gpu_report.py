"""A before/after throughput table from one ``gpu_session.sh`` call (issue 42).

Reads ``before.json``, ``after.json`` and (if present) ``graphs.json`` of a folder (the JSON
reports of ``gpu_throughput.py``, measured in one call on one GPU) and renders, per method, the
images per second before and after and with the CUDA-graph switch, and the hours of Table 1's
CIFAR-10 half (56 cells of 15 corruptions, 12,500 images each) at those rates.

``--pairs`` renders instead every ``before<suffix>.json``/``after<suffix>.json`` pair of one or
more folders (issue 51: float32 and ``--tf32``, one warm-up batch or ten) as one table, with
the hours of Table 1's CIFAR-10 half per report. What each folder showed is its
``findings.json``; the runbook's table of expected rates is ``stamplib.report.guides``'.

Usage: .venv/bin/python benchmarks/gpu_report.py results/gpu_throughput/<folder>
       .venv/bin/python benchmarks/gpu_report.py --pairs FOLDER [FOLDER ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stamplib.methods import TABLE_ORDER  # noqa: E402
from stamplib.report.guides import hyperparameter_set_of_row  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHAPE = "cifar10_c"


def load(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def rates(report: dict[str, Any] | None) -> dict[str, float]:
    """images/s per method of the CIFAR shape (methods that failed are left out)."""
    if report is None:
        return {}
    return {r["method"]: r["images_per_s"] for r in report["rows"]
            if hyperparameter_set_of_row(r) == SHAPE and not r["error"]}


def table_hours(per_s: dict[str, float], shape_row: dict[str, Any]) -> float:
    """Hours of Table 1's CIFAR-10 half for these methods at these rates."""
    cells = shape_row["outlier_sets"] * 15
    return sum(shape_row["stream_images"] * cells / rate for rate in per_s.values()) / 3600


def render(folder: Path) -> str:
    before, after, graphs = (load(folder, n) for n in ("before", "after", "graphs"))
    assert after is not None, f"{folder}/after.json is missing: run benchmarks/gpu_session.sh"
    old, new, replayed = rates(before), rates(after), rates(graphs)
    shape_row = next(r for r in after["rows"] if hyperparameter_set_of_row(r) == SHAPE)
    env = after
    lines = [
        f"Measured by `benchmarks/gpu_session.sh` in one call on one {env['device_name']} (driver {env['driver']}, "
        f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}): `gpu_throughput.py --shapes {SHAPE} "
        f"--batches {env['batches']}` on the code before issue 42 and after it, synthetic data, batch "
        f"{env['batch_size']}, TF32 off as in records; the graphs column adds `--replay-graphs --warmup 3` "
        f"(not for records). Raw reports: `{folder.relative_to(REPO)}/`.",
        "",
        "| method | before (images/s) | after (images/s) | after / before | CUDA graphs (images/s) | graphs / after |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for method, rate in new.items():
        was, fast = old.get(method), replayed.get(method)
        lines.append(
            f"| {method} | {'' if was is None else f'{was:,.0f}'} | {rate:,.0f} | "
            f"{'' if was is None else f'{rate / was:.2f}×'} | {'' if fast is None else f'{fast:,.0f}'} | "
            f"{'' if fast is None else f'{fast / rate:.2f}×'} |"
        )
    lines += ["", f"Table 1, CIFAR-10 half ({len(new)} methods × {shape_row['outlier_sets']} outlier sets × 15 "
                  f"corruptions "
              f"× {shape_row['stream_images']:,} images) on this GPU:"]
    if len(old) == len(new):
        lines.append(f"before **{table_hours(old, shape_row):.2f} h**, after **{table_hours(new, shape_row):.2f} h** "
                     "(eager kernels, as records run).")
    else:
        lines.append(f"after **{table_hours(new, shape_row):.2f} h** (before: not every method measured).")
    return "\n".join(lines)


def _options(report: dict[str, Any]) -> str:
    tf32 = "TF32" if report["tf32"]["cudnn"] or report["tf32"]["matmul"] else "float32"
    return f"{tf32}, {report['warmup']} warm-up batch{'es' if report['warmup'] != 1 else ''}, {report['batches']} timed"


def render_pairs(folders: list[Path]) -> str:
    """One table of every before/after pair found in ``folders`` (columns per pair), with each
    report's Table 1 hours (left blank where a method failed or was not timed)."""
    columns: list[tuple[str, dict[str, Any]]] = []
    for folder in folders:
        reports = {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))
                   if path.stem.startswith(("before", "after"))}
        pairs = [(name, "after" + name[len("before"):]) for name in reports if name.startswith("before")]
        paired = {name for pair in pairs for name in pair}
        order = [name for pair in pairs for name in pair if name in reports]
        order += [name for name in reports if name not in paired]  # e.g. a repeat of an after run
        columns += [(f"{folder.name}/{name}.json: {_options(reports[name])}", reports[name]) for name in order]
    assert columns, f"no before*/after* pairs in {', '.join(map(str, folders))}"
    env = columns[0][1]
    methods: list[str] = []
    for _, report in columns:
        methods += [m for m in (r["method"] for r in report["rows"]) if m not in methods]
    lines = [
        f"Measured on one {env['device_name']} (driver {env['driver']}, torch {env['torch']}, CUDA {env['cuda']}, "
        f"cuDNN {env['cudnn']}) with `gpu_throughput.py --shapes {SHAPE}`, synthetic data, batch {env['batch_size']}; "
        "the reports of one folder come from one call. Images/s; a blank is a method that failed (reason in the raw "
        "report) "
        "or was not timed. Raw reports: " + ", ".join(f"`{f.relative_to(REPO)}/`" for f in folders) + ".",
        "",
        "| column | report |",
        "| --- | --- |",
    ]
    lines += [f"| {i + 1} | {name} |" for i, (name, _) in enumerate(columns)]
    lines += ["", "| method | " + " | ".join(str(i + 1) for i in range(len(columns))) + " |",
              "| --- |" + " --- |" * len(columns)]
    per_column = [(rates(report), {r["method"]: r for r in report["rows"] if hyperparameter_set_of_row(r) == SHAPE})
                  for _, report in columns]
    for method in methods:
        cells = []
        for ok, rows in per_column:
            if method in ok:
                cells.append(f"{ok[method]:,.0f}")
            else:
                cells.append("fails" if method in rows and rows[method]["error"] else "")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    hours = []
    for ok, rows in per_column:
        complete = set(ok) == set(rows) >= set(TABLE_ORDER)  # every table row measured, none failed
        hours.append(f"{table_hours(ok, next(iter(rows.values()))):.2f}" if complete else "")
    lines.append("| **Table 1, CIFAR-10 half (h)** | " + " | ".join(hours) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, nargs="+")
    parser.add_argument("--pairs", action="store_true", help="every before*/after* pair of the folders, one table")
    args = parser.parse_args(argv)
    folders = [f.resolve() for f in args.folder]
    if not args.pairs and len(folders) != 1:
        parser.error("one folder, or --pairs for several")
    print(render_pairs(folders) if args.pairs else render(folders[0]))


if __name__ == "__main__":
    main()
