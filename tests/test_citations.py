"""Every citation of the spec pages resolves inside the repository.

Docstrings, comments, tests, notebooks and documents cite facts as ``<file>.md §<section>``
for the five pages in ``docs/spec/`` (``protocol``, ``stamp``, ``baselines``,
``newer_methods``, ``paper_numbers``). This test finds each such citation and checks that the
page exists and, when a section is named, that the page has a heading carrying exactly that
number (``## 4 …``, ``### 4.2 …``, ``#### 4.4.3 …``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "docs" / "spec"
PAGES = ("protocol", "stamp", "baselines", "newer_methods", "paper_numbers")
SCANNED = ("stamplib", "tests", "tools", "notebooks", "docs", "README.md")
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".sh", ".txt", ".toml", ".cfg", ".ini", ".yaml", ".yml",
                 ".json", ".html", ".js", ".css", ".rst", ".tex", ".j2"}
SKIPPED_DIRS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", "node_modules"}

_SECTION = r"§[ \t]?(?P<{name}>\d+(?:\.\d+)*)"
#: ``protocol.md §4.2``, ``protocol.md`` §4.2, ``protocol.md §6.1.`` (sentence end), ``§ 4``,
#: and a citation wrapped after the file name (the next line may start with a comment mark).
CITATION = re.compile(
    r"(?<![\w.-])(?P<page>" + "|".join(PAGES) + r")\.md(?!\w)"
    r"(?:`{0,2}[ \t]*(?:\n[ \t#*>\"']*)?" + _SECTION.format(name="section") + r")?")
#: Further sections of the same page right after a cited one: ``baselines.md §5, §9``,
#: ``protocol.md §1.1/§3.2``, ``stamp.md §3 and §9``.
CONTINUATION = re.compile(r"[ \t]*(?:,|/|\band\b)[ \t]*(?:\n[ \t#*>\"']*)?"
                          + _SECTION.format(name="section"))
HEADING = re.compile(r"^#{1,6}[ \t]+§?(?P<number>\d+(?:\.\d+)*)\.?[ \t]", re.MULTILINE)


@dataclass(frozen=True)
class Citation:
    where: str  # "path:line", or "path (cell N, line M)" for a notebook
    page: str  # e.g. "protocol"
    section: str | None  # e.g. "4.2", None when only the file is cited

    def __str__(self) -> str:
        cited = f"{self.page}.md" + (f" §{self.section}" if self.section else "")
        return f"{self.where}: {cited}"


def citations_in(text: str, where) -> list[Citation]:
    """The citations in ``text``; ``where(offset)`` names the place of a character offset."""
    found = []
    for match in CITATION.finditer(text):
        page, section = match["page"], match["section"]
        found.append(Citation(where(match.start()), page, section))
        if section is None:
            continue
        end = match.end()
        while (more := CONTINUATION.match(text, end)) is not None:
            found.append(Citation(where(more.start("section")), page, more["section"]))
            end = more.end()
    return found


def _line_of(text: str, place: str):
    """``where`` for :func:`citations_in`: ``place`` with ``{line}`` filled in."""
    return lambda offset: place.format(line=text.count("\n", 0, offset) + 1)


def _notebook_citations(path: Path, rel: str) -> list[Citation]:
    """A notebook's cell sources and text outputs, each scanned as the text it shows."""
    found = []
    raw = path.read_text(encoding="utf-8")
    try:
        cells = json.loads(raw).get("cells", [])
    except ValueError:  # not valid JSON: scan the file as plain text
        return citations_in(raw, _line_of(raw, rel + ":{line}"))
    for number, cell in enumerate(cells, start=1):
        pieces = [cell.get("source", "")]
        for output in cell.get("outputs", []):
            pieces.append(output.get("text", ""))
            pieces.extend(v for k, v in output.get("data", {}).items() if k.startswith("text/"))
        for piece in pieces:
            text = "".join(piece) if isinstance(piece, list) else str(piece)
            found += citations_in(text, _line_of(text, f"{rel} (cell {number}, line {{line}})"))
    return found


def scanned_files() -> list[Path]:
    files = []
    for name in SCANNED:
        top = ROOT / name
        if top.is_file():
            files.append(top)
            continue
        for path in sorted(top.rglob("*")):
            if (path.is_file() and path.suffix in TEXT_SUFFIXES
                    and not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts)):
                files.append(path)
    return files


def all_citations() -> list[Citation]:
    found = []
    for path in scanned_files():
        rel = path.relative_to(ROOT).as_posix()
        if path.suffix == ".ipynb":
            found += _notebook_citations(path, rel)
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += citations_in(text, _line_of(text, rel + ":{line}"))
    return found


def headings(page_path: Path) -> set[str]:
    """The section numbers of a page's headings (empty when the page is missing)."""
    if not page_path.is_file():
        return set()
    return set(HEADING.findall(page_path.read_text(encoding="utf-8")))


def problems(citations: list[Citation], spec: Path = SPEC) -> list[str]:
    """One message per citation that does not resolve under ``spec``."""
    numbered = {page: headings(spec / f"{page}.md") for page in PAGES}
    messages = []
    for c in citations:
        if not (spec / f"{c.page}.md").is_file():
            messages.append(f"{c}: docs/spec/{c.page}.md does not exist; add the page "
                            f"(see docs/spec/README.md)")
        elif c.section is not None and c.section not in numbered[c.page]:
            messages.append(f"{c}: docs/spec/{c.page}.md has no heading numbered {c.section}; "
                            f"add one (e.g. '### {c.section} <title>' with the fact in our own "
                            f"words and its source) or correct the citation")
    return messages


@pytest.fixture(scope="module")
def citations() -> list[Citation]:
    return all_citations()


def test_every_citation_resolves(citations):
    bad = problems(citations)
    assert not bad, f"{len(bad)} citation(s) do not resolve:\n" + "\n".join(bad)


def test_the_scanner_finds_the_citations(citations):
    # A scanner that silently finds nothing would make the test above vacuous.
    assert len(citations) >= 40, f"only {len(citations)} citations found"
    assert {c.page for c in citations} >= {"protocol", "stamp", "baselines"}
    assert any(c.where.startswith("stamplib/") and c.section for c in citations)


def test_a_missing_section_or_page_is_reported():
    # Made up here (not in a file), so the real scan never sees them.
    page, missing = "protocol", "99.9"
    text = f"intro\nsee ({page}.md\n    §{missing}) and also stamp.md §4.4.3.\n"
    found = citations_in(text, _line_of(text, "made_up.py:{line}"))
    assert [str(c) for c in found] == [f"made_up.py:2: {page}.md §{missing}",
                                       "made_up.py:3: stamp.md §4.4.3"]
    bad = problems(found)
    assert len(bad) == 1 and "made_up.py:2" in bad[0] and "no heading numbered 99.9" in bad[0]
    assert "add one" in bad[0]

    unknown = [Citation("made_up.py:7", "stamp", "3")]
    bad = problems(unknown, spec=SPEC / "no-such-folder")
    assert len(bad) == 1 and "does not exist" in bad[0] and "made_up.py:7" in bad[0]


@pytest.mark.parametrize("text, expected", [
    ("(protocol.md §6.1.)", ["6.1"]),
    ("``protocol.md`` §7\n", ["7"]),
    ("protocol.md § 4 and more", ["4"]),
    ("baselines.md §5, §9", ["5", "9"]),
    ("protocol.md §1.1/§3.2", ["1.1", "3.2"]),
    ("see newer_methods.md; then", [None]),
    ("# stamp.md\n# §3 wrapped in a comment", ["3"]),
    ("docs/spec/stamp.md §4.3", ["4.3"]),
    ("mystamp.md §3, my-stamp.md, stamp.mdx §3", []),
])
def test_citation_forms(text, expected):
    assert [c.section for c in citations_in(text, lambda offset: "x")] == expected


def test_headings_are_numbered_consistently():
    for page in ("protocol", "stamp", "baselines"):
        text = (SPEC / f"{page}.md").read_text(encoding="utf-8")
        numbers = HEADING.findall(text)
        assert numbers, f"docs/spec/{page}.md has no numbered headings"
        assert len(numbers) == len(set(numbers)), f"docs/spec/{page}.md repeats a section number"
        for number in numbers:  # "## 4", "### 4.2", "#### 4.4.3": depth follows the number
            line = re.search(rf"^(#+)[ \t]+{re.escape(number)}[ \t]", text, re.MULTILINE)
            assert line is not None, f"docs/spec/{page}.md: heading {number} is not '# N title'"
            assert len(line[1]) == number.count(".") + 2, (
                f"docs/spec/{page}.md: heading {number} should have {number.count('.') + 2} '#'")


def test_spec_pages_stand_alone():
    for page in (*PAGES, "README"):
        path = SPEC / f"{page}.md"
        assert path.is_file(), f"docs/spec/{page}.md is missing"
        text = path.read_text(encoding="utf-8")
        for elsewhere in ("/work/shared", "../shared/spec", "shared/spec/"):
            assert elsewhere not in text, (
                f"docs/spec/{page}.md points to {elsewhere!r}; the facts must be on the page itself")
