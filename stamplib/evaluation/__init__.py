"""RunSpec, run(), metrics and the results store."""
