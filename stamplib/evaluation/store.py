"""The results store: one JSON record per RunSpec hash, written atomically.

A record is complete or absent: it is written to a temporary file and renamed, so a run
killed mid-write leaves no partial record (and a stray temporary file is never read).

A record whose stored hyperparameters (``config``) differ from what the spec resolves to today
is stale — a default changed since it was computed — and counts as absent, so it is recomputed.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from stamplib import paths
from stamplib.evaluation.spec import RunSpec

#: Fields without which a record is useless (a JSON file written by something else, or edited).
_REQUIRED = ("key", "spec", "mean")


def _read(path: Path) -> dict[str, Any] | None:
    """A complete record from ``path``, or None with a warning (it will be recomputed)."""
    try:
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        warnings.warn(f"ignoring unreadable results record {path} ({exc}); it will be recomputed", stacklevel=3)
        return None
    if not isinstance(record, dict) or any(k not in record for k in _REQUIRED):
        warnings.warn(f"ignoring incomplete results record {path}; it will be recomputed", stacklevel=3)
        return None
    return record


def current_config(spec: RunSpec) -> str:
    """The method's hyperparameters for ``spec`` as the code resolves them now, as the runner
    records them (``repr`` of the typed config)."""
    from stamplib import methods

    return repr(methods.resolve_config(spec.method, spec.setting or spec.dataset, **dict(spec.overrides)))


class ResultsStore:
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else paths.results_dir()

    def path(self, spec: RunSpec) -> Path:
        return self.root / f"{spec.method}__{spec.dataset}__{spec.outliers}__{spec.key()}.json"

    def get(self, spec: RunSpec) -> dict[str, Any] | None:
        path = self.path(spec)
        if not path.is_file():
            return None
        record = _read(path)
        if record is None or record.get("key") != spec.key():
            return None
        if "config" in record and record["config"] != current_config(spec):
            return None  # computed under other defaults
        return record

    def put(self, record: dict[str, Any]) -> Path:
        spec = RunSpec.from_dict(record["spec"])
        path = self.path(spec)
        paths.atomic_write_bytes(path, json.dumps(record, indent=1, sort_keys=True).encode())
        return path

    def records(self) -> list[dict[str, Any]]:
        """Every complete record. Temporary files of a killed writer (``.tmp-*``, hidden) are
        skipped, and so — with a warning — are unreadable or incomplete ones."""
        out = []
        for p in sorted(self.root.glob("*.json")):
            if p.name.startswith("."):  # pathlib's glob, unlike a shell's, matches dot files
                continue
            record = _read(p)
            if record is not None:
                out.append(record)
        return out
