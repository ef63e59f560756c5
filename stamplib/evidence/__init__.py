"""The evidence: the paper's claims (:mod:`.ledger`), how committed records decide them
(:mod:`.judge`), and every page and figure built from those records."""
