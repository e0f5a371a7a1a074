"""verify: prove an installed environment and a machine's numerics match a lock and a reference.

The middle layer (``samebits/__init__.py`` draws all three): it imports samebits' core
(errors, _io, ui, lock, spec) and never the composition, ``samebits_app``. Most of it runs in
samebits' own process (Python 3.10 or later); the in-environment part runs in the audited
environment's own interpreter: the facts probe and the workloads (``python -m
verify.gpu.workloads``), the error statistics (``python -m verify.gpu.errorstats``) and the
node canary (``python -m verify.node.canaryrun``). Those modules, listed in
``verify.gpu.launch.IN_ENV`` (the only ones a worker is handed), need nothing but the standard
library and torch (1.13 or later), and run on every Python such a torch runs on: 3.8 or later
(``samebits._compat``; ``tests/integration/test_inenv_pythons.py`` compiles and imports each
with real 3.8 and 3.9 interpreters). An older Python stops here, with one line that says so,
before anything fails to import. This file is the first any worker runs, so it is written for
any Python (no f-string, no annotation: 2.7 and 3.6 get the line too).
"""

import sys

if sys.version_info < (3, 8):  # noqa: UP036 -- the workers run on the audited env's Python
    raise SystemExit("error: Python " + sys.version.split()[0] + " (" + sys.executable + "): "
                     "samebits' workers (python -m verify.gpu.workloads, verify.gpu.errorstats, "
                     "verify.node.canaryrun) need Python 3.8 or later in the environment they "
                     "run in")
