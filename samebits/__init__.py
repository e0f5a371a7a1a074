"""samebits: reproducible GPU environments as declared, locked, verifiable artifacts.

Three layers; imports run one way, down this list (``tests/test_layers.py`` fails on any
back-edge, lazy imports included):

    core         samebits.*  (this package, but samebits_app)
                 errors, _io, ui, spec + specio + specvalidate, gpus (the GPU registry),
                 lockfile, locking + solve/ (spec -> lock), lockdiff, project, render/,
                 install.  Imports nothing of verify or samebits_app.
    verify       verify.*  prove an environment and a machine: manifest, records, drift,
                 linkage, facts, preflight, workloads, attest, compare, fleet.
                 Imports the core only.
    composition  samebits_app.*  the CLI that wires every command, the attest/audit
                 pipeline and its reports.  Imports the core and verify.

The workload worker (``python -m verify.gpu.workloads``, with ``verify.gpu.facts`` and
``verify.gpu.errorstats``) runs inside other people's environments, so it imports only the
standard library, torch, nvidia-ml-py and the core's stdlib-only ``errors`` and ``_io``.
"""

__version__ = "0.1.0"
