"""Solvers: the conda part with py-rattler, the PyPI part with uv. Both return LockedPackages."""
