"""GPU numerics: facts, the deterministic workloads, attestations, comparison and preflight.

The worker packages (``facts``, ``workloads``, ``errorstats``) run inside other people's
environments: this package's ``__init__`` imports nothing."""
