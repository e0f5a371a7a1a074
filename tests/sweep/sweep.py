"""``nox -s sweep``: real papers' dependency files, installed by samebits and by pip, compared.

For each file of ``tests/sweep/files.toml`` (a published ML paper's ``requirements.txt`` or
``pyproject.toml``, copied untouched into ``tests/sweep/files/NAME/`` with its repository,
commit and licence named), in ``build/sweep/NAME``, with the installed ``samebits``:

    init     samebits init NAME --from FILE --generation cpu --exclude-newer <commit date>
             (where init refuses every Python it chooses from and its hint names one, again
             with that --python-version, as a user would: said in the table)
    lock     samebits lock NAME                       (real uv against PyPI)
    install  samebits install LOCK --target ours --python <pyenv's X.Y> --platform linux-64
    pip      (beside install: the two run at once, so their seconds overlap)
             <that X.Y> -m venv --without-pip theirs; pip (PIP, one pinned release, run from
             the sweep's own venv) --python theirs/bin/python install -r FILE -c <the lock's
             linux-64 PyPI versions, name==version>, no pip configuration (PIP_CONFIG_FILE=
             /dev/null: no find-links, no extra index, no cap): pip resolves the authors' file,
             picks its files and orders the installation itself. The one thing pip is told is
             the spec's glibc floor (2.28 by default), through PEP 600's ``_manylinux`` module
             on its PYTHONPATH: a lock is made for a floor, not for this machine's glibc, and
             without it pip takes a manylinux_2_31 wheel the lock rightly did not; and the
             spec's exclude-newer, as ``--uploaded-prior-to`` (PyPI's upload times)
    compare  the two trees file by file (``tests.sweep.compare``: its written rule)
    verify   samebits verify env --prefix theirs LOCK --platform linux-64: pip's environment
             against samebits' lock, which must be identical

A file pip cannot install from PyPI alone (an extra index such as download.pytorch.org, a git
URL, a local version like ``+cu117``) is listed as such ("not PyPI alone"), never dropped. A
file samebits cannot lock is given to pip as well, on the spec's Python, glibc floor and date
without a lock to follow: where pip fails too (an sdist that cannot build there) the row says
so ("pip fails too", with pip's first error), where pip installs it samebits' failure is the
divergence. Where samebits' install writes the environment and exits 1 (it finds a library
that does not resolve, and importing the package does not clear it), pip is still run: when
pip's tree is the same and verify env of pip's finds the same, the row says "samebits right"
(pip wrote the same broken environment without a word), else the difference is the divergence.
The
pip side reads the authors' file with its ``-e``/local-path lines left out (they name the
authors' own code, which is not here), as ``samebits init`` leaves them out; a pyproject's
``[project] dependencies`` are given to pip as a requirements file. Each file starts from
empty caches of its own (samebits' XDG_CACHE_HOME and pip's PIP_CACHE_DIR under its folder), as
on a fresh machine: nothing one file resolved or built helps another, and the pair of
environments and the caches are removed after its comparison. Only the downloads are shared, as
the issue asks ("reuse the archive cache"): samebits' ``archives/`` (each file named by its
sha256 and proved against the lock again on every use) and pip's ``http-v2/`` are links to
``OUT/.shared/``, emptied when the disk has less than ``FREE_GB`` left; build records, uv's
cache, wheel file lists and pip's built wheels stay the file's own. Each row records the
samebits commit it ran under; ``--record`` also writes it to ``tests/sweep/rows/`` (committed,
so a later run goes on with ``--resume``). The table goes to ``build/sweep/RESULTS.md``; the
committed ``tests/sweep/RESULTS.md`` is ``--report``'s table of the recorded rows, with the
divergences found and what became of each.

    python -m tests.sweep.sweep [NAME ...] [--out build/sweep] [--keep] [--resume] [--record]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.sweep.compare import EXPLAINED, Divergence, canonical, compare

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
PIP = "pip==26.3"  # the pip every file is installed with (2026-11-02), recorded in the table
PIP_39 = "pip==26.0.1"  # for a Python 3.9 environment: the newest pip that runs there
STEPS = ("init", "lock", "install", "pip", "compare", "verify")
LIMITS = {"init": 600, "lock": 1200, "install": 2400, "ours": 1200, "pip": 2400,
          "compare": 600, "verify": 1200}
FREE_GB = 25
# what one file's pair may take at its peak: two environments of a CUDA build of torch, the
# archives and pip's unpacking (Stanford Alpaca's pip ran out of space with two sweeps at once)
ROW_GB = 20
RECORD = False  # --record
ROWS = HERE / "rows"
NOT_PYPI = re.compile(r"download\.pytorch\.org|--extra-index-url|--index-url|-i |"
                      r"git\+|\+cu\d+|\+cpu\b|@ (https?|file)://", re.I)


@dataclass
class Row:
    name: str
    repo: str
    kind: str
    field: str
    year: str
    python: str = "?"
    torch: str = "-"
    steps: dict[str, tuple[int, float]] = field(default_factory=dict)
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    divergences: list[str] = field(default_factory=list)
    commit: str = ""

    @property
    def outcome(self) -> str:
        if self.reason.startswith("not PyPI alone"):
            return "not PyPI alone"
        if self.reason.startswith("pip fails too"):
            return "pip fails too"
        if self.reason.startswith("samebits right"):
            return "samebits right"
        return "ok" if all(c == 0 for c, _ in self.steps.values()) and \
            len(self.steps) == len(STEPS) else "diverges"


def samebits() -> list[str]:
    script = Path(sys.executable).with_name("samebits")
    return [str(script)] if script.exists() else [sys.executable, "-m", "samebits"]


def run(row: Row, step: str, argv: list[str], *, log: Path, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> tuple[int, str]:
    """Run one step, its output appended to ``log``; (exit code, its output)."""
    print(f"  {step:8} {' '.join(argv[:6])}{' ...' if len(argv) > 6 else ''}", flush=True)
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=LIMITS[step])
        code, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, text = 124, f"{exc.stdout or ''}{exc.stderr or ''}\n(stopped after {LIMITS[step]} s)"
    took = time.monotonic() - start
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(argv)}\n{text}\n(exit {code} in {took:.0f} s)\n")
    row.steps[step] = (code, took)
    print(f"  {step:8} exit {code} in {took:.0f} s", flush=True)
    return code, text


def pyenv_python(line: str) -> Path | None:
    """pyenv's newest CPython of ``line`` (X.Y), the interpreter both sides install for."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = sorted((p for p in root.glob(f"{line}.*") if re.fullmatch(rf"{re.escape(line)}\.\d+",
                                                                     p.name)),
                   key=lambda p: int(p.name.rsplit(".", 1)[1]))
    return found[-1] / "bin" / f"python{line}" if found else None


def pip_requirements(source: Path, dest: Path) -> Path:
    """What pip is given: the authors' requirements file (and the files it includes) with the
    lines that name their own code left out, or a pyproject's [project] dependencies."""
    if source.name == "pyproject.toml":
        deps = tomllib.loads(source.read_text()).get("project", {}).get("dependencies", [])
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("".join(f"{d}\n" for d in deps))
        return dest
    for path in source.parent.rglob("*"):
        if path.is_file() and path.suffix in (".txt", ".in"):
            kept = [line for line in path.read_text().splitlines()
                    if not re.match(r"\s*(-e\s|--editable\s|\.{1,2}(/|\s|$)|file:)", line)]
            out = dest.parent / path.relative_to(source.parent)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("\n".join(kept) + "\n")
    return dest.parent / source.name


def built_from_sdists(lock: Path) -> set[str]:
    """The canonical names of the linux-64 PyPI packages the lock takes as sdists: each
    installer builds those with its own build environment."""
    from packaging.utils import canonicalize_name

    from samebits.lock.read import load_lock

    return {str(canonicalize_name(p.name)) for p in load_lock(lock).pip("linux-64")
            if p.filename.endswith((".tar.gz", ".zip"))}


def lock_facts(lock: Path) -> tuple[str, list[tuple[str, str]]]:
    """(Python line, [(name, version)] of the linux-64 PyPI part) of a samebits lock."""
    from samebits.lock.read import load_lock

    env = load_lock(lock)
    line = env.lock.custom.get("samebits.python", "?")
    return line, sorted((p.name, p.version) for p in env.pip("linux-64"))


MANYLINUX = """\
# PEP 600: packaging asks this module whether a manylinux_X_Y tag fits (the sweep's pip only)
def manylinux_compatible(tag_major, tag_minor, tag_arch):
    return (tag_major, tag_minor) <= ({major}, {minor})
"""


def glibc_floor(spec: Path) -> str:
    """The spec's glibc floor for linux-64 (the lock's wheels were chosen for it)."""
    doc = tomllib.loads(spec.read_text())
    return str(((doc.get("platforms") or {}).get("linux-64") or {}).get("glibc") or "2.28")


def uploaded_prior_to(spec: Path) -> list[str]:
    """pip's ``--uploaded-prior-to`` at the spec's exclude-newer: pip is told the instant the
    lock was made as of, as it is told the glibc floor. Without it pip took
    nvidia_cufft_cu11 10.9.0.58's manylinux2014 wheel, uploaded in 2024, for a 2023 paper
    whose lock has the manylinux1 wheel of the same release (the one that existed then): a
    difference of dates, not of installers."""
    value = tomllib.loads(spec.read_text()).get("exclude-newer")
    return ["--uploaded-prior-to", str(value)] if value else []


def manylinux_hook(folder: Path, glibc: str) -> Path:
    """A folder holding ``_manylinux.py`` that caps manylinux tags at ``glibc``."""
    major, minor = (int(x) for x in glibc.split(".")[:2])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_manylinux.py").write_text(MANYLINUX.format(major=major, minor=minor))
    return folder


def pip_env() -> dict[str, str]:
    """pip as a user's, with none of this machine's configuration: PyPI only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    if "PIP_CACHE_DIR" in os.environ:
        env["PIP_CACHE_DIR"] = os.environ["PIP_CACHE_DIR"]
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1"}


def tools(out: Path, release: str = PIP) -> Path:
    """The sweep's own venv holding ``release`` of pip (made once, reused): pip 26.1 and
    later run on Python 3.10 and later only, also where they install (``--python``)."""
    venv = out / ("tools" if release == PIP else "tools-" + release.split("==")[1])
    pip = venv / "bin" / "pip"
    if not pip.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(pip), "install", "-q", release], check=True, env=pip_env())
    return pip


@contextlib.contextmanager
def using_shared(shared: Path) -> Iterator[None]:
    """Hold ``shared`` (the downloads every file's caches link to) for one file: a shared
    flock on ``shared``.lock, which a sweep emptying it on a short disk must hold alone.
    Sweeps running at once (``--out`` the same, other files each) empty it only when no other
    is in the middle of a file: one emptied it under another's lock, which then failed to
    read the wheel its sdist's build environment links to (revin-baselines)."""
    shared.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{shared}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        if shutil.disk_usage(shared.parent).free < FREE_GB * 2**30:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(shared, ignore_errors=True)
            except BlockingIOError:
                pass  # another sweep is in a file: kept, emptied by the next alone
        fcntl.flock(fd, fcntl.LOCK_SH)  # from exclusive, or waiting for none to empty it
        yield
    finally:
        os.close(fd)


def share_downloads(shared: Path, cache: Path) -> None:
    """samebits' archives/ and pip's http-v2/ of ``cache`` as links into ``shared``."""
    for sub in ("archives", "http-v2"):
        (shared / sub).mkdir(parents=True, exist_ok=True)
    for link, target in ((cache / "samebits" / "archives", shared / "archives"),
                         (cache / "pip" / "http-v2", shared / "http-v2")):
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)


def samebits_commit() -> str:
    """The commit of the samebits checkout the sweep runs (``+`` when it has changes)."""
    root = HERE.parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=60).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--",
                                "samebits", "samebits_app", "verify"],
                               capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return head + ("+" if dirty else "")


def one(entry: dict, out: Path, pip: Path, *, keep: bool) -> Row:
    with using_shared(out / ".shared"):
        free = shutil.disk_usage(out).free / 2**30
        if free < ROW_GB:  # a row that runs out of space says nothing of either installer
            sys.exit(f"sweep: {free:.0f} GB free under {out}, less than a file's pair of "
                     f"environments may take ({ROW_GB} GB): stopped before {entry['name']}")
        return _one(entry, out, pip, keep=keep)


def _one(entry: dict, out: Path, pip: Path, *, keep: bool) -> Row:
    name = entry["name"]
    row = Row(name=name, repo=entry["repo"], kind=entry["path"].rsplit("/", 1)[-1],
              field=entry["field"], year=str(entry["year"]), commit=samebits_commit())
    work = out / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = work / "log.txt"
    source = HERE / "files" / name / row.kind
    text = source.read_text()
    print(f"{name} ({entry['repo']} @ {entry['commit'][:7]}): {row.kind}", flush=True)
    # a fresh machine for each file: its own empty caches, removed with its environments
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")
    os.environ["PIP_CACHE_DIR"] = str(work / "cache" / "pip")
    share_downloads(out / ".shared", work / "cache")
    project, lock = work / "project", work / "project" / "lockfiles" / f"{name}.conda-lock.yml"
    ours, theirs = work / "ours", work / "theirs"
    init = [*samebits(), "init", name, "--from", str(source), "--root", str(project),
            "--generation", "cpu", "--exclude-newer", entry["date"], *entry.get("init", [])]
    code, said = run(row, "init", init, log=log)
    hint = re.search(r"pass --python-version (3\.\d+)", said)
    if code == 2 and hint:
        row.notes.append(f"init: again with --python-version {hint.group(1)}, as its hint says")
        code, said = run(row, "init", [*init, "--python-version", hint.group(1)], log=log)
    steps = [("lock", [*samebits(), "lock", name, "--root", str(project)])]
    if code == 0:
        code, said = run(row, *steps[0], log=log)
    spec = project / "environments" / f"{name}.toml"
    if code != 0:
        row.reason = _first_error(said)
        if NOT_PYPI.search(text):
            row.reason = f"not PyPI alone: {row.reason}"
        elif spec.is_file():
            _pip_alone(row, spec, source, work, out, pip, log)
        else:  # init chose no Python: pip is given the file on each the sweep can run
            _pip_everywhere(row, entry, source, work, out, pip, log)
        return _done(row, work, keep)
    line, pins = lock_facts(lock)
    row.python = line
    row.torch = next((v for n, v in pins if n == "torch"), "-")
    python = pyenv_python(line)
    if python is None:
        row.reason = f"no pyenv Python {line} here"
        return _done(row, work, keep)
    constraints = work / "constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in pins))
    # pip's install beside samebits' (neither reads what the other writes; each is mostly one
    # core unpacking): a file's row takes the longer of the two, not their sum
    side = ThreadPoolExecutor(max_workers=1)
    theirs_done = side.submit(pip_install, row, source, spec, python, work, out, pip, log,
                              constraints=constraints)
    side.shutdown(wait=False)
    code, said = run(row, "install", [*samebits(), "install", str(lock), "--target", str(ours),
                                      "--python", str(python), "--platform", "linux-64"],
                     log=log)
    broken = ""  # what samebits' install found wrong with the environment it wrote (exit 1)
    if code == 1 and (ours / "bin" / "python").exists():
        broken = _linkage_said(run(row, "ours", [*samebits(), "verify", "env", "--prefix",
                                                 str(ours), str(lock), "--platform",
                                                 "linux-64", "--json"], log=log)[1])
        row.steps.pop("ours", None)
    if code != 0 and not broken:
        row.reason = f"install: {_first_error(said)}"
        theirs_done.result()  # its environment is removed with the rest
        return _done(row, work, keep)
    code, said = theirs_done.result()
    if code != 0:
        row.reason = f"pip: {_first_error(said)}"
        if NOT_PYPI.search(text):  # samebits init left those lines out (said in its spec)
            row.reason = f"not PyPI alone: {row.reason}"
        return _done(row, work, keep)
    start = time.monotonic()
    found = compare(ours, theirs, built=built_from_sdists(lock))
    row.steps["compare"] = (1 if found else 0, time.monotonic() - start)
    row.divergences = [str(d) for d in found]
    (work / "divergences.txt").write_text("".join(f"{d}\n" for d in row.divergences))
    print(f"  compare  {len(found)} divergence(s)", flush=True)
    code, said = run(row, "verify", [*samebits(), "verify", "env", "--prefix", str(theirs),
                                     str(lock), "--platform", "linux-64", "--json"], log=log)
    reasons = []
    built = [d for d in found if d.kind == "sdist-build"]
    slips = [d for d in found if d.kind == "record-slip"]
    required = [d for d in found if d.kind == "build-requires" and d.path.endswith(".dist-info")]
    if required:
        names = {canonical(d.path.rsplit("/", 1)[-1][:-len(".dist-info")].rsplit("-", 1)[0])
                 for d in required}
        row.notes.append(f"{len(names)} package(s) only in samebits' tree, required by its "
                         f"build of an sdist and not by pip's ({required[0].detail}: "
                         f"{', '.join(sorted(names))})")
        if code != 0 and _only_missing(said, names):
            row.steps["verify"] = (0, row.steps["verify"][1])
            row.notes.append("verify env of pip's: those packages missing, and only those")
            code = 0
    found = [d for d in found if d.kind not in EXPLAINED]
    row.steps["compare"] = (1 if found else 0, row.steps["compare"][1])
    if built:
        row.notes.append(f"{len(built)} file(s) of packages built from sdists differ by "
                         f"their build (first: {built[0]})")
    if slips:
        row.notes.append(f"{len(slips)} RECORD(s) with the wheel's own slip, which pip copies "
                         f"(first: {slips[0]})")
    if found:
        reasons.append(f"{len(found)} divergence(s): {_summary(found)}")
    if broken and not found and code == 1 and _linkage_said(said) == broken:
        # the same tree, and verify of pip's finds what samebits' install found: pip wrote
        # that environment without a word (s4: numba 0.53.1 under numpy 1.25.0 its
        # metadata allows, whose `import numba` fails)
        row.reason = f"samebits right: both trees the same, and broken: {broken}; pip " \
                     f"exits 0, samebits' install and verify env of pip's exit 1"
        return _done(row, work, keep)
    if code != 0:
        reasons.append(f"verify env of pip's: {_first_error(said, verify=True)}")
    if broken:
        reasons.append(f"install: exit 1: {broken}")
    row.reason = "; ".join(reasons)
    return _done(row, work, keep)


def pip_install(row: Row, source: Path, spec: Path, python: Path, work: Path, out: Path,
                pip: Path, log: Path, *, constraints: Path | None) -> tuple[int, str]:
    """pip into a new venv ``work/theirs`` of ``python``: the authors' file, the spec's glibc
    floor and exclude-newer, and ``constraints`` (the lock's versions) when there are."""
    theirs = work / "theirs"
    requirements = pip_requirements(source, work / "pip" / row.kind.replace(".toml", ".txt"))
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(theirs)], check=True)
    hook = manylinux_hook(work / "manylinux", glibc_floor(spec))
    line = python_line(spec) or "3"
    if tuple(int(x) for x in line.split(".")[:2]) < (3, 10):
        pip = tools(out, PIP_39)
        row.notes.append(f"pip: {PIP_39} (pip 26.1 and later need Python 3.10)")
    return run(row, "pip", [str(pip), "--python", str(theirs / "bin" / "python"), "install",
                            "-r", str(requirements),
                            *(["-c", str(constraints)] if constraints else []),
                            *uploaded_prior_to(spec)],
               log=log, env={**pip_env(), "PYTHONPATH": str(hook)}, cwd=requirements.parent)


def _pip_alone(row: Row, spec: Path, source: Path, work: Path, out: Path,
               pip: Path, log: Path) -> None:
    """Where samebits' lock failed: pip, given the same file, Python, glibc floor and date
    without a lock to follow. Where pip fails too (an sdist that cannot build there: sktime
    0.4.1's setup.py wants numpy before it is installed, torch-cluster's wants torch, as
    under pip's build isolation) the file installs on neither, which the row says; where pip
    installs it, samebits' failure is the divergence."""
    line = python_line(spec)
    python = pyenv_python(line) if line else None
    if line is None or python is None:
        return
    row.python = line
    code, said = pip_install(row, source, spec, python, work, out, pip, log, constraints=None)
    row.reason = _pip_alone_said(row.reason, installs_on=line if code == 0 else None,
                                 fails_on=[line], cause=_pip_cause(said) if code else "")


LINES = ("3.13", "3.12", "3.11", "3.10", "3.9")  # the Pythons init chooses from


def _pip_everywhere(row: Row, entry: dict, source: Path, work: Path, out: Path,
                    pip: Path, log: Path) -> None:
    """Where init chose no Python (deit: torch 1.13.1 beside torchvision 0.8.1, which has no
    wheel for any of them): pip, given the file on each Python of ``LINES`` this machine has,
    newest first, with the glibc floor and the date init would have written. The first it
    installs on makes samebits' failure the divergence; where it fails on all, the row says
    "pip fails too" with the last one's cause."""
    stand_in = work / "pip-spec.toml"  # what init would have written, for pip_install
    samebits_said, tried, cause = row.reason, [], ""
    for line in LINES:
        python = pyenv_python(line)
        if python is None:
            continue
        stand_in.write_text(f'python = "{line}"\nexclude-newer = "{entry["date"]}"\n')
        shutil.rmtree(work / "theirs", ignore_errors=True)
        code, said = pip_install(row, source, stand_in, python, work, out, pip, log,
                                 constraints=None)
        if code == 0:
            row.python = line
            row.reason = _pip_alone_said(samebits_said, installs_on=line)
            return
        tried.append(line)
        cause = _pip_cause(said)
    if tried:
        row.reason = _pip_alone_said(samebits_said, fails_on=tried, cause=cause)


def _pip_alone_said(samebits: str, *, installs_on: str | None = None,
                    fails_on: Sequence[str] = (), cause: str = "") -> str:
    """A row's reason where samebits failed and pip was given the file alone: pip installs
    it (the divergence), or pip fails too on each Python it was given, and why."""
    if installs_on is not None:
        return f"pip installs it on Python {installs_on}; samebits: {samebits}"
    return f"pip fails too, on Python {', '.join(fails_on)}: {cause}; samebits: {samebits}"


def _pip_cause(said: str) -> str:
    """The package pip could not build and the last error its build printed (``sktime:
    ImportError: numpy is not installed.``); pip's first error line when it names neither."""
    package = re.findall(r"^(?:ERROR: Failed to build '([^']+)'|ERROR: Failed building wheel "
                         r"for (\S+)|╰─> ([A-Za-z0-9_.-]+)\s*$)", said, re.M)
    errors = re.findall(r"\b(\w+Error: .+?)\s*$", said, re.M)
    if not package and not errors:
        return _first_error(said)
    name = next((x for x in reversed(package[-1]) if x), "") if package else ""
    return ": ".join(x for x in (name, errors[-1] if errors else "") if x)


def python_line(spec: Path) -> str | None:
    """The spec's Python line."""
    value = tomllib.loads(spec.read_text()).get("python")
    return str(value) if value else None


def _only_missing(said: str, names: set[str]) -> bool:
    """Whether verify env's JSON report (the start of ``said``) finds only those packages
    missing."""
    try:
        doc, _ = json.JSONDecoder().raw_decode(said.lstrip())
        findings = doc["findings"]
    except (ValueError, KeyError, TypeError):
        return False
    return bool(findings) and all(f.get("kind") == "package-missing"
                                  and canonical(str(f.get("package"))) in names
                                  for f in findings)


def _linkage_said(said: str) -> str:
    """verify env's JSON report (the start of ``said``): each unresolved library with its
    verdict's why (the import probe's error), sorted; "" where it has none or is no report."""
    try:
        doc, _ = json.JSONDecoder().raw_decode(said.lstrip())
        return "; ".join(sorted(f"{lk['file']} needs {lk['needed']}"
                                + (f" ({lk['detail']})" if lk.get("detail") else "")
                                for lk in doc["linkage"]["unresolved"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return ""


def _first_error(text: str, *, verify: bool = False) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if verify:
        try:  # the JSON report: its verdict and first findings
            doc, _ = json.JSONDecoder().raw_decode(text.lstrip())
            found = [f"{f.get('kind')} {f.get('package') or f.get('path')}"
                     for f in doc["findings"]]
            return f"{len(found)} finding(s): {', '.join(found[:3])}"[:300]
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
        picked = [ln for ln in lines if ln.startswith(("result:", "DRIFT", "error:"))
                  or ": " in ln and ln.split(":")[0] in ("drift", "extra", "missing")]
        return " / ".join(picked[:3])[:300] or (lines[-1][:300] if lines else "?")
    for n, ln in enumerate(lines):
        if ln.startswith("error:"):
            more = [m for m in lines[n + 1:n + 4] if not m.startswith(("hint:", "PyPI at"))]
            return " / ".join([ln[6:].strip(), *more])[:400]
    return lines[-1][:300] if lines else "?"


def _summary(found: list[Divergence]) -> str:
    by: dict[str, int] = {}
    for d in found:
        by[d.kind] = by.get(d.kind, 0) + 1
    first = found[0]
    return ", ".join(f"{n} {k}" for k, n in sorted(by.items())) + f" (first: {first})"


def _done(row: Row, work: Path, keep: bool) -> Row:
    text = json.dumps(row.__dict__, indent=1, sort_keys=True) + "\n"
    (work / "row.json").write_text(text)
    if RECORD:
        ROWS.mkdir(exist_ok=True)
        (ROWS / f"{row.name}.json").write_text(text)
    if not keep:
        for sub in ("ours", "theirs", "cache"):
            shutil.rmtree(work / sub, ignore_errors=True)
    return row


def table(rows: list[Row]) -> str:
    head = ["file", "repository", "field", "year", "from", "python", "torch", *STEPS,
            "outcome", "reason"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.name, r.repo, r.field, r.year, f"`{r.kind}`", r.python, r.torch]
        for step in STEPS:
            got = r.steps.get(step)
            cells.append("-" if got is None else f"{got[0]} ({got[1]:.0f} s)")
        reason = "; ".join([*r.notes, r.reason]) if r.notes else r.reason
        cells += [r.outcome, reason.replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def report(entries: list[dict[str, Any]]) -> str:
    """The recorded rows as a table, in ``entries``' order, with their counts and the names
    of the files that have no row yet."""
    rows = [Row(**json.loads((ROWS / f"{e['name']}.json").read_text())) for e in entries
            if (ROWS / f"{e['name']}.json").is_file()]
    missing = [e["name"] for e in entries if not (ROWS / f"{e['name']}.json").is_file()]
    return (table(rows) + f"\n{len(rows)} of {len(entries)} files: {counts(rows)}\n"
            + (f"\nNot run yet ({len(missing)}): {', '.join(missing)}\n" if missing else ""))


def counts(rows: list[Row]) -> str:
    by: dict[str, int] = {}
    for r in rows:
        by[r.outcome] = by.get(r.outcome, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(by.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s sweep --", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="files of files.toml (default: all)")
    parser.add_argument("--out", type=Path, default=Path("build/sweep"))
    parser.add_argument("--keep", action="store_true", help="keep both environments")
    parser.add_argument("--report", action="store_true",
                        help="run nothing: the table of the recorded rows (tests/sweep/rows), "
                        "in files.toml's order, their counts and the files not run yet")
    parser.add_argument("--resume", action="store_true",
                        help="take the rows of files already done (their row.json in OUT, "
                        "else tests/sweep/rows/NAME.json) as they are")
    parser.add_argument("--record", action="store_true",
                        help="also write each row to tests/sweep/rows/NAME.json")
    args = parser.parse_args(argv)
    global RECORD
    RECORD = args.record
    entries = tomllib.loads((HERE / "files.toml").read_text())["file"]
    if args.report:
        print(report(entries), end="")
        return 0
    unknown = set(args.names) - {e["name"] for e in entries}
    if unknown:
        parser.error(f"not in files.toml: {', '.join(sorted(unknown))}")
    chosen = [e for e in entries if not args.names or e["name"] in args.names]
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    pip = tools(out)
    rows: list[Row] = []
    for entry in chosen:
        done = [p for p in (out / entry["name"] / "row.json", ROWS / f"{entry['name']}.json")
                if p.is_file()]
        if args.resume and done:  # an interrupted run goes on where it stopped
            rows.append(Row(**json.loads(done[0].read_text())))
            continue
        rows.append(one(entry, out, pip, keep=args.keep))
        (out / "RESULTS.md").write_text(table(rows) + f"\n{counts(rows)}\n")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{table(rows)}\n{counts(rows)}\nload average at the end: {load}")
    return 0 if all(r.outcome != "diverges" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
