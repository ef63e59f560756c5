"""Headless Debian chromium, driven by Playwright, for the browser tests (``-m browser``;
tools/browser_tests.sh installs chromium and Playwright, builds the site if needed and runs them).
No browser is downloaded: Playwright is pointed at /usr/bin/chromium."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

# Without the background-networking flags chromium keeps trying hosts this machine cannot reach.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(executable).exists():
        pytest.fail("Debian's chromium is missing: tools/browser_tests.sh installs it (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is missing: tools/browser_tests.sh installs it (pip install -e '.[browser]')")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


@contextmanager
def serve(folder: Path) -> Iterator[str]:
    """``folder`` over HTTP on a free loopback port, for as long as the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def watch(page: Any) -> list[str]:
    """Everything that goes wrong on ``page`` from now on: console errors, uncaught exceptions,
    failed requests and HTTP errors."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console error: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    return problems
