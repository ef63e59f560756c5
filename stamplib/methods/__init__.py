"""TTA methods: ``available()`` lists them, ``create(name, model, num_classes, dataset=...)``
builds one. Importing this package registers every method module."""

from stamplib.methods import bn_stats, source, stamp, tent  # noqa: F401  (registration)
from stamplib.methods.base import (
    SETTINGS,
    TTAMethod,
    TTAOutput,
    available,
    create,
    method_class,
    register,
    resolve_config,
    setting_for,
)

__all__ = [
    "SETTINGS",
    "TTAMethod",
    "TTAOutput",
    "available",
    "create",
    "method_class",
    "register",
    "resolve_config",
    "setting_for",
]
