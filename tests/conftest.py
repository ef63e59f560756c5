"""Shared fixtures. Tests never write into the repository's results/ or figures/: each test
session gets its own results and figures folders. The built-in source model is shared with the
notebooks through the checkout's .cache/ (trained once, about a minute). Plain helper functions
are in ``tests/support.py``."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

# One intra-op thread: the suite runs in two xdist workers on two cores, and tiny models on
# oversubscribed OpenMP threads run up to 100x slower. The environment variable reaches the
# processes the tests start (notebook kernels, CLI and grid subprocesses); it must be set
# before torch is imported.
os.environ["OMP_NUM_THREADS"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def _signals_as_a_terminal_leaves_them() -> Iterator[None]:
    """The commands the tests start get SIGINT and SIGHUP at their defaults, as from a terminal.

    A test run started with ``nohup`` or as a non-interactive shell's background job inherits
    them ignored, an ignored signal stays ignored across exec, and a command keeps an inherited
    ignore on purpose (:func:`stamplib.processes.stop_on_signals`): a test that signals a command
    (``tests/faces/test_signals.py``, ``test_edges.py``'s Ctrl-C) would then fail for the way the
    run was launched."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGHUP)}
    if before[signal.SIGINT] is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if before[signal.SIGHUP] is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@pytest.fixture(autouse=True)
def _isolated_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("STAMPLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("STAMPLIB_FIGURES", str(tmp_path / "figures"))


@pytest.fixture
def fresh_streams():
    """Streams are cached per process; a test that writes data files must not see another
    test's stream of the same name (``pytestmark = pytest.mark.usefixtures("fresh_streams")``)."""
    from stamplib.data import build_stream

    build_stream.cache_clear()


@pytest.fixture(scope="session")
def digits_model():
    from stamplib.models import source_model

    return source_model("digits", progress=False)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh STAMPLIB_HOME: checkpoints written by a test stay in its temporary folder."""
    monkeypatch.setenv("STAMPLIB_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A fresh, empty data root for tests that write data set files."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("STAMPLIB_DATA_ROOT", str(root))
    return root
