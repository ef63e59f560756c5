"""Counterfactual arms of a method: diagnostics that measure why it wins or loses, never methods.

A diagnostic changes one thing about a method and nothing else: a hyperparameter (its memory off,
half its step size), or what it is told (an *oracle* filter: the runner reveals which samples of a
batch are outliers, which no test-time method may know). A cell names it in
:attr:`stamplib.evaluation.RunSpec.diagnostic`; its record is stored, judged and shown like any
other cell's, labelled as a diagnostic (``STAMP, diagnostic: an oracle filter``) so that no table
takes it for a method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Diagnostic:
    """``name`` (the spec's value), ``label`` (what a table says), the ``method`` it applies to,
    the config fields it ``changes`` (from the config it starts from), and whether the runner
    reveals each batch's outliers to the method (``oracle``: the method must accept them,
    :attr:`stamplib.methods.TTAMethod.accepts_oracle`)."""

    name: str
    label: str
    method: str
    changes: Callable[[Any], Mapping[str, Any]]
    oracle: bool = False

    def apply(self, config: Any) -> Any:
        """The method's config under this diagnostic."""
        return dataclasses.replace(config, **self.changes(config)) if self.changes(config) else config


#: STAMP's counterfactuals for its setting (a) with Noise outliers (why it loses on the compact networks).
DIAGNOSTICS: dict[str, Diagnostic] = {d.name: d for d in (
    Diagnostic("oracle_filter", "an oracle filter (no outlier enters its memory or its loss)", "stamp",
               lambda config: {}, oracle=True),
    Diagnostic("no_memory", "without its memory (it adapts on each whole batch)", "stamp",
               lambda config: {"memory": False}),
    Diagnostic("half_step", "half its step size", "stamp", lambda config: {"lr": config.lr / 2}),
)}


def diagnostic(name: str, method: str) -> Diagnostic | None:
    """The diagnostic ``name`` of ``method`` (None for ""); an unknown name, or one of another
    method, is refused with the names there are."""
    if not name:
        return None
    found = DIAGNOSTICS.get(name)
    if found is None or found.method != method:
        mine = [d.name for d in DIAGNOSTICS.values() if d.method == method]
        raise ValueError(f"diagnostic {name!r} is not one of {method}'s: "
                         + (", ".join(mine) if mine else f"{method} has none") + " (or '' for the method itself)")
    return found
