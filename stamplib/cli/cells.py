"""``run``: one cell, a :class:`stamplib.RunSpec` made of the flags, computed and stored. Each flag
is named after the spec field it sets (``--outlier-ratio`` sets ``outlier_ratio``); the spec
checks every value (:mod:`stamplib.evaluation.spec`, :class:`stamplib.data.StreamSpec`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from stamplib import flags
from stamplib.cli import common


def stream_flags(parser: argparse.ArgumentParser) -> None:
    """How the stream is made and fed: the flags of :class:`stamplib.data.StreamSpec`'s fields
    (a flag left out keeps the field's default), and ``--stream NAME=VALUE`` for any field."""
    p = parser.add_argument_group("the stream (stamplib.data.StreamSpec; docs/beyond_the_paper.md)")
    p.add_argument("--continual", action="store_true", help="no reset between the corruptions")
    p.add_argument("--mixed-domains", action="store_true", help="all corruptions in one shuffled stream")
    p.add_argument("--gradual", action="store_true", help="CoTTA's gradual severity schedule")
    p.add_argument("--dirichlet", type=float, default=None, help="non-i.i.d. label order, concentration δ")
    p.add_argument("--outlier-burst", type=int, default=None, help="outliers arrive in runs of this length")
    p.add_argument("--batch-size", type=int, default=None, help="samples per batch (the paper's 64)")
    p.add_argument("--label-shift", default=None, metavar="SHIFT", help="'imbalance:R', 'sorted' or both")
    p.add_argument("--realistic", action="store_true", help="the realistic online protocol (Alfarra et al. 2024)")
    p.add_argument("--relative-speed", type=int, default=None, metavar="C",
                   help="C(g) of the realistic protocol (0: measured in the run)")
    flags.add_pairs(p, "--stream", "any option of the stream by its field name, e.g. --stream schedule=continual")


def stream_of(args: argparse.Namespace) -> Any:
    """The StreamSpec of the stream flags (a flag named after a field sets it; the schedule
    comes from its three switches) and the ``--stream`` items; one option given both ways is
    an error."""
    from stamplib.data import SCHEDULE_FLAGS, StreamSpec

    switched = StreamSpec.from_key_fields(**{flag: True for flag in SCHEDULE_FLAGS.values() if getattr(args, flag)})
    given = {name: value for name in StreamSpec.key_names() - {"schedule", "realistic", *SCHEDULE_FLAGS.values()}
             if (value := getattr(args, name, None)) is not None}
    if switched.schedule != "episodic":
        given["schedule"] = switched.schedule
    named = flags.pairs(args.stream)
    # A relative speed given at all is a run of the realistic protocol, 0 (C(g) measured in the
    # run) included: 0 is a value here, not the flag left out.
    speed_given = args.relative_speed is not None or "relative_speed" in named
    if args.realistic or (speed_given and "realistic" not in named):
        given["realistic"] = True
    if twice := sorted(set(named) & set(given)):
        raise ValueError(f"stream option(s) {twice} given twice: by a flag and by --stream")
    return StreamSpec.parse({**given, **named})


def adapted_dataset(text: str) -> str:
    """``--dataset``'s reading where a source network is adapted (``run``, ``tune``): a data set
    read from files (``npz:``, ``folder:``) has no source network of its own, so it is refused here,
    in one line that says what works."""
    from stamplib import validation
    from stamplib.data.lookup import DATASETS, parse_scheme

    if parse_scheme(text) is not None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is a data set read from files, which has no source network to adapt: register it with "
            "its checkpoint (docs/architecture.md, Adding a data set) and give its name, or give the files as "
            "--outlier-set")
    try:
        return validation.check_choice("dataset", text, DATASETS)  # the registered ones only
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def run_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="compute one RunSpec and store its record")
    p.add_argument("--method", required=True)
    p.add_argument("--dataset", default="cifar10_builtin", type=adapted_dataset,
                   help="ID data set (default: the built-in CIFAR-10 photographs)")
    p.add_argument("--network", default=0, type=flags.read_seed,
                   help="the source network: its training seed (0 = the registered one)")
    p.add_argument("--outlier-set", default="noise", help="outlier set, or 'none' for closed-set")
    common.old_flag(p, "--outliers", "--outlier-set")
    p.add_argument("--corruptions", default="gaussian_noise", help="comma-separated names")
    p.add_argument("--severity", type=int, default=5)
    p.add_argument("--outlier-ratio", type=float, default=0.2, help="outliers / (ID + outliers)")
    common.old_flag(p, "--ratio", "--outlier-ratio", type=float)
    p.add_argument("--seed", type=flags.read_seed, default=0)
    flags.add(p, profile=True, data_root=True, device=True, results=True)
    flags.add_pairs(p, "--set", "hyperparameter override, typed as its config field says (e.g. lr=0.001)")
    stream_flags(p)
    p.add_argument("--force", action="store_true", help="recompute even if stored")
    common.into_committed_flag(p)
    p.add_argument("--json", action="store_true", help="also print the whole record")
    p.add_argument("--deterministic", action="store_true", help="deterministic GPU kernels (slower)")
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from stamplib import RunSpec, run
    from stamplib.evaluation.runner import summary_lines

    context = common.context(args, writes=True)
    if args.deterministic:
        from stamplib.determinism import set_deterministic

        set_deterministic()
    spec = RunSpec.make(args.method, overrides=flags.pairs(args.set), dataset=args.dataset,
                        outlier_set=args.outlier_set, corruptions=tuple(args.corruptions.split(",")),
                        severity=args.severity,
                        outlier_ratio=args.outlier_ratio, seed=args.seed, profile=args.profile,
                        stream=stream_of(args), network=args.network)
    from stamplib.experiments import grid

    def waiting(holder: dict[str, Any]) -> None:
        print(f"cell {spec.key()} is being computed by another process ({holder.get('job_id', '?')}): waiting for "
              "its record", file=sys.stderr, flush=True)

    try:
        # Claimed as a grid job claims its cells: a second run of this cell at the same time
        # waits for this one's record instead of computing it again.
        record = grid.run_claimed(spec, context, run, force=args.force, progress=True, on_wait=waiting)
    except KeyboardInterrupt as stop:
        return common.interrupted(stop, "0 of 1 cells done; its finished corruptions are kept")
    except RuntimeError as err:
        from stamplib.determinism import refusal

        reason = refusal(err) if args.deterministic else None
        if reason is None:
            raise
        raise ValueError(f"--deterministic cannot serve method {args.method!r} on {args.device}: {reason}") from err
    print("\n".join(summary_lines(record)))
    if args.json:
        print(json.dumps(record.to_json(), indent=1))
    return 0
