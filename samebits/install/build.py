"""Build: an sdist into a wheel with uv, in a build environment of exactly the locked wheels.

    unpack   the proved sdist (``.tar.gz`` through tarfile's ``data`` filter after samebits'
             own member checks, ``.zip`` after the same checks) into a private folder; its one
             top-level folder is the source tree
    env      every build requirement's wheel proved into the archive cache by its sha256; a
             folder of links to them is uv's only package source (``--no-index --find-links``)
             and a constraints file pins each by version and hash (``--build-constraints
             --require-hashes``), so the isolated build environment holds those wheels and
             nothing else, or the build fails. The recorded requirements are the whole
             environment: uv installs the static ones, asks the backend
             (``get_requires_for_build_wheel``) and installs what it asks for, all from there
    build    ``uv build --wheel`` of the tree on a Python of the recorded line, with the
             recorded ``SOURCE_DATE_EPOCH`` (also the date the build reads:
             ``samebits.install.buildclock``), umask 022, ``TZ=UTC``, ``PYTHONHASHSEED=0``, no
             uv configuration and no uv cache; none of the caller's compiler settings
             (``COMPILER_VARS``), and compilers told to write the build folder as ``/build``
             and no debug info (``path_environment``), so a C extension built in another
             folder or on another machine with the same compiler is the same bytes

``built_wheel`` (install) takes the wheel from the archive cache, where it is filed under its
own sha256, when it is there and still of that hash; otherwise it builds it and files it there
only if its name and sha256 are the recorded ones (``BuildDiffersError`` otherwise, naming the
package and keeping the other wheel for a look with diffoscope). ``Artifacts`` is how the
installer asks for any locked package's archive: a plain ``fetch.prove``, or that build.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from samebits.archives import link_problem, path_problem
from samebits.errors import InputError, ToolError, clip
from samebits.install.buildclock import clock_environment
from samebits.install.fetch import (
    Fetched,
    Fetcher,
    archive_path,
    digests,
    download_size,
    fetch_url,
    prove,
)
from samebits.install.sources import NO_SOURCES, Sources
from samebits.lock.builds import BuildDiffersError, BuildRecord, BuildRequirement, is_sdist
from samebits.lock.model import LockedPackage

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILD_TIMEOUT = 900.0
# PEP 517/518: a tree without [build-system] is built by setuptools' legacy backend with
# requires = ["setuptools>=40.8.0", "wheel"], as pip and uv build it (uv build asks for both:
# lit 16.0.3, a dependency of triton 2.0, has no pyproject.toml; lit 16.0.6 and 18.1.1 say
# requires = ["setuptools"] and get wheel from the backend's get_requires_for_build_wheel,
# samebits.install.buildhooks)
DEFAULT_REQUIRES = ("setuptools>=40.8.0", "wheel")
DEFAULT_BACKEND = "setuptools.build_meta:__legacy__"
Requirements = Sequence[tuple[BuildRequirement, Path]]


class BuildFailed(ToolError):
    """The build backend (through uv) did not produce a wheel (exit 5)."""


def unpack_sdist(sdist: Path, dest: Path) -> Path:
    """The sdist's members under ``dest``; its source tree (the one top-level folder). An
    unsafe member (absolute, '..', a link out, a device) is an InputError naming it."""
    name = sdist.name
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as zf:
                bad = [(i.filename, path_problem(i.filename.rstrip("/"))) for i in zf.infolist()]
                _refuse(name, [(m, why) for m, why in bad if why])
                zf.extractall(dest)
        else:
            with tarfile.open(sdist, "r:*") as tf:
                members = tf.getmembers()
                _refuse(name, [(m.name, _tar_problem(m)) for m in members if _tar_problem(m)])
                if hasattr(tarfile, "data_filter"):
                    tf.extractall(dest, filter="data")
                else:  # pragma: no cover - a Python without PEP 706; members checked above
                    tf.extractall(dest)  # noqa: S202
    except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise InputError(f"{name}: not a readable sdist: {exc}") from None
    tops = [p for p in dest.iterdir()]
    if len(tops) == 1 and tops[0].is_dir():
        return tops[0]
    return dest


def _tar_problem(m: tarfile.TarInfo) -> str | None:
    reason = path_problem(m.name)
    if reason is None and m.issym():
        reason = link_problem(m.name, m.linkname)
    elif reason is None and m.islnk():
        reason = path_problem(m.linkname)
    elif reason is None and not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
        reason = "device, fifo or other special file"
    return reason


def _refuse(archive: str, bad: Sequence[tuple[str, str | None]]) -> None:
    if bad:
        raise InputError(f"{archive}: unsafe sdist: " + "; ".join(
            f"{member}: {why}" for member, why in bad[:10]))


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildSystem:
    """A source tree's ``[build-system]`` table (PEP 517/518), defaults filled in."""

    requires: tuple[str, ...]
    backend: str
    backend_path: tuple[str, ...] = ()   # in-tree backends: folders of the tree on sys.path


def build_system(tree: Path) -> BuildSystem:
    """The ``[build-system]`` of a source tree; PEP 517's defaults when pyproject.toml or the
    table is missing."""
    default = BuildSystem(requires=DEFAULT_REQUIRES, backend=DEFAULT_BACKEND)
    path = tree / "pyproject.toml"
    if not path.is_file():
        return default
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{path.name} of {tree.name}: not TOML: {exc}") from None
    table = data.get("build-system")
    if not isinstance(table, dict):
        return default
    requires = table.get("requires", list(DEFAULT_REQUIRES))
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise InputError(f"{tree.name}/pyproject.toml: [build-system] requires = "
                         f"{requires!r}: not a list of requirement strings")
    where = table.get("backend-path", [])
    if not isinstance(where, list) or not all(isinstance(w, str) for w in where):
        raise InputError(f"{tree.name}/pyproject.toml: [build-system] backend-path = "
                         f"{where!r}: not a list of folders")
    return BuildSystem(requires=tuple(requires),
                       backend=str(table.get("build-backend", DEFAULT_BACKEND)),
                       backend_path=tuple(where))


def constraints_text(requires: Sequence[BuildRequirement]) -> str:
    """The build constraints: every build requirement pinned by version and sha256."""
    return "".join(f"{r.name}=={r.version} --hash=sha256:{r.sha256}\n"
                   for r in sorted(requires, key=lambda r: r.name))


# the caller's compiler settings would reach a build unrecorded: the build uses the compiler
# on PATH with its defaults and the Python's own (sysconfig) flags, and samebits' flags below
COMPILER_VARS = ("CC", "CXX", "CPP", "LDSHARED", "LDCXXSHARED", "AR", "ARFLAGS", "CFLAGS",
                 "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "OPT", "RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS",
                 "CARGO_ENCODED_RUSTFLAGS")
BUILD_ROOT = "/build"  # what the build folder is called in a compiled file


def build_environment() -> dict[str, str]:
    """The environment uv and the backend run in: this one without uv's or pip's settings
    or the caller's compiler settings (``COMPILER_VARS``), with the clock zone and hash seed
    fixed."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("UV_", "PIP_", "SOURCE_DATE_EPOCH", "PYTHON"))
           and k not in COMPILER_VARS}
    env.update(TZ="UTC", PYTHONHASHSEED="0", NO_COLOR="1", LC_ALL="C.UTF-8")
    return env


def path_environment(work: Path) -> dict[str, str]:
    """What keeps the build's folder out of compiled files: every temporary file under
    ``work`` (``TMPDIR``: uv's build environment too), and ``work`` written as ``/build`` in
    what a C, C++ or Rust compiler writes (``-ffile-prefix-map``: debug info and
    ``__FILE__``; ``--remap-path-prefix``), no debug info at all (``-g0``: it names the
    headers of the build environment, a random folder)."""
    tmp = work / "tmp"
    tmp.mkdir(exist_ok=True)
    roots = dict.fromkeys((str(work), str(work.resolve())))
    c = " ".join([*(f"-ffile-prefix-map={r}={BUILD_ROOT}" for r in roots), "-g0"])
    rust = " ".join(f"--remap-path-prefix={r}={BUILD_ROOT}" for r in roots)
    return {"TMPDIR": str(tmp), "CFLAGS": c, "CXXFLAGS": c, "RUSTFLAGS": rust}


BUILD_FOLDERS = Path("/tmp")  # where builds run: one absolute path per sdist, on every machine


@contextlib.contextmanager
def build_folder(sdist_sha256: str, *, timeout: float = BUILD_TIMEOUT) -> Iterator[Path]:
    """The empty folder a build of the sdist ``sdist_sha256`` runs in, removed after it:
    ``/tmp/samebits-build-<sha256[:32]>``, the same absolute path for every build of that
    sdist on every machine, so a path the build writes into its files is the same too (opencc
    1.4.1, GPT-SoVITS's, compiles its cmake install prefix, a folder of the build, into its
    programs and library: built in random folders it gave other bytes each time, and the
    lock refused it where pip builds it). One build of an sdist at a time on a machine: held
    under ``flock`` of a file beside it, waited for at most ``timeout`` seconds; a folder a
    killed build left is removed first."""
    from samebits.install.cache import remove_tree
    from samebits.install.seal import file_lock

    name = f"samebits-build-{sdist_sha256[:32]}"
    work = BUILD_FOLDERS / name
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(file_lock(BUILD_FOLDERS / f".{name}.lock", timeout=timeout))
        except (OSError, TimeoutError) as exc:
            raise BuildFailed(f"{work}: {exc}", hint="another build of this sdist holds it (or "
                              "another user's): wait for it, or remove the folder") from None
        remove_tree(work)
        try:
            work.mkdir(mode=0o700)
        except OSError as exc:
            raise BuildFailed(f"{work}: {exc.strerror or exc} (left by another user's build?)",
                              hint=f"remove {work}") from None
        try:
            yield work
        finally:
            remove_tree(work)


def last_lines(text: str, n: int = 15) -> str:
    """The last ``n`` lines a tool wrote, each clipped, for an error message (indented)."""
    return "\n  ".join(clip(line, 300) for line in text.strip().splitlines()[-n:])


def build_venv(work: Path, *, python: str, requires: Requirements,
               timeout: float = BUILD_TIMEOUT) -> Path:
    """``work/venv``: a venv on ``python`` holding exactly ``requires`` (proved wheels, linked
    from ``work/links``), made by uv offline. A build runs in it without isolation, so the
    folder it lives in is the same relative to the build's tree on every build (a build
    environment of uv's own is a random ``.tmpXXXXXX`` folder, and a Cython module names
    numpy's ``.pxd`` by its path from the tree: pyopenjtalk 0.4.1 built into other bytes on
    each build). Also where ``get_requires_for_build_wheel`` runs
    (``samebits.install.buildhooks``)."""
    from samebits.solve.pypi import uv_binary

    venv, links = work / "venv", work / "links"
    links.mkdir(parents=True)
    for req, path in requires:
        os.symlink(path, links / req.filename)
    pinned = work / "requires.txt"
    pinned.write_text(constraints_text([r for r, _ in requires]))
    quiet = ["--no-config", "--no-cache", "--quiet", "--color", "never"]
    held = ", ".join(f"{r.name} {r.version}" for r, _ in requires)
    steps = [(f"uv venv on {python}", [uv_binary(), "venv", str(venv), "--python", python,
                                       "--no-python-downloads", *quiet])]
    if requires:
        steps.append((f"uv pip install of {held} into a venv", [
            uv_binary(), "pip", "install", "--python", str(venv / "bin" / "python"),
            "--no-deps", "--require-hashes", "--offline", "--no-index",
            "--find-links", str(links), "-r", str(pinned), *quiet]))
    for what, cmd in steps:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=build_environment(),
                                  cwd=work, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise BuildFailed(f"{what} ran past {timeout:g} s") from None
        if proc.returncode != 0:
            raise BuildFailed(f"{what} failed (exit {proc.returncode}):\n  "
                              + last_lines(proc.stderr or proc.stdout))
    return venv


def build_tree(tree: Path, *, python: str, requires: Requirements, epoch: int,
               work: Path) -> Path:
    """``uv build --wheel`` of ``tree``, without isolation, in ``build_venv``'s venv of
    exactly ``requires`` (proved wheels); the one wheel it wrote (under ``work``)."""
    from samebits.solve.pypi import uv_binary

    out = work / "out"
    out.mkdir(parents=True)
    venv = build_venv(work, python=python, requires=requires)
    cmd = [uv_binary(), "build", "--wheel", str(tree), "--out-dir", str(out),
           "--python", str(venv / "bin" / "python"), "--no-build-isolation", "--no-config",
           "--no-cache", "--no-index", "--no-create-gitignore", "--no-python-downloads",
           "--color", "never"]
    env = {**build_environment(), "SOURCE_DATE_EPOCH": str(epoch), **clock_environment(work),
           **path_environment(work)}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work,
                              timeout=BUILD_TIMEOUT, umask=0o022, check=False)
    except subprocess.TimeoutExpired:
        raise BuildFailed(f"uv build of {tree.name} ran past {BUILD_TIMEOUT:g} s") from None
    wheels = sorted(out.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        raise BuildFailed(f"uv build of {tree.name} failed (exit {proc.returncode}):\n  "
                          + last_lines(proc.stderr or proc.stdout))
    return wheels[0]


def build_sdist(sdist: Path, *, python: str, requires: Requirements, epoch: int,
                work: Path) -> Path:
    """The wheel ``sdist`` builds into (under ``work``, a new empty folder)."""
    tree = unpack_sdist(sdist, work / "src")
    return build_tree(tree, python=python, requires=requires, epoch=epoch, work=work)


def prove_requirements(requires: Sequence[BuildRequirement], platform: str, cache: Path, *,
                       fetch: Fetcher, sources: Sources) -> list[tuple[BuildRequirement, Path]]:
    """Every build requirement's wheel in the archive cache, hash-checked."""
    out = []
    for r in requires:
        as_package = LockedPackage(name=r.name, version=r.version, manager="pip",
                                   platform=platform, url=r.url, sha256=r.sha256)
        out.append((r, prove(as_package, cache, fetch, sources).path))
    return out


def build_interpreter(line: str, given: str | None = None) -> str:
    """The Python a build of ``line`` runs on: ``given`` when it is of that line, else this
    interpreter when it is, else the first of the line that runs here (``find_interpreter``)."""
    from samebits.install.interpreter import find_interpreter, probe

    if given is not None:
        got = probe(given)
        if not isinstance(got, str) and got.line == line:
            return got.executable
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == line:
        return sys.executable
    return find_interpreter(line).executable


def wheel_view(p: LockedPackage, record: BuildRecord) -> LockedPackage:
    """The built wheel as a package of the cache: filed under its sha256 and file name."""
    return LockedPackage(name=p.name, version=p.version, manager="pip", platform=p.platform,
                         url=f"built:///{record.sdist}/{record.wheel}", sha256=record.sha256,
                         dependencies=p.dependencies)


def file_wheel(wheel: Path, dest: Path) -> None:
    """Copy ``wheel`` to ``dest`` by a temporary name and a rename (no reader sees half)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        shutil.copyfile(wheel, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def built_wheel(p: LockedPackage, record: BuildRecord, cache: Path, *,
                python: Callable[[str], str], fetch: Fetcher,
                sources: Sources = NO_SOURCES) -> Fetched:
    """The wheel the lock says ``p`` (an sdist) builds into, proved: from the cache or a
    find-links folder (by its recorded name and sha256), or built here from the proved sdist
    and the locked build requirements. ``python(line)`` is the
    interpreter to build on."""
    view = wheel_view(p, record)
    dest = archive_path(cache, view)
    for have in ([dest] if dest.exists() else []) + sources.candidates(record.wheel,
                                                                       record.sha256):
        sha, md5 = digests(have)
        if sha == record.sha256:
            if have != dest:
                file_wheel(have, dest)
            return Fetched(package=view, path=dest, sha256=sha, md5=md5,
                           size=dest.stat().st_size)
    sdist = prove(p, cache, fetch, sources)
    requires = prove_requirements(record.requires, p.platform, cache, fetch=fetch,
                                  sources=sources)
    with build_folder(record.sdist) as tmp:
        wheel = build_sdist(sdist.path, python=python(record.python), requires=requires,
                            epoch=record.source_date_epoch, work=tmp)
        sha, md5 = digests(wheel)
        if (wheel.name, sha) != (record.wheel, record.sha256):
            kept = cache / "builds" / "rejected" / sha / wheel.name
            file_wheel(wheel, kept)
            raise BuildDiffersError(
                f"{p.filename} built here into {wheel.name} with sha256 {sha}; "
                f"the lock recorded {record.wheel} with sha256 {record.sha256} (kept at "
                f"{kept})",
                hint="the build is not reproducible on this machine: compare the wheels "
                "(diffoscope), or take the recorded wheel from where it was built "
                "(--find-links DIR holding it)")
        file_wheel(wheel, dest)
    return Fetched(package=view, path=dest, sha256=sha, md5=md5, size=dest.stat().st_size)


Builds = dict[tuple[str, str], BuildRecord]


@dataclass(frozen=True, slots=True, kw_only=True)
class Artifacts:
    """How a lock's archives reach the cache: the fetcher, the other sources, the lock's
    builds and the interpreter a build runs on (found the first time one is needed)."""

    cache: Path
    fetch: Fetcher
    sources: Sources
    builds: Builds
    python: Callable[[str], str]

    def artifact(self, p: LockedPackage) -> LockedPackage:
        """What the cache holds for ``p``: its archive, or the wheel its sdist builds into."""
        record = self.builds.get((p.platform, p.name))
        if p.manager == "pip" and record is not None and is_sdist(p.filename):
            return wheel_view(p, record)
        return p

    def download_size(self, packages: Sequence[LockedPackage]) -> tuple[int, int, int]:
        """(files, bytes, of unknown size) fetching ``packages`` would download; servers are
        asked for sizes only by the real fetcher (``fetch.download_size``)."""
        return download_size(packages, self.cache, self.sources, ask=self.fetch is fetch_url)

    def prove(self, p: LockedPackage) -> Fetched:
        a = self.artifact(p)
        if a is p:
            return prove(p, self.cache, self.fetch, self.sources)
        return built_wheel(p, self.builds[(p.platform, p.name)], self.cache,
                           python=self.python, fetch=self.fetch, sources=self.sources)


def build_pythons(given: str | None) -> Callable[[str], str]:
    """``line -> interpreter`` for builds (``build_interpreter``), looked up once per line."""
    found: dict[str, str] = {}

    def python(line: str) -> str:
        if line not in found:
            found[line] = build_interpreter(line, given)
        return found[line]

    return python
