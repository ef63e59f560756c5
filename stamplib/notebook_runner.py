"""Execute the notebooks headless with papermill (run_all.sh and the tests use this).

Executed copies go to a build folder, never over the committed notebooks; parameter names
are checked against each notebook's ``parameters`` cell before running (papermill itself only
warns about unknown names, notebooks.md). Papermill and the kernel come with the ``notebooks``
extra (``pip install 'stamplib[notebooks]'``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stamplib import paths
from stamplib.extras import require, require_installed

_PURPOSE = "running the notebooks"


def notebooks_dir() -> Path:
    root = paths.repo_root()
    if root is None:
        raise FileNotFoundError("the notebooks live in the source checkout; clone the repository")
    return root / "notebooks"


def discover(only: Sequence[str] = ()) -> list[Path]:
    """Notebooks in dependency order (their numeric prefix); ``only`` filters by name or prefix."""
    found = sorted(notebooks_dir().glob("[0-9][0-9]_*.ipynb"))
    if not only:
        return found
    chosen = [nb for nb in found if any(nb.stem == o or nb.stem.startswith(o) for o in only)]
    missing = [o for o in only if not any(nb.stem == o or nb.stem.startswith(o) for nb in found)]
    if missing:
        raise ValueError(f"no notebook matches {missing}; available: {', '.join(nb.stem for nb in found)}")
    return chosen


#: The notebook metadata key by which a notebook says it computes what it shows itself (01 loads
#: the source models, 11 runs the explorer): the grid plans no cells for it, and needs no
#: registered experiment.
COMPUTES_ITSELF = "computes_itself"


def computes_itself(nb: Path) -> bool:
    """Whether notebook ``nb`` declares (``metadata.stamplib.computes_itself``) that it computes
    what it shows itself, so no experiment plans its cells."""
    return bool(json.loads(nb.read_text(encoding="utf-8")).get("metadata", {}).get("stamplib", {})
                .get(COMPUTES_ITSELF, False))


def _papermill() -> Any:
    """papermill, or the one-line error naming the extra that installs it."""
    return require("papermill", "notebooks", _PURPOSE)


def _executor() -> Any:
    """papermill, once the kernel the notebooks run in is known to be installed (else papermill
    fails later, and less clearly, with "no such kernel")."""
    require_installed("ipykernel", "notebooks", _PURPOSE)
    return _papermill()


def kernel_config() -> Any:
    """The settings of the kernel manager that starts each notebook's kernel: Jupyter's own
    transport encryption (``KernelManager.transport_encryption = "auto"``: the manager gives
    the kernel CurveZMQ keys where its kernelspec declares support, as ipykernel's does).

    Why: ipykernel logs "Kernel is running over TCP without encryption" at the start of every
    kernel on plain TCP, so each notebook run_all.sh renders printed it. Encryption is the
    warning's own remedy; its other one, IPC transport, puts the sockets at a path relative to
    each process's folder, and a notebook's kernel runs in notebooks/, not where the runner does.
    Where pyzmq lacks CurveZMQ or jupyter_client predates the setting, nothing is set (the
    warning is then true)."""
    import zmq
    from jupyter_client.manager import KernelManager
    from traitlets.config import Config

    if not zmq.has("curve") or not KernelManager.class_traits().get("transport_encryption"):
        return Config()
    return Config({"KernelManager": {"transport_encryption": "auto"}})


def notebook_parameters(nb: Path) -> dict[str, Any]:
    return _papermill().inspect_notebook(str(nb))


def check_parameters(nb: Path, params: dict[str, Any]) -> None:
    known = notebook_parameters(nb)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"{nb.name}: unknown parameter(s) {unknown}; it takes {', '.join(sorted(known))}")


@dataclass
class NotebookRun:
    notebook: str
    output: Path
    seconds: float
    error: str | None = None


def execute(
    nb: Path,
    output_dir: Path,
    params: dict[str, Any],
    timeout: int | None = None,
    progress: bool = True,
) -> NotebookRun:
    papermill = _executor()
    output_dir.mkdir(parents=True, exist_ok=True)
    out = output_dir / nb.name
    accepted = notebook_parameters(nb)
    given = {k: v for k, v in params.items() if k in accepted}
    start = time.perf_counter()
    # The kernel inherits this: the explorer then draws its static summary, which the executed
    # copy and the site can show, instead of a slider no one can move.
    try:
        with paths.exported(STAMPLIB_HEADLESS="1"):
            papermill.execute_notebook(
                str(nb),
                str(out),
                parameters=given,
                kernel_name="python3",
                cwd=str(nb.parent),
                progress_bar=progress,
                execution_timeout=timeout,
                config=kernel_config(),
            )
    except papermill.PapermillExecutionError as err:
        cell = err.exec_count if err.exec_count is not None else err.cell_index
        message = f"cell {cell}: {err.ename}: {err.evalue}"
        return NotebookRun(nb.stem, out, time.perf_counter() - start, message)
    return NotebookRun(nb.stem, out, time.perf_counter() - start)


def run_notebooks(
    profile: str = "quick",
    only: Sequence[str] = (),
    data_root: str | None = None,
    device: str = "cpu",
    build_dir: Path | None = None,
    extra: dict[str, Any] | None = None,
    timeout: int | None = None,
    jobs: int = 1,
) -> int:
    """Run the chosen notebooks, ``jobs`` at a time (each in a process of its own; more than one
    where the notebooks only read a complete results store, as after ``grid``); print a summary
    in the notebooks' order; return a process exit code."""
    if jobs < 1:
        raise ValueError(f"jobs counts the notebooks executed at once, at least 1; got {jobs}")
    # real-data runs get their own folder: they must not replace the built-in benchmark's copies
    folder = f"{profile}_real" if data_root else profile
    build_dir = build_dir or (paths.repo_root() or Path.cwd()) / "build" / "notebooks" / folder
    # A headless run executes every notebook whole: the course's exercise checks take the reference
    # solutions (execute gives a notebook only the parameters its parameters cell has).
    common: dict[str, Any] = {"profile": profile, "device": device, "data_root": data_root or "", "solutions": True}
    extra = extra or {}
    _executor()  # a missing extra stops here, before any notebook is looked at
    notebooks = discover(only)
    for nb in notebooks:
        check_parameters(nb, extra)
    params = {**common, **extra}
    if jobs == 1 or len(notebooks) == 1:
        runs = []
        for i, nb in enumerate(notebooks, 1):
            print(f"[{i}/{len(notebooks)}] {nb.name} (profile {profile})", flush=True)
            runs.append(execute(nb, build_dir, params, timeout=timeout))
            _print_outcome(runs[-1])
    else:
        runs = _execute_in_processes(notebooks, build_dir, params, timeout, jobs)
    print("\nsummary")
    for r in runs:
        print(f"  {'ok    ' if r.error is None else 'FAILED'} {r.notebook:40s} {r.seconds:7.1f} s"
              + (f"   {r.error}" if r.error else ""))
    total = sum(r.seconds for r in runs)
    failed = [r for r in runs if r.error]
    print(f"  {len(runs) - len(failed)} passed, {len(failed)} failed in {total:.0f} s")
    for r in failed:
        print(f"  see the executed copy with the failing cell marked: {r.output}", file=sys.stderr)
    return 1 if failed else 0


def _print_outcome(result: NotebookRun) -> None:
    status = "ok" if result.error is None else f"FAILED at {result.error}"
    print(f"    {status} in {result.seconds:.0f} s -> {result.output}", flush=True)


def _cores_each(jobs: int) -> dict[str, str]:
    """Torch threads for each of ``jobs`` kernels running side by side: their share of the cores.
    Two kernels computing with all cores each ran 5x slower than one after the other (a
    walkthrough cell, 2 cores). A thread count the caller set is kept."""
    share = str(max(1, (os.cpu_count() or 1) // jobs))
    return {name: paths.environment(name) or share for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}


def _execute_quietly(nb: Path, output_dir: Path, params: dict[str, Any], timeout: int | None,
                     threads: dict[str, str]) -> NotebookRun:
    """:func:`execute` in a worker process, without papermill's bars (several would interleave),
    its kernel with ``threads`` (:func:`_cores_each`)."""
    with paths.exported(**threads):
        return execute(nb, output_dir, params, timeout=timeout, progress=False)


def _execute_in_processes(notebooks: Sequence[Path], output_dir: Path, params: dict[str, Any],
                          timeout: int | None, jobs: int) -> list[NotebookRun]:
    """Each notebook in one of ``jobs`` spawned processes (they inherit this process's
    environment, the run context's included, and share the cores: :func:`_cores_each`),
    printed as each finishes; returned in order."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    runs: dict[Path, NotebookRun] = {}
    workers = min(jobs, len(notebooks))
    threads = _cores_each(workers)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_execute_quietly, nb, output_dir, params, timeout, threads): nb for nb in notebooks}
        for done, future in enumerate(as_completed(futures), 1):
            nb = futures[future]
            runs[nb] = future.result()
            print(f"[{done}/{len(notebooks)}] {nb.name} (profile {params['profile']})", flush=True)
            _print_outcome(runs[nb])
    return [runs[nb] for nb in notebooks]
