"""Grids: compute a list of RunSpecs here or on a cluster.

A notebook computes its own cells when asked to; at paper scale (``profile="full"``: 164
distinct cells, most of them GPU-hours) they are computed first, as a grid, and the notebooks
then only read the results store. The grid does not know where its RunSpecs come from: the
command line hands it the notebooks' plans (:mod:`stamplib.experiments.plans`), deduplicated
across notebooks, so a grid and a notebook never disagree about what a table needs.

Executors:

* ``local`` (default) — in this process, one cell after another, or ``jobs=N`` worker processes
  (one torch thread each on the CPU; with CUDA, worker i uses ``cuda:(i mod device_count)`` and
  its share of the cores: :func:`worker_device`, :func:`default_jobs`);
* ``submitit`` — SLURM job arrays through submitit (partition, GPUs, CPUs, time limit, array
  parallelism); cells are grouped into jobs so that short cells do not each wait in the queue;
* ``submitit-local`` — submitit's local executor: the same job code in local subprocesses (tests).

The submitit executors need the ``cluster`` extra (``pip install 'stamplib[cluster]'``); this
module and the local executor do not, so submitit is imported only when one of them is used.

Every job gets the run context of the edge that started it (data root, results store, device,
the command its records name) as an argument, and runs its cells through :func:`stamplib.run`,
which returns a finished cell's stored
record instead of computing it again, so a job that is re-submitted, retried, or requeued by
submitit after its time limit never recomputes a finished cell. Which cells are running or
failed is kept by the results store (:class:`~stamplib.evaluation.store.ResultsStore`, under
``<results>/.grid/``); job logs go to ``<results>/.grid/logs/``.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math
import os
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from stamplib import models, paths, processes
from stamplib.evaluation.record import Record
from stamplib.evaluation.runner import run
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import ResultsStore, disk_full
from stamplib.extras import require
from stamplib.paths import RunContext

EXECUTORS = ("local", "submitit", "submitit-local")

#: Rough minutes one cell takes on one GPU, per profile: used only to size jobs (how many
#: cells share one queue wait), never to schedule or to kill. Measured times replace these
#: once the paper-scale slices are timed.
CELL_MINUTES = {"smoke": 0.1, "quick": 2.0, "full": 30.0}
#: A job should hold at least this much work, so a short cell does not pay a queue wait alone.
MIN_JOB_MINUTES = 10.0



@dataclass(frozen=True)
class ExecutorOptions:
    """Where the cells of a grid run and how they are grouped, built once (the command line's
    ``grid`` and ``tune`` share the flags): ``local`` — here, or ``jobs`` worker processes;
    ``submitit`` — SLURM job arrays (partition, GPUs and CPUs per job, time limit in minutes,
    memory, array parallelism); ``submitit-local`` — the same jobs as local processes.
    ``cells_per_job`` None sizes jobs from the profile (:func:`job_size`)."""

    executor: str = "local"
    jobs: int = 1
    cells_per_job: int | None = None
    partition: str | None = None
    gpus_per_job: int = 1
    cpus_per_task: int = 4
    time_min: int = 240
    array_parallelism: int = 32
    mem_gb: float | None = None

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        if self.jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {self.jobs}")
        if self.cells_per_job is not None and self.cells_per_job < 1:
            raise ValueError(f"cells_per_job must be at least 1 (or None: sized from the profile), got "
                             f"{self.cells_per_job}")

    def submitit_parameters(self, device: str, name: str = "stamplib") -> dict[str, Any]:
        """What submitit's executor is given (``update_parameters``)."""
        params: dict[str, Any] = {
            "name": name, "timeout_min": int(self.time_min), "cpus_per_task": int(self.cpus_per_task),
            # submitit's local executor hides every GPU when none is requested: ask only for cuda.
            "gpus_per_node": int(self.gpus_per_job) if device == "cuda" else 0,
            "slurm_array_parallelism": int(self.array_parallelism),
        }
        if self.partition:
            params["slurm_partition"] = self.partition
        if self.mem_gb:
            params["mem_gb"] = float(self.mem_gb)
        return params



# ------------------------------------------------------------------------------- cells


def describe(spec: RunSpec) -> str:
    """One line naming a cell, e.g. ``tent digits/noise ratio=0.2 seed=0 smoke [3f2a…]``."""
    extra = "".join(f" {k}={v}" for k, v in spec.overrides)
    hyperparameter_set = f" hyperparameter_set={spec.hyperparameter_set}" if spec.hyperparameter_set else ""
    return (f"{spec.method} {spec.dataset}/{spec.outlier_set} ratio={round(spec.outlier_ratio, 4):g} "
            f"seed={spec.seed} {spec.profile}{hyperparameter_set}{extra} [{spec.key()}]")


# ------------------------------------------------------------------------------- the job


def _submitit() -> Any:
    """submitit, or the one-line error naming the extra that installs it."""
    return require("submitit", "cluster", "the submitit executors")


def _job_id() -> str:
    """The id of the job this process runs in (a SLURM array task keeps it when requeued)."""
    if paths.environment("SUBMITIT_EXECUTOR"):
        return str(_submitit().JobEnvironment().job_id)
    return f"local-{socket.gethostname()}-{os.getpid()}"


class CellsFailed(RuntimeError):
    """Raised at the end of a job in which some cells raised (the others were computed)."""


def run_group(
    spec_dicts: Sequence[dict[str, Any]],
    context: RunContext,
    threads: int | None = None,
    time_limit_s: float | None = None,
    log_file: str | None = None,
) -> dict[str, str]:
    """The job function: compute a group of cells where ``context`` says (its results store,
    data root and device; the records name its command).

    Finished cells are skipped, cells claimed by another live job are left to it, and the
    others are marked running (this job's id, host, pid, start, deadline) until each is
    stored. A failing cell does not stop the group; the job raises :class:`CellsFailed` at
    the end, naming the failed cells (tracebacks go to stderr, the job's log, and to
    ``log_file`` if given). A full disk stops the group at once with one line
    (:class:`~stamplib.evaluation.store.OutOfSpace`, no traceback: every later cell would fail
    the same way). Whatever ends the job (a full disk, SIGTERM, a time limit), the cells it
    claimed and did not store are released. Returns ``{key: "done" | "skipped" | "elsewhere"}``.
    """
    if threads:
        import torch

        torch.set_num_threads(threads)  # the CPUs the job was given, not the node's
    store = ResultsStore(context.results)
    job_id = _job_id()
    started = time.time()
    marker = {"job_id": job_id, "host": socket.gethostname(), "pid": os.getpid(), "started": started,
              "deadline": started + time_limit_s if time_limit_s else None}
    specs = [RunSpec.from_dict(d) for d in spec_dicts]
    outcome: dict[str, str] = {}
    mine: list[RunSpec] = []
    errors: dict[str, str] = {}
    try:
        for spec in specs:
            if store.get(spec) is not None:
                outcome[spec.key()] = "skipped"
                continue
            if store.claim(spec, marker) is not None:  # another live job holds it (a requeued job retakes its own)
                outcome[spec.key()] = "elsewhere"
                continue
            mine.append(spec)  # before anything else: an interruption from here on releases it
            if store.get(spec) is not None:  # stored by a job that released it between the check and the claim
                store.unmark_running(mine.pop())
                outcome[spec.key()] = "skipped"
        for spec in mine:
            try:
                run(spec, context)
                outcome[spec.key()] = "done"
            except Exception as exc:
                if (full := disk_full(exc)) is not None:
                    raise full from None
                trace = traceback.format_exc()
                errors[spec.key()] = trace
                message = f"cell failed: {describe(spec)}\n{trace}"
                print(message, file=sys.stderr, flush=True)
                if log_file:
                    _append_log(Path(log_file), message + "\n")
            finally:
                store.unmark_running(spec)
    finally:  # interrupted (a full disk, SIGTERM, the time limit): release what this job will not compute
        for spec in mine:
            store.unmark_running(spec)
    if errors:
        lines = [f"  {describe(s)}: {errors[s.key()].strip().splitlines()[-1]}" for s in mine if s.key() in errors]
        raise CellsFailed(f"{len(errors)} of {len(specs)} cells failed:\n" + "\n".join(lines))
    return outcome


def _append_log(log: Path, message: str) -> None:
    """Add ``message`` to the job's log ``log``, written whole to a temporary name and renamed, so
    that a full disk leaves the log as it was (never an empty one) and stops the job in one line."""
    try:
        before = log.read_bytes() if log.is_file() else b""
        paths.atomic_write_bytes(log, before + message.encode())
    except OSError as exc:
        if (full := disk_full(exc)) is not None:
            raise full from None
        print(f"could not write the log {log}: {exc.strerror or exc}", file=sys.stderr, flush=True)


#: Seconds between two looks at a cell that another process is computing (:func:`run_claimed`).
WAIT_POLL_S = 1.0


def run_claimed(spec: RunSpec, context: RunContext, compute: Callable[..., Record] = run, *, force: bool = False,
                progress: bool = False, on_wait: Callable[[dict[str, Any]], None] | None = None,
                poll_s: float = WAIT_POLL_S) -> Record:
    """One cell, claimed as a grid job claims its cells (``python -m stamplib run``): its stored
    record (unless ``force``), else computed here by ``compute`` (the runner's ``run``) under a
    running marker that is released however the computation ends. When another live process
    holds the cell (a grid job, another ``run``), this one waits for it (``on_wait`` is told who
    holds it, once) and returns the record it stores; if it stores none (it failed or was
    stopped), the cell is claimed and computed here."""
    store = ResultsStore(context.results)
    marker = {"job_id": f"run-{socket.gethostname()}-{os.getpid()}", "host": socket.gethostname(),
              "pid": os.getpid(), "started": time.time(), "deadline": None}
    waited = False
    while True:
        if (not force or waited) and (stored := store.get(spec)) is not None:
            return stored
        holder = store.claim(spec, marker)
        if holder is None:
            break
        if not waited and on_wait is not None:
            on_wait(holder)
        waited = True
        time.sleep(poll_s)
    try:
        if (not force or waited) and (stored := store.get(spec)) is not None:  # stored as this one claimed it
            return stored
        return compute(spec, context, force=force, progress=progress)
    finally:
        store.unmark_running(spec)


class CellGroup:
    """A submitit job: :func:`run_group` on its cells. Checkpointable, so submitit requeues
    it when SLURM's time limit or a preemption stops it; the requeued job skips the cells
    already stored and continues with the rest."""

    def __init__(self, spec_dicts: list[dict[str, Any]], context: RunContext, threads: int | None,
                 time_limit_s: float | None) -> None:
        self.spec_dicts = spec_dicts
        self.context = context
        self.threads = threads
        self.time_limit_s = time_limit_s

    def __call__(self) -> dict[str, str]:
        return run_group(self.spec_dicts, self.context, self.threads, self.time_limit_s)

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Resubmit this job as it is. submitit requeues any callable that has this method;
        it is submitit.helpers.Checkpointable's, written out so that this module imports
        without submitit."""
        return _submitit().helpers.DelayedSubmission(self, *args, **kwargs)


# ------------------------------------------------------------------------------- grouping


def default_cells_per_job(specs: Sequence[RunSpec], time_min: float = 240.0, slots: int = 32) -> int:
    """How many cells share one job: enough that a job holds ``MIN_JOB_MINUTES`` of work (a
    short cell does not pay a queue wait alone), few enough to keep every one of ``slots``
    parallel jobs busy, and at most half the time limit of work (room for slow cells; a job
    cut by the limit is requeued and continues anyway)."""
    if not specs:
        return 1
    minutes = max(CELL_MINUTES.get(s.profile, CELL_MINUTES["full"]) for s in specs)
    floor = math.ceil(MIN_JOB_MINUTES / minutes)
    ceiling = max(1, int(0.5 * time_min / minutes))
    spread = math.ceil(len(specs) / max(1, slots))
    return max(1, min(max(spread, floor), ceiling))


def job_size(specs: Sequence[RunSpec], options: ExecutorOptions) -> int:
    """Cells per job: the options', else one per task on this machine (no queue: that keeps a
    process pool balanced), else :func:`default_cells_per_job` over the parallel slots."""
    if options.cells_per_job:
        return options.cells_per_job
    if options.executor == "local":
        return 1
    slots = options.jobs if options.executor == "submitit-local" else options.array_parallelism
    return default_cells_per_job(specs, options.time_min, slots)


def group_cells(specs: Sequence[RunSpec], cells_per_job: int, keep_order: bool = False) -> list[list[RunSpec]]:
    """Consecutive groups of ``cells_per_job`` cells, sorted so that a job's cells share a data
    set, outlier set and method (each job process loads a data set and a model once), or in the
    given order with ``keep_order`` (a run whose first cells matter most)."""
    if cells_per_job < 1:
        raise ValueError(f"cells_per_job must be at least 1, got {cells_per_job}")
    ordered = list(specs) if keep_order else sorted(
        specs, key=lambda s: (s.profile, s.dataset, s.hyperparameter_set, s.outlier_set, s.method, s.key()))
    return [ordered[i:i + cells_per_job] for i in range(0, len(ordered), cells_per_job)]


# ------------------------------------------------------------------------------- executors


@dataclass
class FailedJob:
    """A job that ended with cells of its group still missing."""

    job_id: str
    specs: list[RunSpec]  # its cells that are not in the store
    log: Path | None  # submitit: the job's stderr; local: the tracebacks file
    error: str  # the job's exception, or why it produced none

    def summary(self) -> str:
        lines = [f"job {self.job_id} failed: {self.error.strip().splitlines()[-1] if self.error.strip() else '?'}"]
        lines += [f"    cell {describe(s)}" for s in self.specs]
        lines.append(f"    log  {self.log if self.log is not None else '(none)'}")
        return "\n".join(lines)


@dataclass
class GridReport:
    done: list[RunSpec] = field(default_factory=list)
    missing: list[RunSpec] = field(default_factory=list)  # not stored (failed ones included)
    failed: list[FailedJob] = field(default_factory=list)
    running: list[RunSpec] = field(default_factory=list)  # held by other live jobs when we looked
    pending: list[RunSpec] = field(default_factory=list)  # submitted and not waited for
    jobs: list[str] = field(default_factory=list)  # ids of the jobs submitted

    @property
    def ok(self) -> bool:
        return not self.failed and not self.missing

    def summary_lines(self, store: ResultsStore) -> list[str]:
        """What ``grid`` prints at the end: the jobs, what was submitted, done, missing, failed."""
        lines = []
        if self.jobs:
            lines.append(f"{len(self.jobs)} job(s): {', '.join(self.jobs[:10])}{' …' if len(self.jobs) > 10 else ''}")
        if self.pending:
            lines.append(f"submitted {len(self.pending)} cells; they are computed in the background (logs under "
                         f"{store.grid_dir / 'logs'}). Run the same command with --dry-run to see the status, "
                         "or again to resubmit what is missing.")
            return lines
        lines.append(f"done {len(self.done)}, missing {len(self.missing)}, running elsewhere {len(self.running)}, "
                     f"failed jobs {len(self.failed)}")
        lines += [failed.summary() for failed in self.failed]
        if self.failed:
            lines.append("retry only the failed cells with --retry-failed (or re-run: every missing cell is "
                         "resubmitted)")
        return lines


class _Handle:
    """One submitted group, whatever ran it. ``claimed``: whether its job computed (or tried)
    any cell itself, rather than finding them all stored or held by another grid's job."""

    def __init__(self, specs: list[RunSpec], job_id: str, log: Path | None,
                 done: Callable[[], bool], error: Callable[[], str | None],
                 claimed: Callable[[], bool] = lambda: True,
                 raised: Callable[[], BaseException | None] = lambda: None) -> None:
        self.specs, self.job_id, self.log, self.done, self.error = specs, job_id, log, done, error
        self.claimed, self.raised = claimed, raised


def _claimed_any(outcome: dict[str, str] | None) -> bool:
    """Whether a job with this :func:`run_group` outcome claimed a cell (None: it raised, so it did)."""
    return outcome is None or any(v == "done" for v in outcome.values())


def _spec_dicts(group: Sequence[RunSpec]) -> list[dict[str, Any]]:
    return [s.to_dict() for s in group]


def _local_log(store: ResultsStore, group: Sequence[RunSpec]) -> Path:
    return store.grid_dir / "logs" / "local" / f"{group[0].key()}.err"


def _submit_inprocess(groups: list[list[RunSpec]], store: ResultsStore, context: RunContext,
                      bar: Any) -> list[_Handle]:
    handles = []
    for group in groups:
        log = _local_log(store, group)
        try:
            outcome: dict[str, str] | None = run_group(_spec_dicts(group), context, None, None, str(log))
            err = None
        except CellsFailed as exc:
            outcome, err = None, str(exc)
        handles.append(_Handle(group, f"local-{os.getpid()}", log, lambda: True, lambda e=err: e,
                               lambda o=outcome: _claimed_any(o)))
        _advance(bar, store, [s for h in handles for s in h.specs])
    return handles


def _advance(bar: Any, store: ResultsStore, submitted: Sequence[RunSpec]) -> None:
    """Move the bar to the number of submitted cells now stored (failed ones never count)."""
    bar.update(sum(store.path(s).is_file() for s in submitted) - bar.n)


def _cuda_devices() -> int:
    import torch

    return torch.cuda.device_count()


def default_jobs(device: str) -> int:
    """Local worker processes when none are asked for: one per GPU with CUDA (a second worker on
    a GPU holds a second copy of every stream and competes for the same device), else one per
    CPU core."""
    if device.startswith("cuda"):
        return max(1, _cuda_devices())
    return processes.cores()


def local_workers(jobs: int, groups: int) -> int:
    """The worker processes a local grid of ``groups`` jobs starts with ``jobs`` asked for: no more
    than it has jobs to give them (what ``grid --dry-run`` says and what :func:`run_grid` starts)."""
    return max(1, min(jobs, groups))


def worker_device(device: str, worker: int) -> str:
    """The device of local worker number ``worker``: with ``cuda`` the workers take the GPUs in
    turn, ``cuda:(worker mod device_count)``; any other device (``cpu``, an explicit ``cuda:k``)
    as given."""
    if device != "cuda":
        return device
    count = _cuda_devices()
    if count < 1:
        raise ValueError("device 'cuda' but torch sees no GPU; use device 'cpu'")
    return f"cuda:{worker % count}"


def worker_threads(device: str, jobs: int) -> int:
    """Torch threads per local worker: one on the CPU (N workers on N cores; more would
    oversubscribe), with CUDA the worker's share of the cores (they prepare the batches)."""
    return 1 if device == "cpu" else max(1, (os.cpu_count() or 1) // jobs)


#: This pool worker's device (:func:`_pool_init`); None outside a pool worker.
_WORKER_DEVICE: str | None = None


class ParentGone(BaseException):
    """Raised in a pool worker told to stop (SIGTERM: its grid was interrupted, or has died): it
    stops computing, releases its cells (:func:`run_group`'s ``finally``) and exits. A
    BaseException, so that no ``except Exception`` around a cell takes it for the cell's failure."""


#: How often a pool worker checks that its grid process is still alive, in seconds.
PARENT_POLL_S = 1.0
#: Seconds a worker told to stop may take to release its cells before it is ended.
RELEASE_S = 10.0
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
#: Whether this pool worker is inside a group of cells (SIGTERM then releases them first).
_IN_CELLS = threading.Event()


def stop_with_parent(parent: int) -> None:
    """Make this process (a pool worker) stop when its grid ``parent`` tells it to (SIGTERM) or
    dies — killed with SIGKILL or by the out-of-memory killer, so that it cannot tell its
    workers. On Linux the kernel then sends SIGTERM at once (``prctl(PR_SET_PDEATHSIG)``);
    everywhere a thread also checks every :data:`PARENT_POLL_S` seconds that the parent is still
    this process's parent. SIGTERM raises :class:`ParentGone` in the worker's main thread while
    it computes cells (it releases them), and ends it at once between cells; a worker that has
    not exited :data:`RELEASE_S` seconds after its parent died is ended, as its pipe to the grid
    is gone. SIGINT and SIGHUP are left to the grid (:func:`stamplib.processes.leave_to_parent`):
    a Ctrl-C reaches every process of the group, and the grid decides."""

    stopping = threading.Event()

    def on_sigterm(signum: int, frame: Any) -> None:
        if stopping.is_set():  # a second SIGTERM (the group's, then the grid's) does not cut the release short
            return
        if not _IN_CELLS.is_set():  # waiting for work: nothing to release
            os._exit(1)
        stopping.set()
        raise ParentGone(f"told to stop by its grid process {parent}, or it has died")

    processes.leave_to_parent()
    signal.signal(signal.SIGTERM, on_sigterm)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(RELEASE_S)
        os._exit(1)

    threading.Thread(target=watch, name="stamplib-parent-watch", daemon=True).start()


def _pool_init(counter: Any, device: str, threads: int, parent: int | None = None) -> None:
    """Number the worker (``counter``: a shared integer), give it its device and threads, and
    tie its life to the grid process ``parent`` (:func:`stop_with_parent`; None: not tied). Its
    progress bars take a plain lock: tqdm's default one is a semaphore of the grid's resource
    tracker, which a worker the grid ends leaves behind, and the tracker then warns of "leaked
    semaphore objects" after the grid's one line."""
    if parent is not None:
        stop_with_parent(parent)
    import torch
    from tqdm import tqdm as bar

    bar.set_lock(threading.RLock())

    global _WORKER_DEVICE
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    _WORKER_DEVICE = worker_device(device, index)
    torch.set_num_threads(threads)


def _pool_run_group(spec_dicts: list[dict[str, Any]], context: RunContext, threads: int,
                    log_file: str) -> dict[str, str]:
    """:func:`run_group` on this pool worker's own device."""
    mine = dataclasses.replace(context, device=_WORKER_DEVICE or context.device)
    _IN_CELLS.set()
    try:
        return run_group(spec_dicts, mine, threads, None, log_file)
    except ParentGone:  # its cells are released; no one is left to take a result
        os._exit(1)
    finally:
        _IN_CELLS.clear()


def _submit_pool(groups: list[list[RunSpec]], store: ResultsStore, context: RunContext, jobs: int
                 ) -> tuple[Any, list[_Handle]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: a forked copy of a process that already ran torch can deadlock in OpenMP.
    spawn = multiprocessing.get_context("spawn")
    workers = local_workers(jobs, len(groups))
    threads = worker_threads(context.device, workers)
    pool = ProcessPoolExecutor(workers, mp_context=spawn, initializer=_pool_init,
                               initargs=(spawn.Value("i", 0), context.device, threads, os.getpid()))
    handles = []
    for i, group in enumerate(groups):
        log = _local_log(store, group)
        with processes.starting_children():  # a submit may start a worker: it imports with SIGINT held
            future = pool.submit(_pool_run_group, _spec_dicts(group), context, threads, str(log))

        def error(f: Any = future) -> str | None:
            exc = f.exception()
            return None if exc is None else f"{type(exc).__name__}: {exc}"

        def claimed(f: Any = future) -> bool:
            return _claimed_any(f.result() if f.exception() is None else None)

        def raised(f: Any = future) -> BaseException | None:
            return f.exception() if f.done() and not f.cancelled() else None

        handles.append(_Handle(group, f"local-pool-{i}", log, future.done, error, claimed, raised))
    return pool, handles


def _stop_pool(pool: Any, store: ResultsStore, specs: Sequence[RunSpec]) -> None:
    """End a local grid's workers now (it was interrupted, or the disk is full): each is told to
    stop (SIGTERM) and releases its cells, and one that has not exited within
    :data:`RELEASE_S` seconds is killed; the cells its markers still claim are then released."""
    workers = [p.pid for p in (getattr(pool, "_processes", None) or {}).values() if p.pid is not None]
    pool.shutdown(wait=False, cancel_futures=True)
    processes.end_processes(workers, RELEASE_S)
    for spec in specs:
        marker = store.running_marker(spec)  # None: released, or held by a process that has ended
        if marker is None or marker.get("pid") in workers:
            store.unmark_running(spec)


def _submitit_executor(options: ExecutorOptions, folder: Path, device: str) -> Any:
    if options.executor == "submitit" and shutil.which("sbatch") is None:
        raise ValueError("executor 'submitit' needs SLURM (no sbatch on PATH); use --executor local "
                         "(this machine) or submitit-local (submitit's local processes)")
    cluster = "slurm" if options.executor == "submitit" else "local"
    executor = _submitit().AutoExecutor(folder=folder, cluster=cluster)
    executor.update_parameters(**options.submitit_parameters(device))
    return executor


def _submitit_error(job: Any) -> str | None:
    # Without a result file the job died (killed, out of memory, past its time limit);
    # submitit's job.exception() would first wait 15 s for that file to appear.
    if not job.paths.result_pickle.exists():
        return f"job ended without a result (killed, out of memory or past its time limit; state {job.state})"
    exc = job.exception()
    return None if exc is None else str(exc)


def _submit_submitit(groups: list[list[RunSpec]], store: ResultsStore, context: RunContext,
                     options: ExecutorOptions) -> list[_Handle]:
    folder = store.grid_dir / "logs" / "%j"
    executor = _submitit_executor(options, folder, context.device)
    time_limit_s = 60.0 * options.time_min + 120.0  # a marker outlives its job by two minutes at most
    jobs = []
    with executor.batch():  # one SLURM job array, throttled by slurm_array_parallelism
        for group in groups:
            jobs.append(executor.submit(CellGroup(_spec_dicts(group), context, options.cpus_per_task,
                                                  time_limit_s)))
    return [_Handle(group, str(job.job_id), Path(job.paths.stderr), job.done,
                    lambda j=job: _submitit_error(j)) for group, job in zip(groups, jobs)]


def _prepare_sources(specs: Sequence[RunSpec]) -> None:
    """Load every source model the cells need once, here, before workers start: the built-in
    one is trained on first use (workers would each train it), and a missing checkpoint fails
    now with its message instead of once per worker."""
    for dataset, network in dict.fromkeys((s.dataset, s.network) for s in specs):
        models.source_model(dataset, progress=False, network=network)


def run_grid(
    specs: Sequence[RunSpec],
    context: RunContext,
    options: ExecutorOptions = ExecutorOptions(),
    *,
    wait: bool = True,
    progress: bool = True,
    retry_failed: bool = False,
    poll_s: float | None = None,
    keep_order: bool = False,
) -> GridReport:
    """Compute the missing cells of ``specs`` with the ``options``' executor where ``context``
    says (every job gets it: its results store, data root, device and command), and report what
    is stored.

    Cells already stored are not submitted, nor are cells a live job holds (``running``).
    ``retry_failed`` submits only missing cells whose last job failed. ``local`` always
    waits (its workers are this process's children); the submitit executors return right
    after submission unless ``wait``. A job that ends with cells missing is reported in
    ``failed`` with those cells and its log, and its cells are recorded under
    ``<results>/.grid/failed`` until they are stored. With ``keep_order`` the cells are
    submitted in the order of ``specs`` (otherwise grouped by data set and method).
    """
    if options.executor != "local":
        _submitit()  # a missing extra stops the grid before any source model is loaded
    store = ResultsStore(context.results)
    unique = list({s.key(): s for s in specs}.values())
    todo = store.status(unique).missing
    if retry_failed:
        todo = [s for s in todo if store.failure(s) is not None]
    report = GridReport()
    if todo:
        if options.executor != "submitit":
            _prepare_sources(todo)
        groups = group_cells(todo, job_size(todo, options), keep_order)
        waits = options.executor == "local" or wait
        bar = tqdm(total=len(todo), desc="cells", unit="cell", disable=not progress or not waits)
        pool = None
        try:
            if options.executor == "local" and options.jobs == 1:
                handles = _submit_inprocess(groups, store, context, bar)
            elif options.executor == "local":
                pool, handles = _submit_pool(groups, store, context, options.jobs)
            else:
                handles = _submit_submitit(groups, store, context, options)
            report.jobs = [h.job_id for h in handles]
            if waits:
                default_poll = 30.0 if options.executor == "submitit" else 1.0
                _wait(handles, store, bar, poll_s if poll_s is not None else default_poll)
                _collect_failures(handles, store, report)
                # Only the jobs that claimed cells are this grid's; the others found every cell
                # of their group stored or held by another grid running on the same store.
                report.jobs = [h.job_id for h in handles if h.claimed()]
            else:
                report.pending = [s for h in handles for s in h.specs]
        except BaseException:  # interrupted (SIGINT, SIGTERM, SIGHUP) or a full disk: no worker outlives it
            if pool is not None:
                _stop_pool(pool, store, todo)
            raise
        finally:
            bar.close()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
    after = store.status(unique)
    pending = {s.key() for s in report.pending}
    report.done = after.done
    report.missing = [s for s in after.missing if s.key() not in pending]
    report.running = [s for s in after.running if s.key() not in pending]
    return report


def _wait(handles: list[_Handle], store: ResultsStore, bar: Any, poll_s: float) -> None:
    """Block until every job has ended, moving the bar as records appear in the store. A job that
    found the disk full ends the wait at once (:class:`~stamplib.evaluation.store.OutOfSpace`):
    the others would fail the same way."""
    submitted = [s for h in handles for s in h.specs]
    while True:
        finished = all(h.done() for h in handles)
        _advance(bar, store, submitted)
        for h in handles:
            if (exc := h.raised()) is not None and (full := disk_full(exc)) is not None:
                raise full
        if finished:
            return
        time.sleep(poll_s)


def _collect_failures(handles: list[_Handle], store: ResultsStore, report: GridReport) -> None:
    for h in handles:
        error = h.error()
        lost = [s for s in h.specs if store.get(s) is None and store.running_marker(s) is None]
        for s in h.specs:
            if s not in lost:
                store.clear_failure(s)
        if not lost:
            continue
        failed = FailedJob(h.job_id, lost, h.log, error or "job ended with these cells missing")
        report.failed.append(failed)
        for s in lost:
            store.record_failure(s, {"job_id": h.job_id, "log": str(h.log) if h.log else None, "error": failed.error})


# ------------------------------------------------------------------------------- what the command prints


def status_lines(per_notebook: dict[str, list[RunSpec]], store: ResultsStore) -> list[str]:
    """``grid``'s table: cells, done, running, missing and failed per notebook and in all."""
    distinct = list({s.key(): s for specs in per_notebook.values() for s in specs}.values())
    lines = [f"{'notebook':36s} {'cells':>6s} {'done':>6s} {'running':>8s} {'missing':>8s} {'failed':>7s}"]
    for label, specs in [*per_notebook.items(), ("distinct cells", distinct)]:
        st = store.status(specs)
        failed = sum(store.failure(s) is not None for s in st.missing)
        lines.append(f"{label:36s} {len(specs):6d} {len(st.done):6d} {len(st.running):8d} {len(st.missing):8d} "
                     f"{failed:7d}")
    total = sum(len(s) for s in per_notebook.values())
    if total != len(distinct):
        lines.append(f"({total} cells in the notebooks, {total - len(distinct)} shared between them and computed once)")
    return lines


def dry_run_line(specs: Sequence[RunSpec], store: ResultsStore, options: ExecutorOptions) -> str:
    """What ``grid --dry-run`` would do with the missing ones of ``specs``."""
    missing = store.status(specs).missing
    if not missing:
        return ""
    if options.executor == "local" and options.jobs == 1:
        return f"dry run: would compute {len(missing)} cells here, in this process"
    if options.executor == "local":
        workers = local_workers(options.jobs, len(group_cells(missing, job_size(missing, options))))
        return f"dry run: would compute {len(missing)} cells here with {workers} worker process(es)"
    per_job = job_size(missing, options)
    return (f"dry run: would submit {len(missing)} cells as {len(group_cells(missing, per_job))} job(s) of at most "
            f"{per_job} cell(s) with executor {options.executor}")

