"""Execute the notebooks headless with papermill (run_all.sh and the tests use this).

Executed copies go to a build folder, never over the committed notebooks; parameter names
are checked against each notebook's ``parameters`` cell before running (papermill itself only
warns about unknown names, notebooks.md). Papermill and the kernel come with the ``notebooks``
extra (``pip install 'stamplib[notebooks]'``).

Every notebook executes in a process of its own, started here, which starts its kernel; this
process only waits. So when a signal stops the command (SIGINT, SIGTERM, SIGHUP:
:mod:`stamplib.processes`) it ends them all: each notebook's process is told to stop, shuts its
kernel down at once (with the kernel's own processes), and is killed if it has not exited within
:data:`STOP_S` seconds. A copy is executed under a hidden name (``.partial/`` in the build
folder) and moved into place when it has run to its end (or to its failing cell); an interrupted
one is removed, so no half-executed copy is left.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stamplib import paths, processes
from stamplib.extras import require, require_installed

_PURPOSE = "running the notebooks"
#: Seconds a notebook's process told to stop may take to shut its kernel down before it is killed.
STOP_S = 5.0
#: The folder, inside the build folder, of the copies still executing.
PARTIAL = ".partial"


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
    zmq = require("zmq", "notebooks", _PURPOSE)  # pyzmq, jupyter_client and traitlets come with papermill
    KernelManager = require("jupyter_client.manager", "notebooks", _PURPOSE).KernelManager  # noqa: N806 - a class
    Config = require("traitlets.config", "notebooks", _PURPOSE).Config  # noqa: N806 - a class
    if not zmq.has("curve") or not KernelManager.class_traits().get("transport_encryption"):
        return Config()
    return Config({"KernelManager": {"transport_encryption": "auto"}})


def notebook_parameters(nb: Path) -> dict[str, Any]:
    return _papermill().inspect_notebook(str(nb))


#: Old spellings of notebook parameters that still work for one release → their new names.
OLD_PARAMETERS = {"outliers": "outlier_set"}


def renamed_parameters(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with each old spelling (:data:`OLD_PARAMETERS`) under its new name, saying so in
    one line."""
    out = dict(params)
    for old, new in OLD_PARAMETERS.items():
        if old in out:
            if new in out:
                raise ValueError(f"--param {old} and {new} name one parameter ({old} is {new}'s old spelling): "
                                 f"give {new}")
            print(f"note: the parameter `{old}` is now `{new}`; the old spelling goes in the next release",
                  file=sys.stderr)
            out[new] = out.pop(old)
    return out


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
    out = output_dir / nb.name
    partial = output_dir / PARTIAL / nb.name  # the copy while it executes (module docstring)
    partial.parent.mkdir(parents=True, exist_ok=True)
    accepted = notebook_parameters(nb)
    given = {k: v for k, v in params.items() if k in accepted}
    start = time.perf_counter()
    error = None
    # The kernel inherits this: the explorer then draws its static summary, which the executed
    # copy and the site can show, instead of a slider no one can move.
    try:
        with paths.exported(STAMPLIB_HEADLESS="1"):
            papermill.execute_notebook(
                str(nb),
                str(partial),
                parameters=given,
                kernel_name="python3",
                cwd=str(nb.parent),
                progress_bar=progress,
                execution_timeout=timeout,
                config=kernel_config(),
                kernel_manager_class=_tracked_kernel_manager(),  # its kernel ends with this process
            )
    except papermill.PapermillExecutionError as err:
        cell = err.exec_count if err.exec_count is not None else err.cell_index
        error = f"cell {cell}: {err.ename}: {err.evalue}"
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        _KERNELS.clear()  # shut down by nbclient, whatever the outcome
    os.replace(partial, out)
    return NotebookRun(nb.stem, out, time.perf_counter() - start, error)


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
    extra = renamed_parameters(extra or {})
    _executor()  # a missing extra stops here, before any notebook is looked at
    notebooks = discover(only)
    for nb in notebooks:
        check_parameters(nb, extra)
    params = {**common, **extra}
    finished: dict[Path, NotebookRun] = {}
    try:
        _execute_in_processes(notebooks, build_dir, params, timeout, max(1, min(jobs, len(notebooks))), finished)
    except KeyboardInterrupt as stop:  # its processes and kernels have ended
        print("\n" + processes.interrupted_line(
            f"{len(finished)} of {len(notebooks)} notebooks executed, in {build_dir}, and every cell they computed is "
            "kept"), file=sys.stderr)
        return processes.exit_code(stop)
    runs = [finished[nb] for nb in notebooks]
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


#: The kernel managers of the notebook this process executes (:func:`_tracked_kernel_manager`).
_KERNELS: list[Any] = []


def _tracked_kernel_manager() -> type:
    """jupyter_client's kernel manager, remembering each instance in :data:`_KERNELS`, so that a
    notebook's process told to stop can end its kernel (:func:`_stop_notebook_process`): the
    kernel runs in a session of its own, which no signal to this command's group reaches."""
    manager = require("jupyter_client.manager", "notebooks", _PURPOSE)  # nbclient's own kernel manager

    class TrackedKernelManager(manager.AsyncKernelManager):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            _KERNELS.append(self)

    return TrackedKernelManager


def _stop_notebook_process(signum: int, frame: Any) -> None:
    """SIGTERM in a notebook's process (its command was interrupted): kill the kernel of the
    notebook it executes, with every process the kernel started (its process group), and exit.
    The command removes the half-executed copy (module docstring)."""
    for manager in _KERNELS:
        provisioner = getattr(manager, "provisioner", None)
        process = getattr(provisioner, "process", None)
        if process is not None and process.poll() is None:  # still running: its group is still its own
            try:
                os.killpg(getattr(provisioner, "pgid", None) or process.pid, signal.SIGKILL)
            except OSError:
                process.kill()
    os._exit(128 + signum)


def _notebook_process() -> None:
    """How a notebook's process starts: a Ctrl-C or a closed terminal is left to the command
    (:func:`stamplib.processes.leave_to_parent`), SIGTERM ends its kernel with it, and papermill's
    bar takes a plain lock (tqdm's default one is a semaphore of the resource tracker, which a
    process that ends at once leaves behind with a warning)."""
    from tqdm.auto import tqdm

    processes.leave_to_parent()
    signal.signal(signal.SIGTERM, _stop_notebook_process)
    tqdm.set_lock(threading.RLock())


def _execute_quietly(nb: Path, output_dir: Path, params: dict[str, Any], timeout: int | None,
                     threads: dict[str, str], progress: bool) -> NotebookRun:
    """:func:`execute` in a notebook's process, its kernel with ``threads`` (:func:`_cores_each`),
    with papermill's bar only where one notebook runs at a time (several would interleave)."""
    with paths.exported(**threads):
        return execute(nb, output_dir, params, timeout=timeout, progress=progress)


def _execute_in_processes(notebooks: Sequence[Path], output_dir: Path, params: dict[str, Any],
                          timeout: int | None, jobs: int, finished: dict[Path, NotebookRun]) -> None:
    """Each notebook in one of ``jobs`` spawned processes (they inherit this process's
    environment, the run context's included; several share the cores: :func:`_cores_each`),
    printed as each finishes, into ``finished``. However this ends (an interruption included),
    no process it started, nor their kernels, outlives it (module docstring)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    one = jobs == 1
    threads = {} if one else _cores_each(jobs)  # one at a time: the kernel takes torch's own default
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_notebook_process)
    try:
        if one:  # in order, each announced as it starts, with papermill's bar
            for i, nb in enumerate(notebooks, 1):
                print(f"[{i}/{len(notebooks)}] {nb.name} (profile {params['profile']})", flush=True)
                finished[nb] = pool.submit(_execute_quietly, nb, output_dir, params, timeout, threads, True).result()
                _print_outcome(finished[nb])
            return
        futures = {pool.submit(_execute_quietly, nb, output_dir, params, timeout, threads, False): nb
                   for nb in notebooks}
        for done, future in enumerate(as_completed(futures), 1):
            nb = futures[future]
            finished[nb] = future.result()
            print(f"[{done}/{len(notebooks)}] {nb.name} (profile {params['profile']})", flush=True)
            _print_outcome(finished[nb])
    except BaseException:
        workers = [p.pid for p in (getattr(pool, "_processes", None) or {}).values() if p.pid is not None]
        pool.shutdown(wait=False, cancel_futures=True)
        processes.end_processes(workers, STOP_S)
        for nb in notebooks:  # the copies they were executing
            (output_dir / PARTIAL / nb.name).unlink(missing_ok=True)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
