"""Sessions: thin wrappers that install samebits and call its CLI.

    nox -s lock [-- ENV ...]        solve environments/ into lockfiles/ (+ coverage tables)
    nox -s coverage [-- ENV ...]    lockfiles/<env>.coverage.json/.md from the locks' wheels
    nox -s tests [-- PYTEST ARGS]   the tests but slow and heavy ones, in parallel, with line
                                    coverage, then the cold-cache pass (what CI runs); with
                                    PYTEST ARGS, exactly those (-m "" for every test)
    nox -s wheel [-- PYTEST ARGS]   the built wheel installed in a fresh venv, a subset of the
                                    tests run against it (what CI runs too)
    nox -s render [-- ENV ...]      lockfiles -> containers/<env>/ (conda, Containerfile, Nix)
    nox -s verify-gpu [-- ARGS]     facts + workloads + attestation for this machine
    nox -s bench [-- lock|verify-env|verify-gpu|oci|bundle|install|node|fleet|coverage]
    nox -s audit -- PAPER/ [ARGS]   install a paper's lock, audit it (examples/paper: quickstart)
    nox -s fuzz                     >= 10,000 generated inputs per reader
    nox -s papers [-- NAME ...]     the real papers of tests/papers from their authors' files
                                    to audit verdicts (GBs of CUDA torch each; a table)
    nox -s lint                     ruff, and mypy (strict on the core)
    nox -s docs                     the docs site (docs/, mkdocs.yml) built strict into
                                    build/docs, the CLI reference generated from the parser
"""

from __future__ import annotations

import time

import nox

nox.options.reuse_existing_virtualenvs = True
# uv makes each session's venv and installs into it when nox finds it (`pip install nox uv`;
# about 10x pip here: 9 s against 110 s for torch and the test extra), else virtualenv and pip.
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"]

# The CPU build of torch that the tests and the CPU workloads run on. On a GPU machine install
# the lock's own torch instead (`samebits install`), or pass --torch to verify-gpu.
TORCH = "torch==2.13.0"
# PyTorch's index of CPU-only wheels (~200 MB); PyPI's Linux torch brings ~2.6 GB of CUDA.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PYPI = "https://pypi.org/simple"


def _reachable(url: str, timeout: float = 5.0) -> str | None:
    """None when ``url`` answers within ``timeout`` seconds, else why not (one short line)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return None
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:  # URLError, timeouts, refused connections
        return str(getattr(exc, "reason", exc)) or type(exc).__name__


def _pip_find_links() -> list[str]:
    """The find-links of pip's configuration (PIP_FIND_LINKS and pip.conf, as `pip config
    list` shows them), for a uv-made session: uv reads none of pip's configuration."""
    import shlex
    import subprocess
    import sys

    try:
        shown = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                               capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found: list[str] = []
    for line in shown.splitlines():  # global.find-links='/opt/wheels /more'
        key, _, quoted = line.partition("=")
        if key.endswith(".find-links") and quoted:
            found += [link for link in shlex.split(quoted)[0].split() if link not in found]
    return found


def install_cpu_torch(session: nox.Session) -> None:
    """Install TORCH as a CPU build from PyTorch's CPU index when it answers (PyPI still
    serves every other package), else from PyPI or pip's own configuration, saying which."""
    uv = session.venv_backend == "uv"
    why = _reachable(f"{TORCH_CPU_INDEX}/torch/")
    if why is None:
        session.log(f"torch: the CPU build from {TORCH_CPU_INDEX}")
        if uv:  # uv asks an extra index first and takes a package from the first that has it
            session.install(TORCH, "--extra-index-url", TORCH_CPU_INDEX)
        else:
            session.install(TORCH, "--index-url", TORCH_CPU_INDEX, "--extra-index-url", PYPI)
        return
    links = _pip_find_links() if uv else []
    session.log(f"torch: {TORCH_CPU_INDEX} is not reachable ({why}); installing {TORCH} "
                "from PyPI and pip's configuration instead"
                + (f" (find-links {' '.join(links)})" if links else "")
                + " (on Linux x86_64 PyPI's wheel is the CUDA build, about 2.6 GB)")
    session.install(TORCH, *(arg for link in links for arg in ("--find-links", link)))


@nox.session
def lock(session: nox.Session) -> None:
    """Solve every spec (or the ones named after --) into lockfiles/; then the kernel
    coverage tables of the locks whose sha256 changed (a fresh table is left alone, so a
    fresh clone downloads no archive when no lock changed)."""
    session.install("-e", ".")
    session.run("samebits", "lock", *session.posargs)
    # the kernel coverage tables are refreshed with the locks (archives read once, cached)
    names = [a for a in session.posargs if not a.startswith("-")]
    session.run("samebits", "check", *(names or ["--all"]), "--write")


@nox.session
def coverage(session: nox.Session) -> None:
    """Kernel coverage tables beside the locks: which GPUs each lock runs on, read from the
    fatbins of its wheels (downloaded into the samebits cache, hash-checked)."""
    session.install("-e", ".")
    session.run("samebits", "check", *(session.posargs or ["--all"]), "--write")


@nox.session
def render(session: nox.Session) -> None:
    """Render lockfiles into containers/<env>/ (conda files, Containerfile, Nix); `-- ENV` for
    some."""
    session.install("-e", ".")
    session.run("samebits", "render", "conda", *session.posargs)
    session.run("samebits", "render", "containerfile", *session.posargs)
    session.run("samebits", "render", "nix", *session.posargs)


# What `nox -s tests` measures, and the figures it prints after the per-file table.
COVERAGE_DATA = "build/coverage/.coverage"  # pyproject.toml [tool.coverage.run] data_file
COVERAGE_PARTS = (("core", "samebits/*"), ("verify", "verify/*"),
                  ("composition", "samebits_app/*"))
CORE_FLOOR = 90  # % of the core's lines (issue 25); below it the session fails


@nox.session
def tests(session: nox.Session) -> None:
    """Run the tests: by default every test but the `slow` end-to-end ones (whole audits,
    torchrun fleets, installs of torch-sized environments) and the `heavy` ones, which is
    what CI runs within its time; network tests (real PyPI) are included unless -m 'not
    network'. The default run uses every core (pytest-xdist, one test file per worker at a
    time), measures line coverage of samebits, verify and samebits_app (subprocesses too),
    prints the table and the three figures, fails below CORE_FLOOR % for the core; then runs
    the tests that ask for a shared cache once more, each with empty caches of its own
    (--cold-cache), uncounted (the unit and integration ones: the e2e workflows' whole
    installs would double CI's time); then the tests that run a paper's commands with bwrap
    hidden from PATH (--hide-programs bwrap). Arguments go to pytest instead (-m "" runs the
    slow tests too).
    torch is PyTorch's CPU build where its index is reachable, else PyPI's (said which)."""
    install_cpu_torch(session)
    session.install("-e", ".[test]")
    if session.posargs:
        session.run("pytest", *session.posargs)
        return
    parallel = ["-n", "auto", "--dist", "loadfile"]
    session.run("pytest", "-m", "not slow", *parallel, "--durations=30", "--cov=samebits",
                "--cov=verify", "--cov=samebits_app", "--cov-report=term")
    for name, pattern in COVERAGE_PARTS:
        total = session.run("coverage", "report", f"--data-file={COVERAGE_DATA}",
                            f"--include={pattern}", "--format=total", silent=True)
        session.log(f"line coverage, {name} ({pattern}): {str(total).strip()} %")
    session.run("coverage", "report", f"--data-file={COVERAGE_DATA}", "--include=samebits/*",
                f"--fail-under={CORE_FLOOR}", "--format=total", silent=True)
    session.log("cold caches: the tests that share a cache, again with empty ones")
    session.run("pytest", "-m", "shared_cache and not slow and not e2e", "--cold-cache",
                *parallel,
                "-p", "no:cacheprovider")
    session.log("without bubblewrap: the tests that run a paper's commands, bwrap hidden from "
                "PATH (a machine without the apt line: the commands run unsandboxed, said so)")
    session.run("pytest", "-m", "not slow", "--hide-programs", "bwrap", *SANDBOX_TESTS,
                *parallel, "-p", "no:cacheprovider")


# The tests that run a paper's commands in the sandbox (samebits_app.paper.sandbox): `nox -s
# tests` runs them once more with bwrap hidden from PATH, as on a machine without bubblewrap.
SANDBOX_TESTS = ("tests/integration/test_paper_runner.py", "tests/e2e/test_audit_story.py",
                 "tests/e2e/test_hostile_paper.py")


# The tests `nox -s wheel` runs against the installed wheel: those whose outcome depends on the
# wheel rather than on the code, which is the checkout's bytes (`nox -s tests` runs every test
# on those already):
#   test_package.py            every module and package data file shipped, byte for byte;
#                              every module imports in a venv holding only what the wheel
#                              declares (plus the test extra and torch)
#   test_gpus.py, test_node.py the package data read as the code reads it (importlib.resources,
#                              a file beside verify.node)
#   test_cli_vocabulary.py     every command's parser, from the installed packages
#   test_childenv.py           the worker shim: the installed packages' folders handed to a
#                              child process of another interpreter
#   test_lock_parse_cache.py, test_codescan_cache.py  caches keyed on the installed modules'
#                              own bytes (their __file__)
#   test_paper_runner.py::test_settings_hook  the paper commands' sitecustomize hook, found
#                              beside samebits_app.paper
#   test_lock_reading.py, test_spec.py, two of test_lock.py  the CLI (`python -m samebits`:
#                              every command that reads a lock, the curated specs, a lock of
#                              each kind, conda and PyPI, through the installed solvers) in
#                              subprocesses whose working folder is not the checkout
# and then the installed console script itself (CONSOLE_SCRIPT_CHECK). The console script of
# a wheel built on each supported Python is tests/e2e/test_entry_point.py, in `nox -s tests`.
WHEEL_TESTS = (
    "tests/unit/test_package.py", "tests/unit/test_gpus.py", "tests/unit/test_node.py",
    "tests/unit/test_cli_vocabulary.py", "tests/integration/test_childenv.py",
    "tests/integration/test_lock_parse_cache.py", "tests/integration/test_codescan_cache.py",
    "tests/integration/test_paper_runner.py::test_settings_hook",
    "tests/integration/test_lock_reading.py", "tests/integration/test_spec.py",
    "tests/integration/test_lock.py::test_conda_lock_reads_and_renders",
    "tests/integration/test_lock.py::test_pypi_part_picks_the_wheel_for_each_platform",
)
# The installed `samebits` script verifies an empty conda prefix against a committed lock
# (the hashing pool starts) and reports the drift: exit 1, torch missing, no traceback, within
# a hard limit (the pool once respawned its workers forever under the script's __main__).
CONSOLE_SCRIPT_CHECK = r"""
import json, shutil, subprocess, sys, tempfile
from pathlib import Path
script = shutil.which("samebits")
assert script and Path(script).parent == Path(sys.prefix) / "bin", script
with tempfile.TemporaryDirectory() as tmp:
    subject = Path(tmp) / "subject"
    (subject / "conda-meta").mkdir(parents=True)
    (subject / "conda-meta" / "history").write_text("")
    res = subprocess.run([script, "verify", "env", sys.argv[1], "--prefix", str(subject),
                          "--json"], capture_output=True, text=True, timeout=240, cwd=tmp)
assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-3000:]
missing = {f["package"] for f in json.loads(res.stdout)["findings"]
           if f["kind"] == "package-missing"}
assert "torch" in missing, res.stdout[:2000]
print(script, "reads", sys.argv[1], "and reports the drift")
"""


@nox.session
def wheel(session: nox.Session) -> None:
    """Build the wheel (pip wheel . --no-deps), install it into this session's fresh venv,
    and run WHEEL_TESTS against it from a folder outside the checkout: rootdir and tests are
    the checkout's, the packages the wheel's (SAMEBITS_TEST_INSTALLED=1 makes the session
    fail if samebits, verify or samebits_app would import from the checkout); then the
    installed console script (CONSOLE_SCRIPT_CHECK)."""
    from pathlib import Path

    here = Path.cwd()
    tmp = Path(session.create_tmp())
    dist = tmp / "dist"
    for old in dist.glob("*.whl"):
        old.unlink()
    session.install("pip")
    session.run("python", "-m", "pip", "wheel", ".", "--no-deps", "--quiet", "-w", str(dist))
    (built,) = dist.glob("samebits-*.whl")
    install_cpu_torch(session)
    session.install("--force-reinstall", "--no-deps", str(built))
    session.install(f"{built}[test]")
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    session.chdir(work)
    session.run("python", "-I", "-c", "import samebits, sys; assert samebits.__file__"
                ".startswith(sys.prefix), samebits.__file__; print('samebits from', "
                "samebits.__file__)")
    session.run("pytest", "--rootdir", str(here), "-c", str(here / "pyproject.toml"),
                "-o", "pythonpath=", "--import-mode=importlib", "-p", "no:cacheprovider",
                "-m", "not slow", "-n", "auto", "--dist", "loadfile",
                *(str(here / t) for t in WHEEL_TESTS), *session.posargs,
                env={"SAMEBITS_TEST_INSTALLED": "1", "PYTHONPATH": ""})
    session.run("python", "-I", "-c", CONSOLE_SCRIPT_CHECK,
                str(here / "lockfiles" / "cpu.conda-lock.yml"))


@nox.session(name="verify-gpu")
def verify_gpu(session: nox.Session) -> None:
    """Probe this machine, run the deterministic workloads, write an attestation."""
    session.install("-e", ".[gpu]", TORCH)
    session.run("samebits", "verify", "gpu", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks side by side with their baselines; name one to run it alone."""
    install_cpu_torch(session)
    session.install("-e", ".[test]")
    # the timed commands start as a user's do, from compiled bytecode: pip compiles what it
    # installs, uv and an editable checkout do not, and where PYTHONDONTWRITEBYTECODE is set
    # (some CI machines, this project's among them) each timed process would compile every
    # module it imports again (about 0.3 s a start); untimed, a no-op once done
    purelib = session.run_install("python", "-c",
                                  "import sysconfig; print(sysconfig.get_path('purelib'))",
                                  silent=True)
    if purelib is not None:  # None under --no-install (-R): compiled when it was installed
        t0 = time.monotonic()
        session.run_install("python", "-m", "compileall", "-q", "-j", "0", purelib.strip(),
                            "samebits", "samebits_app", "verify", "tests", silent=True,
                            # 1: a file written for another Python (torch has some) does
                            # not compile, which pip's own compile step lets be too
                            success_codes=[0, 1])
        session.log(f"bytecode of the bench's Python compiled (untimed): "
                    f"{time.monotonic() - t0:.1f} s")
    session.run("python", "-m", "tests.bench", *session.posargs)


@nox.session
def audit(session: nox.Session) -> None:
    """Audit a paper folder (samebits-paper.toml, or conda-lock.yml + reference.attestation.json
    + outputs/): install its lock into build/audit/env, rerun the suite and the paper's
    commands, write the verdict and reports to build/audit. The reviewer's quickstart:
    `nox -s audit -- examples/paper` (docs/tutorials/reviewer.md)."""
    paper, *extra = session.posargs or ["paper"]
    session.install("-e", ".")
    session.run("samebits", "audit", paper, "--target", "build/audit/env", "--replace",
                "--out", "build/audit", *extra)


@nox.session
def papers(session: nox.Session) -> None:
    """Each paper of tests/papers/corpus.toml, from its authors' untouched requirements.txt or
    pyproject.toml through init, lock, install, verify env, attest and two audits (plain and
    with OMP_NUM_THREADS=1), each in a process of its own, environments removed after each;
    prints the table (also build/papers/RESULTS.md). Arguments: paper names, --keep, --out DIR,
    --cold (each paper from empty caches of its own, as on a fresh machine), --paper-init,
    --jobs N, --force, --slurm (python -m tests.papers.corpus --help)."""
    session.install(".")
    session.run("python", "-m", "tests.papers.corpus", *session.posargs)


@nox.session
def sweep(session: nox.Session) -> None:
    """A differential sweep against pip (not in CI: hours, GBs): each real paper's dependency
    file of tests/sweep/files.toml through samebits init, lock and install, and through pip
    into a venv of the same interpreter (constrained to the lock's versions); the two trees
    compared file by file and pip's environment verified against samebits' lock
    (tests/sweep/sweep.py; the table in build/sweep/RESULTS.md). Arguments: file names,
    --keep, --out DIR."""
    session.install(".")
    session.run("python", "-m", "tests.sweep.sweep", *session.posargs)


@nox.session
def fuzz(session: nox.Session) -> None:
    """The property/fuzz tests with >= 10,000 generated cases per reader (CI runs 150)."""
    install_cpu_torch(session)
    session.install("-e", ".[test]")
    session.run("pytest", "tests/integration/test_fuzz.py", *session.posargs,
                env={"SAMEBITS_FUZZ_PROFILE": "fuzz"})


@nox.session
def lint(session: nox.Session) -> None:
    """ruff; then mypy, strict on the core (samebits) and default checks on
    verify and samebits_app (pyproject.toml [tool.mypy]), against the installed packages."""
    session.install("ruff")
    session.run("ruff", "check", "samebits", "samebits_app", "verify", "tests", "noxfile.py",
                "docs/gen_cli.py")
    install_cpu_torch(session)  # verify's workloads are typed against torch
    session.install("-e", ".[gpu]", "mypy==2.4.1", "types-PyYAML")
    session.run("mypy")


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site: docs/ built by MkDocs Material with --strict (a broken link,
    anchor or snippet, or a page left out of the nav, fails it) into build/docs. The CLI
    reference, docs/reference/cli/, is written from samebits_app.cli.build_parser() by
    docs/gen_cli.py, a hook of mkdocs.yml, before every build; `mkdocs serve` for a live
    preview. Then docs/check_layout.py: no code block of the built pages is cut off at a
    1280 px window (headless Chromium)."""
    session.install("-e", ".", "mkdocs-material==9.8.2")
    session.run("mkdocs", "build", "--strict", "--site-dir", "build/docs",
                env={"NO_MKDOCS_2_WARNING": "1"})  # Material's notice about its successor
    # every code block fits the content column at 1280 px (Chromium; skipped, said, without)
    session.run("python", "docs/check_layout.py", "build/docs")

VERIFIER_EXCLUDE_NEWER = "2026-12-01T00:00:00Z"
VERIFIER_LOCK = r"""
import subprocess, sys
from pathlib import Path
from samebits.render.containerfile import VERIFIER_REQUIREMENTS, verifier_inputs
when = sys.argv[1]
body = subprocess.run(
    [sys.executable, "-m", "uv", "pip", "compile", "pyproject.toml", "--universal",
     "--generate-hashes", "--only-binary", ":all:", "--no-header", "--quiet",
     "--python-version", "3.10", "--exclude-newer", when],
    check=True, capture_output=True, text=True).stdout
digest = verifier_inputs(Path("pyproject.toml").read_text(), when)
head = ("# samebits' own dependencies, for the verifier a Containerfile runs; installed with\n"
        "# pip install --no-deps --require-hashes --only-binary=:all: -r THIS_FILE\n"
        f"# resolved by uv for Python >= 3.10 on every platform, as of {when}\n"
        f"# inputs sha256: {digest}\n")
Path(VERIFIER_REQUIREMENTS).write_text(head + body)
"""


@nox.session(name="verifier-lock")
def verifier_lock(session: nox.Session) -> None:
    """containers/verifier.requirements.txt: samebits' own dependencies resolved by uv for
    every Python and platform (--universal), wheels only, every file hashed, as of
    VERIFIER_EXCLUDE_NEWER; the Containerfiles install the verifier from it by hash. Run it
    when pyproject.toml's dependencies change (tests/integration/test_render_containerfile.py
    says so)."""
    session.install("-e", ".")
    session.run("python", "-c", VERIFIER_LOCK, VERIFIER_EXCLUDE_NEWER)
