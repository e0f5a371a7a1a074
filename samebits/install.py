"""Install one platform of a lock into a prefix: exactly the locked archives, nothing resolved.

    fetch  every archive into the cache (skipped when the cache holds it) and check its sha256
           (and md5 for conda) against the lock: every mismatch is listed, nothing is installed
    scan   every member of every archive (samebits.render.archives): absolute or '..' paths and
           links out of the prefix are refused, all of them listed
    conda  py-rattler installs the records read from the checked archives (offline, hardlinked
           from its cache; link scripts not run); conda-meta/*.json then name the lock's URL and
           no host path, so the prefix is the same wherever it is built
    pypi   each locked wheel, hash-checked, is installed with pypa/installer (no dependencies,
           no resolution) into lib/pythonX.Y/site-packages, scripts into bin/ with the final
           prefix's interpreter in their shebang; a lock without a conda Python gets a venv whose
           bin/python points at the interpreter given (the host's, or the base image's)

Why pypa/installer and not ``uv pip install`` / ``pip install --require-hashes --no-deps``: both
need a running interpreter of the lock's Python and CPU architecture, and write the host's
paths (shebangs, caches) into the prefix; installer needs neither, so an aarch64 or Python 3.12
prefix builds on an x86_64 Python 3.11 host, byte for byte the same in any folder. The hash
check is the one ``--require-hashes`` makes, done here before anything is unpacked. The
Containerfile, which runs inside the image, uses pip with --require-hashes --no-deps.

``install_prefix`` writes into the folder it is given (the caller stages and renames it) and
returns an ``InstallReport``; ``samebits.app.cmd_render`` runs ``verify env`` on the result.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from samebits.errors import InputError, LockfileError, ToolError, UnreachableError
from samebits.lockfile import LockedPackage
from samebits.render.archives import BadMember, scan_archive
from samebits.render.source import LockedEnv

FETCH_TIMEOUT = 60.0
# Keys of conda-meta/*.json that name the machine the prefix was built on.
HOST_KEYS = ("extracted_package_dir", "package_tarball_full_path", "link")
INSTALLER_NAME = b"samebits\n"
# The one link a venv prefix may have out of itself: the interpreter it runs on.
VENV_LINKS = ("bin/python",)

Fetcher = Callable[[str, Path], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetched:
    package: LockedPackage
    path: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallReport:
    platform: str
    prefix: str  # the final path, as files in the prefix name it
    python: str | None
    conda: tuple[str, ...]  # name=version=build
    pip: tuple[str, ...]  # name==version
    venv_interpreter: str | None  # bin/python -> this, when the prefix is a venv
    links_out: tuple[str, ...]  # links that may point out of the prefix (the venv interpreter)

    def to_json(self) -> dict[str, object]:
        return {"platform": self.platform, "prefix": self.prefix, "python": self.python,
                "conda": list(self.conda), "pip": list(self.pip),
                "venv_interpreter": self.venv_interpreter}


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "samebits"


def fetch_url(url: str, dest: Path) -> None:
    """Copy ``url`` (file://, http(s)://) to ``dest``; the one place that touches the network."""
    parts = urlsplit(url)
    try:
        if parts.scheme == "file":
            shutil.copyfile(unquote(parts.path), dest)
            return
        if parts.scheme not in ("http", "https"):
            raise InputError(f"{url}: unsupported URL scheme '{parts.scheme}'")
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as resp, open(dest, "wb") as f:
            shutil.copyfileobj(resp, f, 1 << 20)
    except FileNotFoundError:
        raise InputError(f"{url}: no such file") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise UnreachableError(f"{url}: {getattr(exc, 'reason', exc)}",
                               hint="check the network, or fill --cache-dir where it is "
                               "reachable and install offline") from None


def _digests(path: Path) -> tuple[str, str]:
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
            md5.update(chunk)
    return sha.hexdigest(), md5.hexdigest()


def hash_problem(p: LockedPackage, path: Path) -> str | None:
    """Why the archive at ``path`` is not the one the lock names, or None."""
    sha, md5 = _digests(path)
    if p.sha256 and sha != p.sha256:
        return f"sha256 of {p.filename} is {sha}, the lock says {p.sha256}"
    if p.md5 and md5 != p.md5:
        return f"md5 of {p.filename} is {md5}, the lock says {p.md5}"
    if not p.sha256 and not p.md5:
        return f"the lock has no hash for {p.filename}"
    return None


def _fetch_one(p: LockedPackage, cache: Path, fetch: Fetcher) -> Fetched:
    key = p.sha256 or p.md5 or "unhashed"
    dest = cache / "archives" / key / p.filename
    if dest.exists() and hash_problem(p, dest) is None:
        return Fetched(package=p, path=dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.filename}.", dir=dest.parent)
    os.close(fd)
    try:
        fetch(p.url, Path(tmp))
        problem = hash_problem(p, Path(tmp))
        if problem:
            raise InputError(f"{problem} ({p.url})")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return Fetched(package=p, path=dest)


def fetch_all(packages: Sequence[LockedPackage], cache: Path, *,
              fetch: Fetcher = fetch_url) -> list[Fetched]:
    """Every archive in the cache, hash-checked, then every member scanned; all problems listed."""
    problems: list[str] = []
    fetched: list[Fetched] = []

    def one(p: LockedPackage) -> None:
        try:
            got = _fetch_one(p, cache, fetch)
        except InputError as exc:
            problems.append(f"{p.platform}: {p.name} {p.version}: {exc.message}")
            return
        bad: list[BadMember] = scan_archive(got.path)
        problems.extend(f"{p.platform}: {p.name} {p.version}: {b}" for b in bad)
        fetched.append(got)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, packages))
    if problems:
        problems.sort()
        head = problems[0] if len(problems) == 1 else (
            f"{len(problems)} problems with the locked archives:\n  " + "\n  ".join(problems))
        raise InputError(head, hint="nothing was installed; if the archives changed on "
                         "purpose, re-lock (nox -s lock -- ENV)")
    order = {p.key: i for i, p in enumerate(packages)}
    return sorted(fetched, key=lambda f: order[f.package.key])


def host_interpreter(line: str, given: str | None = None) -> str | None:
    """The real path of a Python ``line`` interpreter on this machine (``given``, else
    ``pythonX.Y`` on PATH); None when there is none. Shims (pyenv) are run and resolved."""
    candidates = [given] if given else [shutil.which(f"python{line}")]
    for cand in candidates:
        if not cand:
            continue
        try:
            proc = subprocess.run([cand, "-c", "import sys; print(sys.executable); "
                                   "print('%d.%d' % sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        lines = proc.stdout.split()
        if proc.returncode == 0 and len(lines) == 2 and lines[1] == line:
            return lines[0]
        if given:
            got = lines[1] if len(lines) == 2 else f"no Python ({proc.stderr.strip()[:200]})"
            raise InputError(f'--python "{given}": is {got}, the lock needs Python {line}')
    return None


def python_line(env: LockedEnv, platform: str) -> str | None:
    """The ``X.Y`` the prefix's site-packages are for: the conda python's, else the lock's."""
    conda_py = next((p for p in env.conda(platform) if p.name == "python"), None)
    if conda_py is None:
        return env.python
    line = ".".join(conda_py.version.split(".")[:2])
    if env.python and env.python != line:
        raise LockfileError(f"{env.origin}: samebits.python is {env.python} but the conda part "
                            f"locks python {conda_py.version} on {platform}")
    return line


def _channel_of(url: str) -> str:
    """``.../conda-forge/linux-64/x.conda`` -> ``.../conda-forge``."""
    return url.rsplit("/", 2)[0]


async def _install_conda(fetched: Sequence[Fetched], prefix: Path, final: str, cache: Path,
                         platform: str) -> None:
    import rattler

    records = []
    wrong = []
    for f in fetched:
        rec = await rattler.RepoDataRecord.from_package_archive(f.path)
        p = f.package
        got = (rec.name.normalized, str(rec.version), str(rec.build))
        if got != (p.name, p.version, p.build or got[2]):
            wrong.append(f"{p.filename}: the archive holds {'='.join(got)}, the lock says "
                         f"{p.name}={p.version}={p.build}")
        if p.md5:
            rec.md5 = bytes.fromhex(p.md5)
        records.append(rec)
    if wrong:
        raise InputError("archives are not the locked packages:\n  " + "\n  ".join(wrong))
    kwargs: dict[str, Any] = ({} if str(prefix) == final
                              else {"alternative_target_prefix": final})
    try:
        await rattler.install(records, target_prefix=prefix, cache_dir=cache / "rattler",
                              platform=rattler.Platform(platform), execute_link_scripts=False,
                              show_progress=False, **kwargs)
    except Exception as exc:  # rattler raises its own exception types
        raise ToolError(f"py-rattler failed to install into {prefix}: {exc}") from None


def normalise_conda_meta(prefix: Path, packages: Sequence[LockedPackage]) -> None:
    """conda-meta/*.json: the lock's URL and channel in; the build machine's paths out."""
    by_file = {p.filename: p for p in packages}
    for path in sorted((prefix / "conda-meta").glob("*.json")):
        doc = json.loads(path.read_text())
        p = by_file.get(doc.get("fn", ""))
        if p is not None:
            doc["url"] = p.url
            doc["channel"] = _channel_of(p.url)
        for key in HOST_KEYS:
            doc.pop(key, None)
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False))


def venv_files(interpreter: str, line: str) -> tuple[dict[str, str], dict[str, str]]:
    """(files, symlinks) of a venv on ``interpreter`` (an absolute path), Python ``line``."""
    home = interpreter.rsplit("/", 1)[0] or "/"
    cfg = (f"home = {home}\ninclude-system-site-packages = false\nversion = {line}\n"
           f"executable = {interpreter}\n")
    links = {"bin/python": interpreter, "bin/python3": "python", f"bin/python{line}": "python"}
    return {"pyvenv.cfg": cfg}, links


def _make_venv(prefix: Path, interpreter: str, line: str) -> None:
    files, links = venv_files(interpreter, line)
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    (prefix / "lib" / f"python{line}" / "site-packages").mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (prefix / rel).write_text(text)
    for rel, target in links.items():
        if not (prefix / rel).is_symlink() and not (prefix / rel).exists():
            os.symlink(target, prefix / rel)


def _install_wheels(fetched: Sequence[Fetched], prefix: Path, final: str, line: str) -> None:
    from installer import install
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    site = prefix / "lib" / f"python{line}" / "site-packages"
    scheme = {"purelib": str(site), "platlib": str(site), "scripts": str(prefix / "bin"),
              "headers": str(prefix / "include" / f"python{line}"), "data": str(prefix)}
    python = f"{final}/bin/python" if (prefix / "bin" / "python").is_symlink() or (
        prefix / "bin" / "python").exists() else f"{final}/bin/python{line}"
    dest = SchemeDictionaryDestination(scheme, interpreter=python, script_kind="posix")
    problems = []
    for f in fetched:
        try:
            with WheelFile.open(f.path) as source:
                source.validate_record()
                install(source, dest, additional_metadata={"INSTALLER": INSTALLER_NAME})
        except Exception as exc:  # installer raises ValueError, FileExistsError, its own types
            problems.append(f"{f.package.filename}: {exc}")
    if problems:
        raise InputError("wheels could not be installed:\n  " + "\n  ".join(problems))


def install_prefix(env: LockedEnv, platform: str, prefix: Path, *, final: str, cache: Path,
                   interpreter: str | None = None, fetch: Fetcher = fetch_url) -> InstallReport:
    """Install ``platform`` of ``env`` into ``prefix`` (an empty or new folder).

    ``final`` is the path the prefix will have where it runs (the same as ``prefix`` for a plain
    install; /opt/env in an image): rattler writes it into files with a prefix placeholder and
    script shebangs name it. ``interpreter`` is what a venv prefix runs on (a lock with no conda
    Python and a PyPI part needs one).
    """
    env.check_platform(platform)
    conda, pip = env.conda(platform), env.pip(platform)
    line = python_line(env, platform)
    has_conda_python = any(p.name == "python" for p in conda)
    if pip and not has_conda_python and not interpreter:
        raise InputError(f"{env.origin}: the PyPI part needs a Python {line} interpreter and "
                         "the lock has no conda python",
                         hint=f"pass --python /path/to/python{line}")
    if pip and line is None:
        raise LockfileError(f"{env.origin}: no samebits.python and no conda python: "
                            "cannot tell where site-packages go")
    fetched = fetch_all([*conda, *pip], cache)
    prefix.mkdir(parents=True, exist_ok=True)
    conda_f = [f for f in fetched if f.package.manager == "conda"]
    pip_f = [f for f in fetched if f.package.manager == "pip"]
    if conda_f:
        asyncio.run(_install_conda(conda_f, prefix, final, cache, platform))
        normalise_conda_meta(prefix, conda)
    venv = None
    if pip_f:
        assert line is not None
        if not has_conda_python:
            assert interpreter is not None
            venv = interpreter
            _make_venv(prefix, interpreter, line)
        _install_wheels(pip_f, prefix, final, line)
    return InstallReport(
        platform=platform, prefix=final, python=line,
        conda=tuple(f"{p.name}={p.version}={p.build}" for p in conda),
        pip=tuple(f"{p.name}=={p.version}" for p in pip),
        venv_interpreter=venv, links_out=VENV_LINKS if venv else ())


VERIFY_TIMEOUT = 1800.0


def run_verify_env(prefix: Path, lockfile: Path, platform: str, *,
                   read_flags: Sequence[str] = ()) -> dict[str, object]:
    """``python -m verify env --prefix P --lockfile L --platform X --json``, as the
    Containerfile runs it; its JSON report (top-level ``identical``). ``read_flags`` are how
    a lock of another format was read (``--lock-env``, ``--lock-python``)."""
    cmd = [sys.executable, "-m", "verify", "env", "--prefix", str(prefix),
           "--lockfile", str(lockfile), "--platform", platform, *read_flags, "--json"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=VERIFY_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ToolError(f"verify env did not finish within {VERIFY_TIMEOUT:g} s") from None
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = None
    if proc.returncode in (0, 1) and isinstance(report, dict) and "identical" in report:
        return report
    if proc.returncode == 2 and isinstance(report, dict) and "error" in report:
        err = report["error"]
        raise InputError(f"verify env: {err.get('message', err)}", hint=err.get("hint"))
    tail = (proc.stderr or proc.stdout).strip()[-2000:]
    raise ToolError(f"verify env failed (exit {proc.returncode}): {tail}",
                    hint="run it by hand: " + " ".join(cmd[1:]))
