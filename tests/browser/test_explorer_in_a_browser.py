"""The stream explorer with a live kernel, in a real browser: Voilà serves notebook 11 (smoke
profile), or JupyterLab opens it and runs all cells; headless chromium moves the batch slider,
and the caption's batch index and the drawn figure (images, memory, score histograms) change.
Prints the time from the key press to the new drawing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.browser.conftest import watch

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "11_explore_a_stream.ipynb"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _smoke_copy(tmp_path: Path) -> Path:
    """Notebook 11 with the smoke profile as its default (Voilà takes no papermill parameters)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert 'profile: str = "quick"' in cell.source
    cell.source = cell.source.replace('profile: str = "quick"', 'profile: str = "smoke"')
    path = tmp_path / NOTEBOOK.name
    nbformat.write(nb, path)
    return path


@contextmanager
def _server(tmp_path: Path, command: list[str], port: int) -> Iterator[str]:
    """A Voilà or JupyterLab server on loopback, stopped when the block ends."""
    env = {k: v for k, v in os.environ.items() if k != "STAMPLIB_HEADLESS"}
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "jupyter_config")  # no user settings, no news
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture()
def voila_url(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    with _server(tmp_path, [sys.executable, "-m", "voila", str(_smoke_copy(tmp_path)), "--no-browser",
                            f"--port={port}", "--Voila.ip=127.0.0.1", "--ServerApp.token=",
                            "--show_tracebacks=True"], port) as url:
        yield url


@pytest.fixture()
def lab_url(tmp_path: Path) -> Iterator[str]:
    _smoke_copy(tmp_path)
    port = _free_port()
    with _server(tmp_path, [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                            "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
                            f"--ServerApp.root_dir={tmp_path}", "--LabApp.news_url=",
                            "--ServerApp.disable_check_xsrf=True", "--allow-root"], port) as url:
        yield url


def _move_the_slider(page) -> float:
    """One step right on the batch slider; the caption must say batch 2 and the drawing change.
    Returns the seconds from the key press to the new drawing."""
    drawing = page.locator("img.stamplib-explorer-view").first
    drawing.wait_for()
    before = drawing.get_attribute("src")
    page.locator(".noUi-handle").first.focus()
    started = time.perf_counter()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('.stamplib-explorer-caption').innerText.startsWith('batch 2 of')",
        timeout=30_000)
    page.wait_for_function("(old) => { const i = document.querySelector('img.stamplib-explorer-view');"
                           " return i && i.getAttribute('src') !== old; }", arg=before, timeout=30_000)
    seconds = time.perf_counter() - started
    assert page.locator(".widget-readout").first.inner_text().strip() == "2"
    assert seconds < 5, f"the redraw took {seconds:.1f} s (target: about a second)"
    return seconds


def test_moving_the_slider_redraws_the_batch(browser, voila_url: str) -> None:
    page = browser.new_page()
    # Voilà's page template links Font Awesome and mermaid from CDNs; this machine is offline, so
    # they are refused at once (as any offline reader's browser would) instead of hanging the load.
    remote: list[str] = []
    page.route(lambda url: not url.startswith(voila_url), lambda route: (remote.append(route.request.url),
                                                                         route.abort()))
    problems = watch(page)
    page.goto(voila_url, timeout=300_000, wait_until="domcontentloaded")  # the kernel runs notebook 11 first
    caption = page.locator(".stamplib-explorer-caption")
    caption.wait_for(timeout=300_000)
    first = caption.inner_text()
    assert first.startswith("batch 1 of "), first
    seconds = _move_the_slider(page)
    print(f"Voilà: slider move to redraw {seconds:.2f} s; refused remote requests: {remote}")
    assert caption.inner_text() != first
    if os.environ.get("STAMPLIB_SCREENSHOTS"):
        page.screenshot(path=str(Path(os.environ["STAMPLIB_SCREENSHOTS"]) / "explorer_voila.png"), full_page=True)
    refused = "console error: Failed to load resource: net::ERR_FAILED"  # names no URL
    ours = [p for p in problems if not any(url in p for url in remote) and p != refused]
    assert ours == [], ours
    assert problems.count(refused) <= len(remote)
    assert all("cdn" in url for url in remote), remote
    assert seconds < 5, f"the redraw took {seconds:.1f} s (target: about a second)"


def _run_all_cells_until_the_explorer_shows(page: Any, lab_url: str, notebook: str, failed_png: str) -> Any:
    """Open ``notebook`` in JupyterLab, run all its cells, and wait for the explorer's caption (a
    screenshot ``failed_png`` under STAMPLIB_SCREENSHOTS when it never shows); the caption."""
    page.goto(f"{lab_url}lab/tree/{notebook}", timeout=120_000, wait_until="domcontentloaded")
    page.locator(".jp-Notebook").wait_for(timeout=120_000)
    page.get_by_text("Python 3 (stamplib) | Idle").wait_for(timeout=120_000)  # the kernel is up
    for _ in range(3):  # a click that lands while the session is still settling runs nothing
        page.locator(".jp-Notebook").click()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            page.locator(".jp-InputPrompt", has_text="[*]").first.wait_for(state="attached", timeout=15_000)
            break
        except Exception:
            continue
    caption = page.locator(".stamplib-explorer-caption")
    try:
        caption.wait_for(state="attached", timeout=300_000)
    except Exception:
        if os.environ.get("STAMPLIB_SCREENSHOTS"):
            page.screenshot(path=str(Path(os.environ["STAMPLIB_SCREENSHOTS"]) / failed_png))
        raise
    return caption


def test_the_explorer_in_jupyterlab(browser, lab_url: str) -> None:
    """The same slider in JupyterLab: open notebook 11, run all cells, move the slider."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    remote: list[str] = []
    page.route(lambda url: not url.startswith(lab_url), lambda route: (remote.append(route.request.url), route.abort()))
    caption = _run_all_cells_until_the_explorer_shows(page, lab_url, NOTEBOOK.name, "explorer_jupyterlab_failed.png")
    caption.scroll_into_view_if_needed()  # JupyterLab hides cells outside the window
    assert caption.inner_text().startswith("batch 1 of ")
    page.get_by_text("Python 3 (stamplib) | Idle").wait_for(timeout=300_000)  # the last cells are done
    seconds = _move_the_slider(page)
    print(f"JupyterLab: slider move to redraw {seconds:.2f} s")
    if os.environ.get("STAMPLIB_SCREENSHOTS"):
        news = page.get_by_role("button", name="No", exact=True)
        if news.count():  # JupyterLab's "notify me of news?" toast would cover the picture
            news.first.click()
        caption.scroll_into_view_if_needed()
        page.screenshot(path=str(Path(os.environ["STAMPLIB_SCREENSHOTS"]) / "explorer_jupyterlab.png"))


def test_explore_as_the_last_line_of_a_fresh_notebook_shows_the_slider(browser, tmp_path: Path) -> None:
    """A new user's first cell, ``stamplib.explore(...)`` as its last line and nothing else: the
    explorer displays itself (no ``show``, no ``.widget()``) and the slider redraws the batch."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('import stamplib\n\nstamplib.explore("stamp", profile="smoke")')]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (stamplib)", "language": "python"}
    nbformat.write(nb, tmp_path / "fresh.ipynb")
    port = _free_port()
    with _server(tmp_path, [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                            "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
                            f"--ServerApp.root_dir={tmp_path}", "--LabApp.news_url=",
                            "--ServerApp.disable_check_xsrf=True", "--allow-root"], port) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.route(lambda u: not u.startswith(url), lambda route: route.abort())
        caption = _run_all_cells_until_the_explorer_shows(page, url, "fresh.ipynb", "explorer_fresh_failed.png")
        assert caption.inner_text().startswith("batch 1 of ")
        assert "StreamExplorer(" not in page.locator(".jp-OutputArea").first.inner_text()  # no dataclass repr
        page.get_by_text("Python 3 (stamplib) | Idle").wait_for(timeout=300_000)
        seconds = _move_the_slider(page)
        print(f"JupyterLab, fresh notebook: slider move to redraw {seconds:.2f} s")
        if os.environ.get("STAMPLIB_SCREENSHOTS"):
            page.screenshot(path=str(Path(os.environ["STAMPLIB_SCREENSHOTS"]) / "explorer_fresh_notebook.png"))
