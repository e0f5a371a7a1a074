"""verify: prove an installed environment and a machine's numerics match a lock and a reference.

The middle layer (``samebits/__init__.py`` draws all three): it imports samebits' core
(errors, _io, ui, lockfile, gpus) and never the composition, ``samebits.app``. It runs inside
the environment under test (``python -m verify env``), so modules import heavy libraries
(pyelftools, packaging, torch) only where they need them. The worker part
(``verify.workloads``, ``verify.facts``, ``verify.errorstats``) needs nothing but the standard
library and torch.
"""
