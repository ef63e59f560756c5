"""Oracles: plain, deliberately slow transcriptions of the reference algorithms, which the
tests assert the library against.

* :mod:`.stamp` — STAMP's step with standard BatchNorm, list memories and SAM written out.

The two that the benchmarks time as well live in the library, since benchmarks import nothing
from tests/: :mod:`stamplib.data.plain_corruptions` (the Hendrycks corruption code, one image
at a time) and :mod:`stamplib.blocks.plain_views` (the CoTTA test-time views, every op on the
whole image).
"""
