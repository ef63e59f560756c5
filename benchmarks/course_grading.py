"""How long `python -m stamplib course grade` takes on a class: 30 made-up submissions of the four
lessons (14–17 in turn, one folder per student), half of each lesson's copies solved with the
reference solutions (with the imports they need) and the rest handed in as released (nothing
written), graded with ``--jobs`` workers.

Usage: PYTHONPATH=$PWD .venv/bin/python benchmarks/course_grading.py [--students 30] [--jobs 2]
       [--timeout 120] [--folder /tmp/course_grading]

Prints the wall time, the CPU time of the grading's processes (kernels included) and the load
average before and after, then the grader's summary; the grades are in FOLDER/submissions/grades.csv.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import time
from pathlib import Path

from stamplib.teaching import lab
from stamplib.teaching.exercises import solution_source

#: What the reference solutions use from their modules, which a lesson's own cells may not import.
IMPORTS = "import math\nfrom collections.abc import Sequence\n\nimport torch\n\n\n"


def _solved(nb: dict) -> dict:
    for cell in nb["cells"]:
        if lab.EXERCISE_TAG in cell["metadata"].get("tags", []):
            name = lab._defined_function("".join(cell["source"]))
            cell["source"] = IMPORTS + solution_source(name)
    return nb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--folder", default="/tmp/course_grading")
    args = parser.parse_args()
    folder = Path(args.folder)
    shutil.rmtree(folder, ignore_errors=True)
    release, submissions = folder / "release", folder / "submissions"
    lab.release(release)
    lessons = sorted(p for p in release.glob("1[4-7]_*.ipynb"))
    for i in range(args.students):
        nb = json.loads(lessons[i % len(lessons)].read_text())
        student = submissions / f"student_{i:02d}"
        student.mkdir(parents=True)
        (student / "handed_in.ipynb").write_text(json.dumps(_solved(nb) if (i // len(lessons)) % 2 == 0 else nb))
    load = os.getloadavg()
    started = time.perf_counter()
    rows = lab.grade(submissions, submissions / "grades.csv", args.timeout, jobs=args.jobs)
    wall = time.perf_counter() - started
    children, own = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    cpu = children.ru_utime + children.ru_stime + own.ru_utime + own.ru_stime
    print(f"graded {args.students} notebooks ({', '.join(p.stem[:2] for p in lessons)} in turn, half solved) with "
          f"--jobs {args.jobs}: {wall:.0f} s wall, {wall / args.students:.1f} s per notebook, {cpu:.0f} s CPU "
          f"(user + sys, kernels included); load average {load[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    print("\n".join(lab.summary(rows)))


if __name__ == "__main__":
    main()
