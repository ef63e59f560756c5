"""Command line: ``python -m stamplib {run,doctor,notebooks,methods}``."""

from __future__ import annotations

import argparse
import ast
import json
import sys
from typing import Any


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _pairs(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"expected NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k] = _value(v)
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from stamplib import RunSpec, run
    from stamplib.evaluation.store import ResultsStore

    spec = RunSpec.make(
        args.method,
        dataset=args.dataset,
        outliers=args.outliers,
        corruptions=tuple(args.corruptions.split(",")),
        severity=args.severity,
        outlier_ratio=args.ratio,
        seed=args.seed,
        profile=args.profile,
        overrides=_pairs(args.set),
    )
    record = run(spec, store=ResultsStore(args.results) if args.results else None,
                 device=args.device, force=args.force, progress=True)
    print(f"{'corruption':20s} {'ACC':>6s} {'AUROC':>6s} {'H':>6s}")
    for name, m in record["per_corruption"].items():
        flag = "  COLLAPSED: " + m["collapse_reason"] if m["collapsed"] else ""
        print(f"{name:20s} {m['acc']:6.1f} {m['auroc']:6.1f} {m['h']:6.1f}{flag}")
    mean = record["mean"]
    print(f"{'mean':20s} {mean['acc']:6.1f} {mean['auroc']:6.1f} {mean['h']:6.1f}")
    if args.json:
        print(json.dumps(record, indent=1))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    import platform

    import torch

    import stamplib
    from stamplib import data, methods, paths

    print(f"stamplib {stamplib.__version__}  python {platform.python_version()}  torch {torch.__version__}")
    print(f"device: cuda available={torch.cuda.is_available()}"
          + (f" ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else "")
          + f", CPU threads={torch.get_num_threads()}")
    print(f"data root:   {paths.data_root(args.data_root)}")
    print(f"checkpoints: {paths.checkpoints_dir()}")
    print(f"results:     {paths.results_dir()}")
    print(f"methods:     {', '.join(methods.available())}")
    print("datasets and outlier sets:")
    for name, found, where in data.dataset_status(args.data_root):
        print(f"  {name:22s} {'found    ' if found else 'missing  '} {where}")
    ckpts = sorted(paths.checkpoints_dir().glob("*.pt")) if paths.checkpoints_dir().is_dir() else []
    print("checkpoints found:" + ("" if ckpts else " none yet (the built-in one trains on first use)"))
    for c in ckpts:
        print(f"  {c}")
    return 0


def cmd_notebooks(args: argparse.Namespace) -> int:
    from stamplib.notebook_runner import run_notebooks

    return run_notebooks(
        profile=args.profile, only=args.only, data_root=args.data_root, device=args.device,
        extra=_pairs(args.param), timeout=args.timeout,
    )


def cmd_train_source(args: argparse.Namespace) -> int:
    """Train (or resume, or reuse) the source network of an ID dataset with its §4.2 recipe."""
    from stamplib import data
    from stamplib.models import SOURCE_MODELS, train_source
    from stamplib.models.checkpoints import REGISTRY

    if args.dataset not in SOURCE_MODELS or SOURCE_MODELS[args.dataset][2] not in REGISTRY:
        trainable = [d for d, (_, _, w) in SOURCE_MODELS.items() if w in REGISTRY and REGISTRY[w].recipe]
        raise ValueError(f"no trainable source model for {args.dataset!r}; choose one of {', '.join(trainable)}")
    checkpoint = SOURCE_MODELS[args.dataset][2]
    entry = REGISTRY[checkpoint]
    images, labels = data.source_train(args.dataset, args.data_root)
    base = args.dataset.removesuffix("_8_2").removesuffix("_80_20")
    test_images, test_labels = data.id_set(base, args.data_root).clean_pool()
    result = train_source(
        entry.recipe, images, labels, test_images, test_labels, name=checkpoint,
        epochs=args.epochs or None, seed=args.seed, device=args.device, bf16=args.bf16,
    )
    side = result.sidecar
    print(f"{checkpoint}: {side['epochs']} epochs, best epoch {side['best_epoch']}, clean test accuracy "
          f"{100 * side['clean_test_accuracy']:.2f}%, {side['seconds']:.0f} s -> {result.checkpoint}")
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    from stamplib import methods

    for name in methods.available():
        print(f"{name:10s} {methods.resolve_config(name, args.dataset)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stamplib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="compute one RunSpec and store its record")
    p.add_argument("--method", required=True)
    p.add_argument("--dataset", default="digits")
    p.add_argument("--outliers", default="noise", help="outlier set, or 'none' for closed-set")
    p.add_argument("--corruptions", default="gaussian_noise", help="comma-separated names")
    p.add_argument("--severity", type=int, default=5)
    p.add_argument("--ratio", type=float, default=0.2, help="outliers / (ID + outliers)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", default="quick", choices=["smoke", "quick", "full"])
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="hyperparameter override")
    p.add_argument("--device", default="cpu")
    p.add_argument("--results", default=None, help="results folder (default: results/)")
    p.add_argument("--force", action="store_true", help="recompute even if stored")
    p.add_argument("--json", action="store_true", help="also print the whole record")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("doctor", help="versions, device, where data and checkpoints are found")
    p.add_argument("--data-root", default=None)
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("notebooks", help="execute notebooks with papermill")
    p.add_argument("--profile", default="quick", choices=["smoke", "quick", "full"])
    p.add_argument("--only", nargs="*", default=[], metavar="NAME")
    p.add_argument("--data-root", default=None)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds")
    p.set_defaults(func=cmd_notebooks)

    p = sub.add_parser("train-source", help="train the source network of an ID dataset (resumable)")
    p.add_argument("--dataset", required=True, help="e.g. cifar10_jpeg, cifar10_jpeg_8_2, cifar10_c")
    p.add_argument("--epochs", type=int, default=0, help="shorten the recipe (0: its full length)")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast (about 2x faster on CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--data-root", default=None)
    p.set_defaults(func=cmd_train_source)

    p = sub.add_parser("methods", help="list methods and their hyperparameters")
    p.add_argument("--dataset", default="digits")
    p.set_defaults(func=cmd_methods)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
