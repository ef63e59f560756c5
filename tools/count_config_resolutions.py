"""Count, on the path that builds one EATA from a spec (RunSpec.make with one override given as
text, then assembly.build_method): config resolutions (EATAConfig instances made from the
hyperparameter set's config with the overrides: its __post_init__ runs once per dataclasses.replace) and
override typings (calls of methods.base.typed_overrides; and of validation.coerce, per value).
Issue 50, item 4: 3 configs made and 4 typings before (9c2f35d), 1 and 1 after.

Usage: .venv/bin/python tools/count_config_resolutions.py"""
import collections
import functools

from stamplib import methods, validation
from stamplib.methods import base, eata

counts = collections.Counter()


def counting(name, fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        counts[name] += 1
        return fn(*a, **k)
    return wrapper


wrapped = counting("typed_overrides", base.typed_overrides)
base.typed_overrides = methods.typed_overrides = wrapped
coerce = counting("coerce", validation.coerce)
base.coerce = coerce
post_init = eata.EATAConfig.__post_init__
eata.EATAConfig.__post_init__ = counting("EATAConfig made", post_init)

from stamplib.evaluation.assembly import build_method  # noqa: E402
from stamplib.evaluation.spec import RunSpec  # noqa: E402

counts.clear()
spec = RunSpec.make("eata", overrides={"lr": "0.001"}, dataset="digits")
print("RunSpec.make:       ", dict(counts))
build_method(spec, "cpu")
print("+ build_method:     ", dict(counts))
