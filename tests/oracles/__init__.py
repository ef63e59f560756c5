"""Oracles: plain, deliberately slow transcriptions of the reference algorithms, shared by the
tests (which assert the library against them) and the benchmarks (which time both).

* :mod:`.corruptions` — the Hendrycks corruption code, one image at a time;
* :mod:`.views` — the CoTTA test-time views, every op on the whole image;
* :mod:`.stamp` — STAMP's step with standard BatchNorm, list memories and SAM written out.
"""
