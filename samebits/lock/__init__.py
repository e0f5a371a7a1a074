"""Locks: the conda-lock v1 model, reading any lock, validating, diffing, making one from a spec."""
