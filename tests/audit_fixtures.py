"""A small paper to audit, and every audit of it the tests look at, run once per session.

The environment is ``tests.verify_fixtures``' pristine prefix (a local conda channel with
gcc-built ELF files and a prefix placeholder, installed by py-rattler, plus a wheel installed
by pip) and its lock. It has no torch, so the workloads run on this interpreter
(``--workload-python sys.executable``): the environment checked and the interpreter that
computes are both named by the audit, as on a real machine where they are one.

``paper``: ``samebits attest`` of it (``SUBSET``, CPU, ``OMP_NUM_THREADS=2``, outputs saved)
into a folder laid out the way the README tells authors to ship one::

    paper/conda-lock.yml  paper/reference.attestation.json  paper/outputs/

``audits``: every audit the tests read, started at once (independent processes):

    identical        the same machine and settings: bit-identical
    identical-again  the same command from another folder: byte-identical files
    threads          OMP_NUM_THREADS=1: sum_fp32 differs, explained by the thread count
    tampered-file    a copy of the environment with one file changed (``--no-workloads``):
                     not reproduced, the file named
    tampered-digest  an attestation whose sum_fp32 digest was edited: unexplained
    installed        ``samebits audit PAPER --target DIR --no-workloads``: installs the lock
                     with samebits install, environment-identical
    attest-drift     ``samebits attest`` of the tampered copy: refused, exit 1
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.verify_fixtures import (  # noqa: F401  (fixtures)
    Installed,
    _once,
    elves,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)

SUBSET = "gemm_fp32,sum_fp32,randn"
TAMPERED = "share/vfa/data.txt"


@dataclass(frozen=True)
class Paper:
    folder: Path
    prefix: Path
    lockfile: Path
    attestation: Path
    outputs: Path


@dataclass(frozen=True)
class Run:
    """One CLI run: its exit code, stdout, stderr and output folder."""

    rc: int
    stdout: str
    stderr: str
    out: Path

    def file(self, name: str) -> Path:
        return self.out / name

    def doc(self) -> dict:
        return json.loads((self.out / "audit.json").read_text())


def environ(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "SOURCE_DATE_EPOCH")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(changes)
    return env


def start(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "samebits", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _archives_folder(lockfile: Path) -> str:
    """The folder holding every file:// archive the lock names (the test channel's): the
    reviewer names it, as file:// URLs are read only from folders the user named."""
    import os
    from urllib.parse import unquote, urlsplit

    from samebits.lock.model import parse_lock

    paths = [unquote(urlsplit(p.url).path) for p in parse_lock(lockfile).packages]
    return os.path.commonpath(paths)


def make_paper(root: Path, installed: Installed) -> Paper:
    folder = root / "paper"
    folder.mkdir(parents=True)
    lockfile = folder / "conda-lock.yml"
    shutil.copyfile(installed.lockfile, lockfile)
    attestation = folder / "reference.attestation.json"
    proc = start("attest", str(lockfile), "--prefix", str(installed.prefix),
                 "--workload-python", sys.executable, "--only", SUBSET, "--device", "cpu",
                 "--save-outputs", str(folder / "outputs"), "--out", str(attestation),
                 cwd=root, env=environ(OMP_NUM_THREADS="2"))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return Paper(folder=folder, prefix=installed.prefix, lockfile=lockfile,
                 attestation=attestation, outputs=folder / "outputs")


@pytest.fixture(scope="session")
def paper(tmp_path_factory: pytest.TempPathFactory, pristine: Installed) -> Paper:
    """The authors' side: a lock, an environment and its attestation (with saved outputs)."""
    return _once(tmp_path_factory, "paper",
                 lambda: make_paper(tmp_path_factory.mktemp("paper"), pristine))


def run_all(root: Path, paper: Paper) -> dict[str, Run]:
    tampered = root / "tampered" / "env"
    shutil.copytree(paper.prefix, tampered, symlinks=True)
    (tampered / TAMPERED).write_text("data changed after the paper\n")
    forged = root / "forged.attestation.json"
    doc = json.loads(paper.attestation.read_text())
    doc["predicate"]["workloads"]["sum_fp32"]["sha256"] = "0" * 64
    forged.write_text(json.dumps(doc))
    again = root / "elsewhere"
    again.mkdir()

    common = [str(paper.lockfile), "--workload-python", sys.executable]
    audit = ["audit", *common, "--attestation", str(paper.attestation)]
    here = ["--prefix", str(paper.prefix)]
    outputs = ["--outputs", str(paper.outputs)]
    jobs: dict[str, tuple[list[str], Path, str, str]] = {  # args, cwd, OMP_NUM_THREADS, out
        "identical": ([*audit, *here, *outputs], root, "2", "out"),
        "identical-again": ([*audit, *here, *outputs], again, "2", "out"),
        "threads": ([*audit, *here, *outputs], root, "1", "threads"),
        "tampered-file": ([*audit, "--prefix", str(tampered), "--no-workloads"], root, "2",
                          "tampered-file"),
        "tampered-digest": (["audit", *common, "--attestation", str(forged), *here], root, "2",
                            "tampered-digest"),
        "installed": (["audit", str(paper.folder), "--target", "installed-env",
                       "--no-workloads", "--cache-dir", str(root / "cache"), "--json",
                       "--find-links", _archives_folder(paper.lockfile)],
                      root, "2", "installed"),
        "attest-drift": (["attest", *common, "--prefix", str(tampered), "--only", "sum_fp32",
                          "--device", "cpu"], root, "2", "drift.json"),
    }
    procs = {name: start(*args, "--out", out, cwd=cwd, env=environ(OMP_NUM_THREADS=omp))
             for name, (args, cwd, omp, out) in jobs.items()}
    runs = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        _, cwd, _, out = jobs[name]
        runs[name] = Run(rc=proc.returncode, stdout=stdout, stderr=stderr, out=cwd / out)
    return runs


@pytest.fixture(scope="session")
def audits(tmp_path_factory: pytest.TempPathFactory, paper: Paper) -> dict[str, Run]:
    """Every audit the tests read, by name (see the module docstring)."""
    return _once(tmp_path_factory, "audits",
                 lambda: run_all(tmp_path_factory.mktemp("audits"), paper))
