"""The worked example (examples/paper: train.py and its manifest) attested and audited as
authors and reviewers do, in fresh processes, once per session.

The environment is ``tests.verify_fixtures``' pristine prefix and its lock; it has no torch,
so the suite and the paper's command run on this interpreter (``--workload-python sys.executable``):
its folder is first on the command's PATH, so ``python train.py`` is this interpreter, with
torch and numpy. ``tests/test_paper_example.py`` audits the real example lock instead.

``paper``: ``samebits attest PAPER`` (``OMP_NUM_THREADS=2``, the suite ``SUBSET``) of a copy
of examples/paper whose conda-lock.yml is the pristine lock.

``paper_audits``, started at once:

    same         the same machine and settings: bit-identical, exit 0
    same-again   the same command from another folder: byte-identical reports
    threads      OMP_NUM_THREADS=1: within tolerance or explained, with numbers
    strict       the same with --require bit-identical: exit 1
    seed         a copy of the paper whose manifest sets SEED = "1": not reproduced, exit 1,
                 one reason (the changed variable) with the diverged outputs under it
    code         a copy whose train.py has one character changed (lr=0.01 -> 0.02): not
                 reproduced, the first reason names train.py
    input        a copy whose data/stripes.json says another noise level: not reproduced,
                 the first reason names the input
    no-manifest  a LOCK and --attestation only: the commands are not rerun (a note)
    trusted      a copy of the paper whose attestation the authors signed (``dsse.signed_bytes``,
                 what ``attest --sign`` writes; keys from ``samebits keygen`` in ``keys/``),
                 audited with ``--trust keys/authors.pub --sign keys/reviewer``
    broken       ``attest`` of a copy whose command fails: refused, exit 1, nothing written,
                 before the suite ran
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.audit_fixtures import Run, environ, start
from tests.verify_fixtures import (  # noqa: F401  (fixtures)
    Installed,
    _once,
    elves,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "paper"
SUBSET = "gemm_fp32,sum_fp32,randn"


@dataclass(frozen=True)
class PaperFolder:
    folder: Path
    prefix: Path
    attestation: Path
    stdout: str


def copy_example(dest: Path, lockfile: Path) -> Path:
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(
        "outputs", "reference.attestation.json", "make_lock.py", "__pycache__", "out"))
    shutil.copyfile(lockfile, dest / "conda-lock.yml")
    return dest


def make_paper(root: Path, installed: Installed) -> PaperFolder:
    folder = copy_example(root / "paper", installed.lockfile)
    proc = start("attest", str(folder), "--prefix", str(installed.prefix), "--workload-python",
                 sys.executable, "--only", SUBSET, "--device", "cpu", cwd=root,
                 env=environ(OMP_NUM_THREADS="2"))
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    return PaperFolder(folder=folder, prefix=installed.prefix,
                       attestation=folder / "reference.attestation.json", stdout=out)


@pytest.fixture(scope="session")
def paper(tmp_path_factory: pytest.TempPathFactory, pristine: Installed) -> PaperFolder:
    """The authors' side: the example attested, its outputs saved in the folder."""
    return _once(tmp_path_factory, "paper-example",
                 lambda: make_paper(tmp_path_factory.mktemp("paper-example"), pristine))


def variant(paper: PaperFolder, dest: Path, old: str, new: str,
            file: str = "samebits-paper.toml") -> Path:
    """A copy of the attested paper folder with one edit to one file (its manifest)."""
    shutil.copytree(paper.folder, dest)
    path = dest / file
    text = path.read_text()
    assert text.count(old) == 1, (file, old)
    path.write_text(text.replace(old, new))
    return dest


def sign_copy(paper: PaperFolder, dest: Path, keys: Path) -> Path:
    """A copy of the attested paper folder whose attestation is the authors' DSSE envelope."""
    from samebits.dsse import load_signing_key, signed_bytes

    keys.mkdir()
    for name in ("authors", "reviewer"):
        subprocess.run([sys.executable, "-m", "samebits", "keygen", "--out", str(keys / name)],
                       check=True, capture_output=True, env=environ())
    shutil.copytree(paper.folder, dest)
    att = dest / "reference.attestation.json"
    att.write_bytes(signed_bytes(att.read_bytes(), load_signing_key(keys / "authors")))
    return dest


def run_all(root: Path, paper: PaperFolder) -> dict[str, Run]:
    seed = variant(paper, root / "seed-paper", 'SEED = "0"', 'SEED = "1"')
    code = variant(paper, root / "code-paper", "lr=0.01", "lr=0.02", "train.py")
    data = variant(paper, root / "input-paper", '"noise": 1.0', '"noise": 1.5',
                   "data/stripes.json")
    signed = sign_copy(paper, root / "signed-paper", root / "keys")
    broken = variant(paper, root / "broken-paper", "--steps 200", "--steps oops")
    (broken / "reference.attestation.json").unlink()
    again = root / "elsewhere"
    again.mkdir()
    here = ["--prefix", str(paper.prefix), "--workload-python", sys.executable]
    audit = ["audit", str(paper.folder), *here]
    jobs: dict[str, tuple[list[str], Path, str, str]] = {  # args, cwd, OMP_NUM_THREADS, out
        "same": (audit, root, "2", "same"),
        "same-again": (audit, again, "2", "same"),
        "threads": (audit, root, "1", "threads"),
        "strict": ([*audit, "--require", "bit-identical"], root, "1", "strict"),
        "seed": (["audit", str(seed), *here], root, "2", "seed"),
        "code": (["audit", str(code), *here], root, "2", "code"),
        "input": (["audit", str(data), *here], root, "2", "input"),
        "no-manifest": (["audit", str(paper.folder / "conda-lock.yml"),
                         "--attestation", str(paper.attestation), *here], root, "2",
                        "no-manifest"),
        "trusted": (["audit", str(signed), *here, "--trust", str(root / "keys/authors.pub"),
                     "--sign", str(root / "keys/reviewer")], root, "2", "trusted"),
        "broken": (["attest", str(broken), *here, "--only", "sum_fp32", "--device", "cpu"],
                   root, "2", str(broken / "reference.attestation.json")),
    }
    procs = {name: start(*args, "--out", out, cwd=cwd, env=environ(OMP_NUM_THREADS=omp))
             for name, (args, cwd, omp, out) in jobs.items()}
    runs = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=1200)
        _, cwd, _, out = jobs[name]
        runs[name] = Run(rc=proc.returncode, stdout=stdout, stderr=stderr, out=cwd / out)
    return runs


@pytest.fixture(scope="session")
def paper_audits(tmp_path_factory: pytest.TempPathFactory,
                 paper: PaperFolder) -> dict[str, Run]:
    """Every audit of the example the tests read, by name (see the module docstring)."""
    return _once(tmp_path_factory, "paper-audits",
                 lambda: run_all(tmp_path_factory.mktemp("paper-audits"), paper))
