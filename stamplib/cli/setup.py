"""The commands that set a machine up and say what it has: ``doctor``, ``checkpoints``,
``methods``, ``check-method`` and ``train-source`` (docs/running.md, docs/real_data.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stamplib import flags
from stamplib.cli import common


def doctor_parser(sub: Any) -> None:
    p = sub.add_parser("doctor", help="versions, device, where data and checkpoints are found")
    flags.add(p, data_root=True)
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    """What is found where; exit 1 when a file is damaged (a data set, package data or a checkpoint
    whose SHA-256 is not its recorded one), so that a script can tell."""
    from stamplib.evaluation.provenance import doctor_lines

    lines = doctor_lines(common.context(args))
    print("\n".join(lines))
    damaged = [line.split()[0] for line in lines if line.startswith("  ") and len(line.split()) > 1
               and line.split()[1] in ("DAMAGED", "REFUSED")]
    if damaged:
        print(f"doctor: {len(damaged)} damaged file(s) ({', '.join(damaged)}): each line above says how to restore "
              "it", file=sys.stderr)
        return 1
    return 0


def checkpoints_parser(sub: Any) -> None:
    p = sub.add_parser("checkpoints", help="list the source networks and where each is found; import a folder of them")
    p.add_argument("action", choices=["list", "import"])
    p.add_argument("folder", nargs="?", default=None, help="import: the folder holding <name>.pt and <name>.json")
    p.set_defaults(func=cmd_checkpoints)


def cmd_checkpoints(args: argparse.Namespace) -> int:
    """List the registered checkpoints with where they were found, or import a folder of them."""
    from stamplib.models import checkpoints

    if args.action == "list":
        print("\n".join(checkpoints.status_lines()))
        return 0
    if not args.folder:
        raise ValueError("checkpoints import needs the folder that holds <name>.pt and <name>.json")
    for path in checkpoints.import_dir(args.folder):
        print(f"imported {path} (SHA-256 checked)")
    return 0


def methods_parser(sub: Any) -> None:
    p = sub.add_parser("methods", help="list methods and their hyperparameters")
    p.add_argument("--dataset", default="cifar10_builtin")
    p.set_defaults(func=cmd_methods)


def cmd_methods(args: argparse.Namespace) -> int:
    from stamplib import data, methods

    print("\n".join(methods.listing_lines(data.hyperparameter_set_of(args.dataset))))
    return 0


def check_method_parser(sub: Any) -> None:
    p = sub.add_parser("check-method", help="check the method contract on one method")
    p.add_argument("name", help="a registered name or package.module:Class")
    p.set_defaults(func=cmd_check_method)


def cmd_check_method(args: argparse.Namespace) -> int:
    """Check the method contract (stamplib.methods.contract) on one method, on the digits
    benchmark's tiny ResNet: one line per check, then the counts."""
    from functools import partial

    from stamplib import models
    from stamplib.methods import contract

    results = contract.check_method(args.name, partial(models.create, "resnet_cifar_tiny"))
    print("\n".join([*map(str, results), contract.counts_line(results)]))
    return 1 if any(r.outcome == "failed" for r in results) else 0


def train_source_parser(sub: Any) -> None:
    p = sub.add_parser("train-source", help="train the source network of an ID dataset (resumable)")
    p.add_argument("--dataset", required=True, help="e.g. cifar10_jpeg, cifar10_jpeg_8_2, cifar10_c")
    p.add_argument("--recipe", default=None, choices=["paper", "fast", "compact"],
                   help="the training recipe (default: the checkpoint's own; docs/real_data.md)")
    p.add_argument("--epochs", type=int, default=0, help="shorten the recipe (0: its full length)")
    p.add_argument("--bf16", action="store_true",
                   help="bfloat16 autocast (faster only on CPUs with native bf16)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the training forward")
    p.add_argument("--seed", type=flags.read_seed, default=0,
                   help="the training seed: network k of the data set (run --network k)")
    flags.add(p, data_root=True, device=True)
    p.set_defaults(func=cmd_train_source)


def cmd_train_source(args: argparse.Namespace) -> int:
    """Train (or resume, or reuse) the source network of an ID dataset with its §4.2 recipe."""
    from stamplib.models import train_source_for

    context = common.context(args)
    result = train_source_for(args.dataset, recipe=args.recipe, epochs=args.epochs, seed=args.seed,
                              device=context.device, bf16=args.bf16, compile=args.compile,
                              data_root=context.data_root)
    print(result.summary())
    return 0
