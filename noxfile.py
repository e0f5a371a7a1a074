"""Sessions: thin wrappers that install samebits and call its CLI.

    nox -s lock [-- ENV ...]        solve environments/ into lockfiles/
    nox -s tests [-- PYTEST ARGS]   the test suite (what CI runs)
    nox -s render [-- ENV ...]      lockfiles -> containers/<env>/ (conda, Containerfile, Nix)
    nox -s verify-gpu [-- ARGS]     facts + workloads + attestation for this machine
    nox -s bench [-- lock|verify-env|verify-gpu|oci|bundle|install]
    nox -s audit -- PAPER/ [ARGS]   install a paper's lock, verify it, compare with its attestation
    nox -s fuzz                     >= 10,000 generated inputs per reader
    nox -s lint                     ruff
"""

from __future__ import annotations

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]

# The CPU build of torch that the tests and the CPU workloads run on. On a GPU machine install
# the lock's own torch instead (`samebits install`), or pass --torch to verify-gpu.
TORCH = "torch==2.13.0"


@nox.session
def lock(session: nox.Session) -> None:
    """Solve every spec (or the ones named after --) into lockfiles/."""
    session.install("-e", ".")
    session.run("samebits", "lock", *session.posargs)


@nox.session
def render(session: nox.Session) -> None:
    """Render lockfiles into containers/<env>/ (conda files, Containerfile, Nix); `-- ENV` for
    some."""
    session.install("-e", ".")
    session.run("samebits", "render", "conda", *session.posargs)
    session.run("samebits", "render", "containerfile", *session.posargs)
    session.run("samebits", "render", "nix", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite; network tests (real PyPI) are included unless -m 'not network'."""
    session.install("-e", ".[test]", TORCH)
    session.run("pytest", *session.posargs)


@nox.session(name="verify-gpu")
def verify_gpu(session: nox.Session) -> None:
    """Probe this machine, run the deterministic workloads, write an attestation."""
    session.install("-e", ".[gpu]", TORCH)
    session.run("samebits", "verify", "gpu", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks side by side with their baselines; name one to run it alone."""
    session.install("-e", ".[test]", TORCH)
    session.run("python", "-m", "tests.bench", *session.posargs)


@nox.session
def audit(session: nox.Session) -> None:
    """Audit a paper folder (conda-lock.yml, reference.attestation.json, outputs/): install its
    lock into build/audit/env and write the verdict and reports to build/audit."""
    paper, *extra = session.posargs or ["paper"]
    session.install("-e", ".")
    session.run("samebits", "audit", paper, "--install", "build/audit/env", "--replace",
                "--out", "build/audit", *extra)


@nox.session
def fuzz(session: nox.Session) -> None:
    """The property/fuzz tests with >= 10,000 generated cases per reader (CI runs 150)."""
    session.install("-e", ".[test]", TORCH)
    session.run("pytest", "tests/test_fuzz.py", *session.posargs,
                env={"SAMEBITS_FUZZ_PROFILE": "fuzz"})


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "samebits", "verify", "tests", "noxfile.py")
