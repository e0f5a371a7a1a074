"""verify: prove an installed environment and a machine's numerics match a lock and a reference.

The middle layer (``samebits/__init__.py`` draws all three): it imports samebits' core
(errors, _io, ui, lock, spec) and never the composition, ``samebits_app``. It runs inside
the environment under test (``python -m verify env``), so modules import heavy libraries
(pyelftools, packaging, torch) only where they need them. The worker part
(``verify.gpu.workloads``, ``verify.gpu.facts``, ``verify.gpu.errorstats``) needs nothing but the
standard library and torch (1.13 or later) on Python 3.10 or later; an older Python stops here, with
one line that says so, before anything fails to import.
"""

import sys

if sys.version_info < (3, 10):  # noqa: UP036 -- the workers run on the audited env's Python
    raise SystemExit(f"error: Python {sys.version.split()[0]} ({sys.executable}): samebits' "
                     "workers (python -m verify.gpu.workloads, verify.gpu.errorstats) need "
                     "Python 3.10 or later in the environment they run in")
