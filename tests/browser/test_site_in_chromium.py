"""The built site (``./run_all.sh --site`` → build/site) in headless chromium: the home page and
every notebook page load without a console error, a failed request or an image that does not
show; every internal link answers; each table page shows the paper's and our number of one
known cell; and deleting a figure file is caught."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.browser.conftest import serve, watch

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("STAMPLIB_SITE", REPO / "build" / "site"))
EXECUTED = REPO / "build" / "notebooks" / os.environ.get("STAMPLIB_SITE_PROFILE", "quick")
FIGURES = Path(os.environ.get("STAMPLIB_FIGURES", REPO / "figures"))


@pytest.fixture(scope="module")
def site_dir() -> Path:
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no site at {SITE}: build it with ./run_all.sh --site (or python -m stamplib site)")
    return SITE


def visit(browser, url: str) -> tuple[list[str], dict]:
    page = browser.new_page()
    problems = watch(page)
    page.goto(url, wait_until="load")
    if os.environ.get("STAMPLIB_SCREENSHOTS"):  # the note's pictures of the home page and a table page
        shots = Path(os.environ["STAMPLIB_SCREENSHOTS"])
        name = url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".html")
        page.screenshot(path=str(shots / f"site_{name}.png"), full_page=False)
    facts = page.evaluate("""() => ({
        broken: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src')),
        images: document.querySelectorAll('article img').length,
        links: [...document.querySelectorAll('a[href]')].map(a => a.href),
        rows: [...document.querySelectorAll('article tr')].map(r => r.innerText),
    })""")
    page.close()
    problems += [f"image does not show: {src}" for src in facts["broken"]]
    return problems, facts


def _stored_images(notebook: Path) -> int:
    cells = json.loads(notebook.read_text())["cells"]
    return sum("image/png" in out.get("data", {}) for c in cells for out in c.get("outputs", []))


def test_every_page_loads_cleanly_with_its_figures(browser, site_dir: Path) -> None:
    pages = ["index.html"] + sorted(p.relative_to(site_dir).as_posix() for p in site_dir.glob("*/[0-9][0-9]_*.html"))
    notebooks = sorted(EXECUTED.glob("[0-9][0-9]_*.ipynb"))
    assert {f"notebooks/{nb.stem}.html" for nb in notebooks} <= set(pages), "a notebook has no page"
    committed = sorted(nb.name for nb in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [nb.name for nb in notebooks] == committed, "build/notebooks is not a run of every notebook: ./run_all.sh"
    problems, links = {}, set()
    with serve(site_dir) as base:
        for rel in pages:
            found, facts = visit(browser, base + rel)
            if found:
                problems[rel] = found
            source = EXECUTED / f"{Path(rel).stem}.ipynb" if rel.startswith("notebooks/") else None
            if source is not None and source.is_file():
                assert facts["images"] >= _stored_images(source), f"{rel} shows fewer figures than its notebook"
            links |= {link.split("#")[0] for link in facts["links"] if link.startswith(base)}
        import urllib.request

        for link in sorted(links):
            with urllib.request.urlopen(link) as answer:  # raises on 404: a broken internal link
                assert answer.status == 200, link
    assert problems == {}


def _known_cell(table_md: Path) -> tuple[str, str, str] | None:
    """The first row of a paper-vs-ours table file with both numbers: (method, paper, ours)."""
    lines = [ln for ln in table_md.read_text().splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for metric in ("H", "ACC"):
        if f"{metric} paper" not in header:
            continue
        for line in lines[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            row = dict(zip(header, cells))
            if row.get("corruption", "mean") != "mean":  # per-corruption tables show their means on the page
                continue
            paper, ours = row[f"{metric} paper"], row[f"{metric} ours"].rstrip("†")
            if re.fullmatch(r"[\d.]+", paper) and re.fullmatch(r"[\d.]+", ours):
                return row["method"], paper, ours
    return None


def test_each_table_page_shows_the_paper_and_our_number(browser, site_dir: Path) -> None:
    checked = []
    with serve(site_dir) as base:
        for nb in sorted(EXECUTED.glob("[0-9][0-9]_*.ipynb")):
            table = FIGURES / f"{nb.stem}.md"
            cell = _known_cell(table) if table.is_file() else None
            if cell is None:
                continue
            method, paper, ours = cell
            _, facts = visit(browser, f"{base}notebooks/{nb.stem}.html")
            assert any(method in row and paper in row and ours in row for row in facts["rows"]), (
                f"{nb.stem}: no table row shows {method} with paper {paper} and ours {ours}")
            checked.append(nb.stem[:2])
    assert {"02", "04", "05", "06", "08"} <= set(checked)


def test_a_deleted_figure_is_caught(browser, site_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "site"
    shutil.copytree(site_dir, copy)
    rel = "notebooks/02_table1_cifar_outlier_aware.html"
    figure = re.search(r'<img [^>]*src="(\.\./_images/[^"]+)"', (copy / rel).read_text()).group(1)
    (copy / "notebooks" / figure).unlink()
    with serve(copy) as base:
        problems, _ = visit(browser, base + rel)
    name = Path(figure).name
    assert any(name in p and p.startswith("image does not show") for p in problems)
    assert any(name in p and "404" in p for p in problems)
