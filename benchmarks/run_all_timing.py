"""Time ``./run_all.sh`` (quick profile unless told otherwise) at several commits, one after the other, on this machine.

Each commit gets a fresh clone of this checkout under ``--workdir`` with its own virtual
environment, made before the clock starts (``tools/ensure_venv.sh``; torch comes from pip's
cache). The clock then runs around ``./run_all.sh`` with an empty results store inside the
clone (``STAMPLIB_RESULTS=<clone>/results_timing``), the method docs/running.md describes.
One JSON record per run goes to ``--out`` (written whole or not at all): the commit, the wall
seconds, the grid's and the whole run's seconds as run_all.sh printed them, the CPU, and the
load average before and after, so that a run made beside other work can be told apart;
``python -m stamplib claims render`` then adds them to docs/running.md's table.

Usage: .venv/bin/python benchmarks/run_all_timing.py AFTER BEFORE [AFTER ...]
           [--profile quick] [--out results/run_all_timing] [--workdir /tmp/run_all_timing]
Give the commits in the order they should run; naming one twice times it twice. Nothing else
should run meanwhile: the load average in each record says whether something did.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stamplib.evaluation.provenance import cpu_state  # noqa: E402
from stamplib.paths import atomic_write_bytes  # noqa: E402


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def printed_seconds(log: str, pattern: str) -> int | None:
    """The seconds run_all.sh printed in a line matching ``pattern`` (its last such line)."""
    found = re.findall(pattern, log)
    return int(found[-1]) if found else None


def time_commit(commit: str, profile: str, workdir: Path, out: Path) -> dict:
    sha = git("rev-parse", commit)
    clone = workdir / f"{sha[:7]}-{datetime.now(timezone.utc):%H%M%S}"
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", sha], cwd=clone, check=True)
    subprocess.run(["bash", "tools/ensure_venv.sh"], cwd=clone, check=True)
    env = {**os.environ, "STAMPLIB_RESULTS": str(clone / "results_timing")}
    load_before = os.getloadavg()
    started = datetime.now(timezone.utc)
    clock = time.perf_counter()
    run = subprocess.run(["./run_all.sh", "--profile", profile], cwd=clone, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - clock
    log = run.stdout + run.stderr
    (clone / "run_all.log").write_text(log)
    if run.returncode != 0:
        raise SystemExit(f"run_all.sh failed at {sha[:7]} (exit {run.returncode}); its output: {clone / 'run_all.log'}")
    record = {
        "commit": sha,
        "profile": profile,
        "subject": git("log", "-1", "--format=%s", sha),
        "started": started.isoformat(timespec="seconds"),
        "wall_seconds": round(seconds, 1),
        "grid_seconds": printed_seconds(log, r"grid finished in (\d+) s"),
        "run_all_seconds": printed_seconds(log, r"run_all.sh: finished in (\d+) s"),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "cpu": cpu_state(),
        "cores": os.cpu_count(),
        "command": f"STAMPLIB_RESULTS={clone / 'results_timing'} ./run_all.sh --profile {profile}",
    }
    atomic_write_bytes(out / f"{started:%Y%m%dT%H%M%S}_{sha[:7]}.json", (json.dumps(record, indent=2) + "\n").encode())
    shutil.rmtree(clone, ignore_errors=True)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="+", help="commits to time, in the order they run")
    parser.add_argument("--profile", default="quick", choices=["smoke", "quick"],
                        help="run_all.sh's profile (smoke: a check of this script in about 5 minutes)")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "run_all_timing")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/run_all_timing"))
    args = parser.parse_args()
    for commit in args.commits:  # a bad name stops before any run
        try:
            git("rev-parse", "--verify", f"{commit}^{{commit}}")
        except subprocess.CalledProcessError:
            raise SystemExit(f"run_all_timing.py: {commit!r} names no commit of {REPO} (see git log)") from None
    print(f"{'commit':8s} {'wall s':>8s} {'grid s':>7s} {'load before':>12s}  subject")
    for commit in args.commits:
        r = time_commit(commit, args.profile, args.workdir, args.out)
        print(f"{r['commit'][:7]:8s} {r['wall_seconds']:8.0f} "
              f"{r['grid_seconds'] if r['grid_seconds'] is not None else '—':>7} "
              f"{r['load_average_before'][0]:12.2f}  {r['subject'][:70]}", flush=True)


if __name__ == "__main__":
    main()
