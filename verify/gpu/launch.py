"""Starting samebits' own workers in another interpreter, the same way every time.

    python -m verify.gpu.workloads ...    the facts probe and the suite (``verify gpu --probe``,
                                      ``samebits attest|audit``)
    python -m verify.gpu.errorstats ...   error statistics, tensor records and fingerprints
    python -m verify.node.canaryrun ...   the node canary (``samebits verify node``)
    python -m verify.fleet ...            a fleet's rank (``samebits verify fleet --prefix ENV
                                      -- LAUNCHER``: ``verify.fleet.start`` zips the same
                                      list into the one file every rank runs)

run in the environment ``samebits.childenv.child_environ`` makes of the caller's (no
PYTHONPATH, no user site, no LD_PRELOAD, ...), from a scratch folder (``shim``) that holds the
in-environment modules, ``IN_ENV``, and nothing else of samebits: ``python -m`` puts its
working folder first on ``sys.path``, so the worker imports them and nothing else of the
caller's, while its PYTHONPATH stays what the caller kept (unset, by default) and the facts it
records say so. The audited environment needs torch, and nothing else.

``IN_ENV`` is the one list of what runs in the audited environment's own interpreter, which
may be any Python from 3.8 (torch 1.13's): the modules the workers and a fleet's rank import,
at any depth
(``tests/integration/test_inenv_pythons.py`` compiles and imports each with real 3.8 and 3.9
interpreters, and checks that none imports a module of ours outside the list). The shim links
each of those files, and only those, into the scratch folder, so a worker that reaches for
anything else of samebits (a 3.10-only module, or one that needs yaml) fails with "No module
named ..." in samebits' own tests, not in a reviewer's 3.9 environment. (Links to files, not
folders: the worker compiles their bytecode into the scratch folder each time, about 0.1 s.)
The paper commands' settings hook (``samebits_app.paper.hook``) also runs there, as generated
text that imports nothing of samebits.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from samebits.childenv import child_environ

# The modules of samebits that run in the audited environment's interpreter (Python 3.8 or
# later, the standard library and torch): what the workers import, and nothing more.
IN_ENV: tuple[str, ...] = (
    "samebits", "samebits._compat", "samebits._io", "samebits.childenv", "samebits.errors",
    "samebits.gcpause",
    "verify", "verify.gpu",
    "verify.gpu.errorstats", "verify.gpu.errorstats.__main__",
    "verify.gpu.errorstats.tensorfiles", "verify.gpu.errorstats.tensors",
    "verify.gpu.facts", "verify.gpu.facts.cpu", "verify.gpu.facts.driver",
    "verify.gpu.facts.model", "verify.gpu.facts.torchapi", "verify.gpu.facts.torchinfo",
    "verify.gpu.workloads", "verify.gpu.workloads.__main__", "verify.gpu.workloads._common",
    "verify.gpu.workloads.attention", "verify.gpu.workloads.catalog",
    "verify.gpu.workloads.conv", "verify.gpu.workloads.gemm", "verify.gpu.workloads.reductions",
    "verify.gpu.workloads.rng", "verify.gpu.workloads.scatter", "verify.gpu.workloads.settings",
    "verify.gpu.workloads.training",
    "verify.node", "verify.node.canaryrun",
    "verify.fleet", "verify.fleet.__main__", "verify.fleet.checkin", "verify.fleet.handoff",
    "verify.fleet.launcher", "verify.fleet.rankopts", "verify.fleet.run", "verify.fleet.tree",
)


def package_dirs() -> dict[str, Path]:
    """This samebits' ``samebits/`` and ``verify/`` folders (from modules, not packages:
    an editable install may present ``verify`` as a namespace package without a file)."""
    import samebits._io
    import verify.gpu.attest

    return {"samebits": Path(samebits._io.__file__).resolve().parent,
            "verify": Path(verify.gpu.attest.__file__).resolve().parent.parent}


def module_file(name: str) -> Path:
    """Where module ``name`` of ``IN_ENV`` lies, relative to the folder that holds the
    packages: ``verify/gpu/facts/cpu.py``, ``verify/gpu/facts/__init__.py``."""
    parts = name.split(".")
    folder = package_dirs()[parts[0]].joinpath(*parts[1:])
    if folder.with_suffix(".py").is_file():
        return Path(*parts).with_suffix(".py")
    return Path(*parts, "__init__.py")


@contextlib.contextmanager
def shim() -> Iterator[Path]:
    """A scratch folder holding links to this samebits' ``IN_ENV`` files, in their packages'
    folders, removed afterwards."""
    dirs = package_dirs()
    with tempfile.TemporaryDirectory(prefix="samebits-path.") as tmp:
        for name in IN_ENV:
            rel = module_file(name)
            (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(dirs[rel.parts[0]].joinpath(*rel.parts[1:]), Path(tmp) / rel)
        yield Path(tmp)


def worker_environ(environ: Mapping[str, str] | None = None, *,
                   keep: Iterable[str] = ()) -> dict[str, str]:
    """The worker's environment: the caller's, clean (``keep``: what a paper keeps), without
    CUBLAS_WORKSPACE_CONFIG (each settings profile sets its own)."""
    env = child_environ(os.environ if environ is None else environ, keep=keep)
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    return env


def run_module(python: str, args: Sequence[str], *, environ: Mapping[str, str] | None = None,
               keep: Iterable[str] = (), timeout: float | None = None
               ) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` (``-m verify.gpu.workloads ...``) from the shim, in ``worker_environ``.
    Raises what ``subprocess.run`` raises (FileNotFoundError, TimeoutExpired)."""
    env = worker_environ(environ, keep=keep)
    with shim() as folder:
        return subprocess.run([python, *args], capture_output=True, text=True, env=env,
                              timeout=timeout, cwd=folder, stdin=subprocess.DEVNULL)
