"""The results store: one JSON record per RunSpec hash, written atomically.

A record is complete or absent: it is written to a temporary file and renamed, so a run
killed mid-write leaves no partial record (and a stray temporary file is never read).
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
        return record if record is not None and record.get("key") == spec.key() else None

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
