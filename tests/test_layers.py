"""The package's shape (docs/internals.md): no import cycle, and every layer imports only
the layers below it. Imports are read from the source, function-level ones included, so a
cycle cannot hide inside a function. The page's table of test folders is the folders of tests/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import stamplib

PACKAGE = Path(stamplib.__file__).resolve().parent

#: Each layer and what it may import (itself included). Faces may import anything.
ALLOWED = {
    "validation": set(),
    "paths": set(),
    "version": set(),
    "determinism": {"paths"},
    "extras": set(),
    "processes": set(),  # how many processes a command starts, and how they end with it
    "flags": {"paths", "validation"},  # the flags the command lines share (data/downloads and outlier_c too)
    "blocks": {"blocks"},
    "methods": {"methods", "blocks", "validation"},
    "data": {"data", "paths", "validation", "flags"},
    "models": {"models", "data", "blocks", "paths", "validation"},
    "evaluation": {"evaluation", "data", "methods", "models", "blocks", "paths", "validation", "version",
                   "extras"},
    "experiments": {"experiments", "evaluation", "data", "methods", "models", "blocks", "paths", "validation",
                    "version", "extras", "processes"},
    "report": {"report", "experiments", "evaluation", "data", "methods", "paths", "validation"},
    # the paper's claims, how records decide them, and the pages built from committed records
    "evidence": {"evidence", "report", "experiments", "evaluation", "data", "methods", "models", "blocks", "paths",
                 "validation"},
    # the course (notebooks 14–17): exercises checked against the layers below, lessons' figures
    "teaching": {"teaching", "report", "experiments", "evaluation", "data", "methods", "models", "blocks", "paths",
                 "validation", "extras"},
}
FACES = {"__init__", "__main__", "cli", "notebook_runner", "explorer", "site"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(path: Path) -> set[str]:
    """The stamplib modules ``path`` imports: ``from stamplib.x import y`` is stamplib.x.y when
    that is a module, else stamplib.x."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "stamplib"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "stamplib":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return found


GRAPH = {name: imports_of(path) for name, path in MODULES.items()}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_there_is_no_import_cycle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in GRAPH.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in GRAPH.get(node, ()):
                cycles.append(sorted(component))

    for name in GRAPH:
        if name not in index:
            visit(name)
    assert not cycles, f"import cycles: {cycles}"


def test_each_layer_imports_only_the_layers_below_it() -> None:
    wrong = []
    for module, targets in GRAPH.items():
        own = layer(module)
        if own in FACES:
            continue
        assert own in ALLOWED, f"{module}: add its layer to ALLOWED (and to docs/internals.md)"
        wrong += [f"{module} -> {t}" for t in targets if layer(t) not in ALLOWED[own]]
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_benchmarks_import_only_the_oracles_from_the_tests() -> None:
    """A benchmark times the library beside the test suite's oracles (tests/oracles/), from the
    checkout that holds both; nothing else of the tests is a benchmark's to import."""
    benchmarks = Path(__file__).resolve().parents[1] / "benchmarks"
    wrong = []
    for path in sorted(benchmarks.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            wrong += [f"{path.name}: {n}" for n in names
                      if n.split(".")[0] == "tests" and not n.startswith("tests.oracles.")]
    assert benchmarks.is_dir() and not wrong, wrong


def test_the_package_holds_no_test_oracle() -> None:
    """The plain transcriptions the tests compare against live in tests/oracles/, not in the package."""
    assert not sorted(PACKAGE.rglob("plain_*")), sorted(PACKAGE.rglob("plain_*"))
    from_tests = [f"{name}: {node.module}" for name, path in MODULES.items()
                  for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tests"]
    assert not from_tests, from_tests


def test_the_graph_sees_every_kind_of_import() -> None:
    assert "stamplib.data.registry" in GRAPH["stamplib.data.catalog"]  # from-import of names
    assert "stamplib.data.loaders" in GRAPH["stamplib.data.catalog"]  # function-level import
    assert "stamplib.evaluation.runner" in GRAPH["stamplib"]


def test_the_architecture_page_lists_every_test_folder() -> None:
    """docs/architecture.md's Tests table names each folder of tests/ once, each with a line on
    what it holds, and no folder that is gone."""
    tests = Path(__file__).resolve().parent
    page = (tests.parent / "docs" / "architecture.md").read_text()
    section = page[page.index("\n## Tests\n"):]
    rows = re.findall(r"^\| `tests/([^`/]+)/` \| (.*) \|$", section, re.M)
    listed = [folder for folder, _ in rows]
    on_disk = sorted(p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert sorted(listed) == on_disk and len(set(listed)) == len(listed), (
        f"docs/architecture.md's Tests table lists {sorted(listed)}; tests/ holds {on_disk}")
    assert all(len(what.strip()) > 10 for _, what in rows), rows
