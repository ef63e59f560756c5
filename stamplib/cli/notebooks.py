"""The notebooks' commands: ``notebooks`` executes them (docs/notebooks.md), ``site`` builds the
executed ones into a website, ``course`` releases and grades the course's lab (docs/course_lab.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from stamplib import flags
from stamplib.cli import common


def notebooks_parser(sub: Any) -> None:
    p = sub.add_parser("notebooks", help="execute notebooks with papermill")
    flags.add(p, profile=True, data_root=True, device=True)
    p.add_argument("--only", nargs="*", default=[], metavar="NAME")
    flags.add_pairs(p, "--param", "a notebook parameter, e.g. methods=source,stamp or seeds=0,1,2")
    p.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds")
    p.add_argument("--jobs", type=common.worker_count(), default=1,
                   help="notebooks executed at once, each in its own process")
    p.set_defaults(func=cmd_notebooks)


def cmd_notebooks(args: argparse.Namespace) -> int:
    from stamplib.notebook_runner import run_notebooks

    with common.context(args, writes=True).exported():  # the kernels build their context from it, naming this command
        return run_notebooks(profile=args.profile, only=args.only, data_root=args.data_root, device=args.device,
                             extra=flags.pairs(args.param), timeout=args.timeout, jobs=common.jobs(args.jobs))


def site_parser(sub: Any) -> None:
    p = sub.add_parser("site", help="build the executed notebooks (./run_all.sh) into a website, build/site")
    flags.add(p, profile="whose executed notebooks: build/notebooks/<profile>")
    p.add_argument("--out", default=None, help="default: build/site")
    p.add_argument("--verbose", action="store_true", help="show Sphinx's output")
    p.set_defaults(func=cmd_site)


def cmd_site(args: argparse.Namespace) -> int:
    """The executed notebooks of one profile as a website in build/site."""
    from stamplib.site import build_site

    index = build_site(args.profile, common.context(args).figures, out=Path(args.out) if args.out else None,
                       quiet=not args.verbose)
    print(f"site built: open {index}")
    return 0


def course_parser(sub: Any) -> None:
    p = sub.add_parser("course", help="the course's lab: release the student copies, grade them (docs/course_lab.md)")
    actions = p.add_subparsers(dest="action", required=True)
    release = actions.add_parser("release", help="write the student copies of notebooks 00 and 14-17 and a README")
    release.add_argument("out", help="the folder to write them to (new or empty)")
    release.add_argument("--force", action="store_true", help="write into a folder that is not empty")
    grade = actions.add_parser("grade", help="run each handed-in lesson with the package's checks; write grades.csv")
    grade.add_argument("submissions", help="the folder of the handed-in notebooks (searched at any depth)")
    grade.add_argument("--timeout", type=float, default=120,
                       help="seconds per notebook for the student's code and the checks")
    grade.add_argument("--jobs", type=common.worker_count(), default=1, help="notebooks graded at once")
    grade.add_argument("--out", default=None, help="the grades file (default: SUBMISSIONS/grades.csv)")
    grade.add_argument("--executed", default=None, metavar="FOLDER",
                       help="also keep the notebooks the grader executed, to see why a row failed")
    p.set_defaults(func=cmd_course)


def cmd_course(args: argparse.Namespace) -> int:
    """Release the student copies, or grade the submitted notebooks (stamplib.teaching.lab)."""
    import time

    from stamplib.teaching import lab

    if args.action == "release":
        written = lab.release(Path(args.out), force=args.force)
        print(f"wrote {len(written)} files to {args.out}: " + ", ".join(p.name for p in written))
        return 0
    out = Path(args.out) if args.out else Path(args.submissions) / "grades.csv"
    earlier = [p for p in lab.earlier_grades(Path(args.submissions)) if p.resolve() != out.resolve()]
    if earlier:  # said, not graded: a grades file is no hand-in
        print(f"not graded: {', '.join(map(str, earlier))}, the grades of an earlier grading", file=sys.stderr)
    started = time.perf_counter()
    rows = lab.grade(Path(args.submissions), out, args.timeout, jobs=common.jobs(args.jobs),
                     executed=Path(args.executed) if args.executed else None)
    print("\n".join(lab.summary(rows)))
    print(f"done in {time.perf_counter() - started:.0f} s: {len(rows)} rows for {len({r.file for r in rows})} files in "
          f"{out}")
    return 0
