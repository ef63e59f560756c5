"""The site of executed notebooks: built offline by Sphinx + MyST-NB from stored outputs, one page
per notebook plus a home page, and a static check that finds every broken reference. The
browser half (console errors, images that do not load, the paper-vs-ours cells) is
tests/browser/test_site_in_chromium.py."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
from pathlib import Path

import pytest

from stamplib import site

REPO = Path(__file__).resolve().parents[2]


def _png() -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _executed_notebook(path: Path, title: str, summary: str) -> None:
    nb = {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                     "language_info": {"name": "python"}},
        "cells": [
            {"cell_type": "markdown", "id": "a", "metadata": {}, "source": f"# {title}\n\n{summary}\nsecond "
                                                                           f"line.\n\nMore."},
            {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": 1, "source": "table; fig",
             "outputs": [
                 {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                  "data": {"text/html": "<table><tr><td>Tent</td><td>62.3</td><td>20.3</td></tr></table>",
                           "text/plain": "table"}},
                 {"output_type": "display_data", "metadata": {}, "data": {"image/png": _png(), "text/plain": "fig"}},
             ]},
        ],
    }
    path.write_text(json.dumps(nb))


@pytest.fixture()
def executed(tmp_path: Path) -> Path:
    quick = tmp_path / "notebooks" / "quick"
    quick.mkdir(parents=True)
    _executed_notebook(quick / "02_table1_cifar_outlier_aware.ipynb", "02 — Table 1", "The paper's main result.")
    _executed_notebook(quick / "07_fig_weight_strategies.ipynb", "07 — Figure 3", "Weights | strategies.")
    real = tmp_path / "notebooks" / "quick_real"
    real.mkdir()
    _executed_notebook(real / "02_table1_cifar_outlier_aware.ipynb", "02 — Table 1", "On JPEG images.")
    figures = tmp_path / "figures"
    figures.mkdir()
    (figures / "02_table1_cifar_outlier_aware.png").write_bytes(base64.b64decode(_png()))
    return quick


def test_the_site_has_a_home_page_and_one_page_per_notebook(executed: Path, tmp_path: Path) -> None:
    index = site.build_site("quick", out=tmp_path / "site", executed=executed, figures=tmp_path / "figures")
    root = index.parent
    assert index == tmp_path / "site" / "index.html"
    pages = sorted(p.relative_to(root).as_posix() for p in root.glob("*/[0-9][0-9]_*.html"))
    assert pages == ["notebooks/02_table1_cifar_outlier_aware.html", "notebooks/07_fig_weight_strategies.html",
                     "real/02_table1_cifar_outlier_aware.html"]
    home = index.read_text()
    assert "02 — Table 1 — on real images (JPEG CIFAR-10)" in home and "The paper’s main result." in home
    assert 'href="notebooks/07_fig_weight_strategies.html"' in home
    assert "headline.png" in home
    table_page = (root / "notebooks" / "02_table1_cifar_outlier_aware.html").read_text()
    assert "<td>62.3</td>" in table_page and "<img" in table_page
    assert site.check_site(root) == []
    assert not (tmp_path / "site.partial").exists()


def test_every_guide_of_docs_is_a_page_of_the_site_and_its_links_resolve(executed: Path, tmp_path: Path) -> None:
    """The README's "More" pages (docs/*.md) are in the site's navigation; check_site then
    proves that every link and image of them resolves."""
    index = site.build_site("quick", out=tmp_path / "site", executed=executed, figures=tmp_path / "figures")
    root, home = index.parent, index.read_text()
    guides = sorted((REPO / "docs").glob("*.md"))
    assert len(guides) >= 8
    for guide in guides:
        assert (root / "docs" / f"{guide.stem}.html").is_file(), guide.name
        assert f'href="docs/{guide.stem}.html"' in home, guide.name
    assert "For teaching" in home  # the course's learning path, named on the home page
    assert site.check_site(root) == []


def test_every_relative_link_of_the_readme_names_a_file_of_the_repository() -> None:
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)", readme)
    local = [t for t in targets if not t.startswith(("http://", "https://", "mailto:"))]
    assert local, "the README links to its guides"
    missing = [t for t in local if not (REPO / t).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
    linked = {t for t in local if t.startswith("docs/") and t.endswith(".md")}
    assert linked == {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}, "every guide is linked from the README"


def test_the_check_finds_a_missing_figure_and_a_remote_resource(executed: Path, tmp_path: Path) -> None:
    root = site.build_site("quick", out=tmp_path / "site", executed=executed, figures=tmp_path / "figures").parent
    figure = next((root / "_images").glob("*.png"))
    figure.unlink()
    problems = site.check_site(root)
    assert problems and all(figure.name in p and "does not have" in p for p in problems)
    page = root / "notebooks" / "07_fig_weight_strategies.html"
    page.write_text(page.read_text().replace("</head>", '<script src="https://cdn.example/x.js"></script></head>'))
    assert any("from another host" in p for p in site.check_site(root))
    assert "is missing" in site.check_site(tmp_path / "nowhere")[0]


def test_a_failed_build_leaves_the_previous_site_whole(executed: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "site"
    site.build_site("quick", out=out, executed=executed, figures=tmp_path / "figures")
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    monkeypatch.setattr(site.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 2, "", "boom"))
    with pytest.raises(RuntimeError, match="previous site is untouched"):
        site.build_site("quick", out=out, executed=executed, figures=tmp_path / "figures")
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_no_executed_notebooks_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="run_all.sh"):
        site.build_site("quick", tmp_path / "figures", out=tmp_path / "site", executed=tmp_path / "empty")
