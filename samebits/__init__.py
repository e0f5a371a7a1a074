"""samebits: reproducible GPU environments as declared, locked, verifiable artifacts.

Three layers; imports run one way, down this list (``tests/integration/test_layers.py`` fails on any
back-edge, lazy imports included; docs/explanation/architecture.md draws the tree):

    core         samebits.*  (this package)
                 spec/ (specs, the GPU registry), lock/ (conda-lock v1: read, validate, diff,
                 make), solve/, foreign/ (other tools' locks), install/, render/, bundle/,
                 dsse, childenv, errors, project, ui, _io.  Imports nothing of verify or
                 samebits_app.
    verify       verify.*  prove an environment and a machine: env/, kernels/, gpu/ (facts,
                 workloads, errorstats, preflight, attest, compare), fleet/.
                 Imports the core only.
    composition  samebits_app.*  the CLI that wires every command, the attest/audit
                 pipeline and its reports.  Imports the core and verify.

The workload worker (``python -m verify.gpu.workloads``, with ``verify.gpu.facts`` and
``verify.gpu.errorstats``) runs inside other people's environments, so it imports only the
standard library, torch, nvidia-ml-py and the core's stdlib-only ``errors``, ``_io``,
``childenv`` and ``_compat`` (what lets it run on their Python, 3.8 or later).
"""

__version__ = "0.1.0"
