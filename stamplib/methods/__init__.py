"""TTA methods: ``available()`` lists them, ``create(name, model, num_classes, hyperparameter_set=...)``
builds one (``config=`` a resolved config instead, e.g. a RunSpec's; ``execution=`` how it
computes). Every module of this package is imported here, so a new method module registers
itself with its ``@register`` decorator and nothing else needs editing."""

import importlib
import pkgutil

from stamplib.methods.base import (
    HYPERPARAMETER_SETS,
    PAPER_ORDER,
    RECORD_EXECUTION,
    Execution,
    SourceData,
    TTAMethod,
    TTAOutput,
    available,
    check_batch_size,
    check_hyperparameter_set,
    config_with,
    create,
    field_types,
    listing_lines,
    method_class,
    register,
    resolve_config,
    table_order,
    typed_overrides,
)

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "base" and not _module.startswith("_"):
        importlib.import_module(f"{__name__}.{_module}")

#: The default rows of the method tables (notebooks 02–05): the paper's ten, then the package's
#: methods that ask for a row (``table_row``), taken once all of them are imported.
TABLE_ORDER = table_order()

__all__ = [
    "PAPER_ORDER",
    "TABLE_ORDER",
    "HYPERPARAMETER_SETS",
    "RECORD_EXECUTION",
    "Execution",
    "SourceData",
    "TTAMethod",
    "TTAOutput",
    "available",
    "check_batch_size",
    "check_hyperparameter_set",
    "config_with",
    "create",
    "field_types",
    "listing_lines",
    "method_class",
    "register",
    "resolve_config",
    "table_order",
    "typed_overrides",
]
