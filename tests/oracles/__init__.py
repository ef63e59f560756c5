"""Oracles: plain, deliberately slow transcriptions of the reference algorithms, which the
tests assert the library against.

* :mod:`.stamp` — STAMP's step with standard BatchNorm, list memories and SAM written out;
* :mod:`.corruptions` — the Hendrycks corruption code, one image at a time;
* :mod:`.views` — the CoTTA test-time views, every op on the whole image.

The benchmarks time the last two beside the library's code (they run from a checkout, as the
tests do); nothing under ``stamplib/`` imports them.
"""
