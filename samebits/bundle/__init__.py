"""Bundles: a paper's environment in one reproducible tar (prepare, write, read)."""
