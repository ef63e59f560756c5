"""Count string-key reads of results records outside ``stamplib/evaluation/`` (issue 50, item 2).

What it counts, by an AST walk of every ``stamplib/**/*.py`` outside ``stamplib/evaluation/``:

* a read ``E["name"]`` (a subscript in load context) or ``E.get("name", ...)`` whose key is a
  string literal that names a field of a record at any depth — the vocabulary is taken from the
  committed records under ``results/`` (every dict key, except the corruption names under
  ``per_corruption`` and ``trace`` and the hyperparameter names under ``spec.overrides``, which
  are data, not fields) — and
* whose ``E`` is record-like: a name that holds a record or a part of one. Within one top-level
  function (or the module's own statements), a name is record-like when its identifier contains
  ``record``, when it is one of its file's :data:`ROOTS` (parameters that hold records under
  other names), or when it is bound (``=``, ``for``, a
  comprehension, a ``with``) from a record-like expression; an expression is record-like when it
  is a record-like name, a subscript or ``.get``/``.values()``/``.items()`` of one, a call of a
  function or method whose name contains ``record`` or is ``rescored``/``rescore``, or an
  ``or``/``if``-else/comprehension of record-like expressions.

DataFrame columns that share a field's name (``frame["stream"]``) are not counted: a frame is
not record-like. Attribute reads (``record.mean``) are not counted: that is the point.

Usage: ``python tools/count_record_reads.py [--list]`` from the repository root.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Parameters that hold records (or a mapping of them) under a name without ``record``, by file.
ROOTS = {"stamplib/teaching/breaking.py": {"found"}, "stamplib/experiments/reference.py": {"reference", "recomputed"}}
#: Keys whose children are data (corruption or hyperparameter names), not record fields.
DATA_KEYED = {"per_corruption", "trace", "overrides"}
RECORD_CALLS = {"rescored", "rescore"}


def vocabulary(results: Path) -> set[str]:
    """Every field name of the committed records, at any depth."""
    names: set[str] = set()

    def walk(value: object, data_keyed: bool) -> None:
        if isinstance(value, dict):
            for key, child in value.items():
                if not data_keyed:
                    names.add(key)
                walk(child, key in DATA_KEYED and not data_keyed)
        elif isinstance(value, list):
            for child in value:
                walk(child, False)

    for path in results.rglob("*.json"):
        if path.name.startswith("."):
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and {"key", "spec", "mean"} <= set(record):
            walk(record, False)
    return names


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


class _Scope:
    """The record-like names of one function (nested functions included) and the reads in it."""

    def __init__(self, node: ast.AST, fields: set[str], roots: set[str]) -> None:
        self.node, self.fields = node, fields
        self.names: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and ("record" in sub.id.lower() or sub.id in roots):
                self.names.add(sub.id)
            elif isinstance(sub, ast.arg) and ("record" in sub.arg.lower() or sub.arg in roots):
                self.names.add(sub.arg)
        while self._bind():
            pass

    def record_like(self, expr: ast.AST | None) -> bool:
        if expr is None:
            return False
        if isinstance(expr, ast.Name):
            return expr.id in self.names
        if isinstance(expr, ast.Subscript):
            return self.record_like(expr.value)
        if isinstance(expr, ast.Call):
            name = _call_name(expr)
            if "record" in name.lower() or name in RECORD_CALLS:
                return True
            if isinstance(expr.func, ast.Attribute) and name in ("get", "values", "items"):
                return self.record_like(expr.func.value)
            return name in ("list", "dict", "sorted") and any(self.record_like(a) for a in expr.args)
        if isinstance(expr, ast.BoolOp):
            return any(self.record_like(v) for v in expr.values)
        if isinstance(expr, ast.IfExp):
            return self.record_like(expr.body) or self.record_like(expr.orelse)
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self.record_like(expr.elt)
        if isinstance(expr, ast.DictComp):
            return self.record_like(expr.value)
        return False

    def _targets(self, target: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}

    def _bind(self) -> bool:
        new: set[str] = set()
        for sub in ast.walk(self.node):
            if (isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Tuple)
                    and all(isinstance(t, ast.Tuple) and len(t.elts) == len(sub.value.elts) for t in sub.targets)):
                for target in sub.targets:  # a, b = x, y
                    for name, value in zip(target.elts, sub.value.elts):
                        if self.record_like(value):
                            new |= self._targets(name)
            elif isinstance(sub, ast.Assign) and self.record_like(sub.value):
                for target in sub.targets:
                    new |= self._targets(target)
            elif isinstance(sub, (ast.AnnAssign, ast.NamedExpr)) and self.record_like(sub.value):
                new |= self._targets(sub.target)
            elif isinstance(sub, (ast.For, ast.comprehension)) and self.record_like(sub.iter):
                new |= self._targets(sub.target)
        new -= self.names
        self.names |= new
        return bool(new)

    def reads(self) -> list[ast.AST]:
        found = []
        for sub in ast.walk(self.node):
            if (isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Load)
                    and isinstance(sub.slice, ast.Constant) and sub.slice.value in self.fields
                    and self.record_like(sub.value)):
                found.append(sub)
            elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "get"
                  and sub.args and isinstance(sub.args[0], ast.Constant) and sub.args[0].value in self.fields
                  and self.record_like(sub.func.value)):
                found.append(sub)
        return found


def count(package: Path, fields: set[str]) -> list[tuple[str, int, str]]:
    """(file, line, source) of every counted read."""
    out = []
    for path in sorted(package.rglob("*.py")):
        if "evaluation" in path.relative_to(package).parts[:1]:
            continue
        tree = ast.parse(path.read_text())
        scopes = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        top = ast.Module(body=[n for n in tree.body if n not in scopes], type_ignores=[])
        methods = [m for c in scopes if isinstance(c, ast.ClassDef) for m in c.body
                   if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
        functions = [n for n in scopes if not isinstance(n, ast.ClassDef)]
        name = path.relative_to(package.parent).as_posix()
        for node in (top, *functions, *methods):
            for read in _Scope(node, fields, ROOTS.get(name, set())).reads():
                out.append((name, read.lineno, ast.unparse(read)))
    return sorted(set(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every counted read")
    args = parser.parse_args()
    reads = count(ROOT / "stamplib", vocabulary(ROOT / "results"))
    if args.list:
        for path, line, source in reads:
            print(f"{path}:{line}: {source}")
    modules = Counter(path for path, _, _ in reads)
    print(f"{len(reads)} string-key reads of records in {len(modules)} modules outside stamplib/evaluation/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
