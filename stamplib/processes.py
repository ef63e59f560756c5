"""The processes a command starts: how many, and how they all end with it.

How many. :func:`cores` is the CPU cores this process may use; :func:`capped_jobs` holds a
requested number of worker processes (``--jobs``) to one per core, with a line that says so.

How they end. SIGINT (Ctrl-C), SIGTERM (a CI cancel, ``timeout``, ``kill``) and SIGHUP (a closed
terminal) all end a command the same way. The command line installs :func:`stop_on_signals`
once, at its edge. Each of the three signals then raises :class:`Interrupted` in the main thread,
a ``KeyboardInterrupt`` that knows its signal, so every ``finally`` on the way up runs (a cell's
running marker is released, a temporary file removed) and the edge prints one line and exits
with ``128 + signal`` (130, 143, 129), as a shell reports a command that a signal ended. A second
signal while the first one is being handled is ignored, so that the clean-up it started is not
itself interrupted.

The processes a command starts (grid workers, the notebooks' processes) do not act on SIGINT or
SIGHUP themselves (:func:`leave_to_parent`): the command that started them ends them with
SIGTERM (:func:`end_processes`), waiting a moment for each to release its cells, then SIGKILL. A
signal that was ignored when the process started (``nohup`` ignores SIGHUP) stays ignored.

This module imports nothing of stamplib.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

#: The signals that end a command, and the exit code of each (``128 + signal``, as a shell reports).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_stopping: list[int] = []  # the signal being handled, once one has arrived


def cores() -> int:
    """The CPU cores this process may run on: its affinity where the system has one (a container
    or ``taskset`` limits it), else every core of the machine."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity on this system
        return os.cpu_count() or 1


def capped_jobs(jobs: int, flag: str = "--jobs") -> tuple[int, str]:
    """``jobs`` processes on this machine held to one per core (more only compete for the same
    cores, each with its own copy of the data), and the line that says so when it cuts them (""
    when it does not)."""
    if jobs <= cores():
        return jobs, ""
    return cores(), f"{flag} {jobs} is more than this machine's {cores()} CPU core(s): using {cores()}, one per core"


class Interrupted(KeyboardInterrupt):
    """A command told to stop by ``signum``. A KeyboardInterrupt, so that whatever handles Ctrl-C
    (and no ``except Exception``) handles SIGTERM and SIGHUP the same way."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def exit_code(stop: BaseException) -> int:
    """The exit code of a command that ``stop`` ended: ``128 + signal`` (130 for a plain Ctrl-C)."""
    return 128 + (stop.signum if isinstance(stop, Interrupted) else int(signal.SIGINT))


def _raise(signum: int, frame: Any) -> None:
    if _stopping:  # the first signal's clean-up is running: let it finish
        return
    _stopping.append(signum)
    raise Interrupted(signum)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Inside the block, SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` in this (main)
    thread; the handlers before it are restored after it. A signal this process inherited as
    ignored stays ignored (``nohup``; a shell's background job ignores SIGINT, and the shell
    script that started it passes SIGTERM on instead). Outside the main thread, where Python
    takes no signal handler, the block changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in SIGNALS}
    _stopping.clear()
    try:
        for signum, handler in before.items():
            if handler is not signal.SIG_IGN:
                signal.signal(signum, _raise)
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def interrupted_line(kept: str) -> str:
    """The one line a command prints when a signal stopped it: what it ``kept``, and how to go on."""
    return f"interrupted: {kept}; run the same command again to go on"


def leave_to_parent() -> None:
    """In a process a command started: ignore SIGINT and SIGHUP (a Ctrl-C or a closed terminal
    reaches the whole process group at once; the command decides, and ends this process with
    SIGTERM)."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def starting_children() -> Iterator[None]:
    """Start child processes inside the block with SIGINT and SIGHUP blocked. A process inherits
    its signal mask across fork and exec, so a Ctrl-C (or a closed terminal) that reaches the whole
    group while a new worker is still importing, before its initializer leaves those signals to this
    process (:func:`leave_to_parent`), is held there instead of interrupting the import with a
    traceback; this process takes a signal that arrived meanwhile as the block ends. Only for
    children that leave the two signals to their parent anyway (grid workers): a notebook kernel
    must keep SIGINT, its interrupt."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGHUP})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, ended but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def end_processes(pids: Iterable[int], grace_s: float) -> list[int]:
    """End the processes ``pids`` (this process's children): SIGTERM, up to ``grace_s`` seconds to
    exit (a grid worker releases its cells), then SIGKILL. Returns the pids that needed SIGKILL.
    Their owner (a process pool) collects their exit status."""
    pids = [p for p in pids if _alive(p)]
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    killed = [p for p in pids if _alive(p)]
    for pid in killed:
        _signal(pid, signal.SIGKILL)
    return killed


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass

