"""The evidence: the paper's claims (:mod:`.ledger`), the benchmarks that judge them
(:mod:`.benchmarks`), the statistics of a verdict (:mod:`.statistics`), its words and what drives
it (:mod:`.judge`), the source networks' Noise diagnostics (:mod:`.networks`), and every page and
figure built from the committed records (:mod:`.pages`, :mod:`.tables`)."""
