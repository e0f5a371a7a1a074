"""Starting samebits' own workers in another interpreter, the same way every time.

    python -m verify.gpu.workloads ...    the facts probe and the suite (``verify gpu --probe``,
                                      ``samebits attest|audit``)
    python -m verify.gpu.errorstats ...   error statistics, tensor records and fingerprints

run in the environment ``samebits.childenv.child_environ`` makes of the caller's (no
PYTHONPATH, no user site, no LD_PRELOAD, ...), from a scratch folder that holds just this
samebits' ``samebits/`` and ``verify/`` packages (``shim``): ``python -m`` puts its working
folder first on ``sys.path``, so the worker imports them and nothing else of the caller's,
while its PYTHONPATH stays what the caller kept (unset, by default) and the facts it records
say so. The audited environment needs torch, and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from samebits.childenv import child_environ


def package_dirs() -> dict[str, Path]:
    """This samebits' ``samebits/`` and ``verify/`` folders (from modules, not packages:
    an editable install may present ``verify`` as a namespace package without a file)."""
    import samebits._io
    import verify.gpu.attest

    return {"samebits": Path(samebits._io.__file__).resolve().parent,
            "verify": Path(verify.gpu.attest.__file__).resolve().parent.parent}


@contextlib.contextmanager
def shim() -> Iterator[Path]:
    """A scratch folder holding links to this samebits' two packages, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="samebits-path.") as tmp:
        for name, folder in package_dirs().items():
            os.symlink(folder, Path(tmp) / name)
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
