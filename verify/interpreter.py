"""The interpreter an environment runs on: located, identified, and its start-up files checked.

``locate(prefix, kind, cfg)`` finds it from files alone (nothing runs): a conda prefix's own
``bin/python`` (owned by conda-meta), a venv's ``bin/python`` / ``pyvenv.cfg`` ``home``, a bare
install's ``bin/python3``; then its real binary, the libpython its DT_NEEDED names (searched
as ld.so would: RPATH/RUNPATH with ``$ORIGIN``, the base's ``lib/``, the host's folders) and its
stdlib folder (``<base>/lib/pythonX.Y``, found by its landmark ``os.py``). For a venv these lie
outside the prefix: ``outside_paths`` lists them so that ``build_manifest`` hashes them too.

``probe(executable)`` runs the interpreter isolated and without site (``-I -S``: nothing of the
environment's start-up code runs; ``-B``: it writes no bytecode into the environment) for its
version, cache tag and bytecode magic; on another architecture it cannot run, and the report
says so.

``identity`` is the small dict the report (and an attestation) carries: real path, version,
cache tag, the binary's sha256, libpython's, and a digest of the stdlib folder (every file but
bytecode caches and site-packages, written as the environment manifest is). The environment
digest of a venv or a bare install includes ``identity_digest`` (the three file digests only,
so a machine that cannot run the interpreter computes the same value).

``startup_findings`` checks what Python runs before any user code and the walk of the prefix
cannot see: ``sitecustomize`` / ``usercustomize`` (module, package, bytecode or extension) in
the base interpreter's stdlib and ``lib-dynload`` folders, a ``pythonXY.zip`` on sys.path, and
for a venv with ``include-system-site-packages = true`` every ``*.pth`` of the base's
site-packages. Each must be owned by a record (a dist-info RECORD of that site-packages, the
base's conda-meta, Debian's dpkg database) with a matching hash; else it is a ``startup``
finding. A venv's base interpreter in a conda prefix also has every file checked against its
conda-meta, and a Debian system Python its stdlib against ``/var/lib/dpkg/info/*.md5sums``.
"""

from __future__ import annotations

import ast
import hashlib
import os
import posixpath
import re
import secrets
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify.digest import stdlib_digest
from verify.drift import Finding
from verify.elfinfo import read_elf_info
from verify.manifest import Entry, Manifest, PrefixKind

PROBE_TIMEOUT = 60.0
_LINE = re.compile(r"^python(3\.\d+)$")
_STARTUP = re.compile(r"^(site|user)customize(\.py|\.pyc|\..*\.so)?$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Located:
    executable: str | None          # what the environment runs (absolute)
    binary: str | None = None       # the interpreter binary's real path
    libpython: str | None = None    # the libpython it loads, real path
    stdlib: str | None = None       # the stdlib folder, absolute
    base_prefix: str | None = None
    line: str | None = None         # "3.11"
    inside: bool = True             # binary and stdlib are in the prefix (conda, bare install)
    system_site: bool = False       # venv: include-system-site-packages = true
    problem: str | None = None      # why it could not be located


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    version: str
    cache_tag: str | None
    magic: bytes | None
    stdlib: str | None
    path: tuple[str, ...]           # sys.path under -I -S


def locate(prefix: Path, kind: PrefixKind, cfg: Mapping[str, str]) -> Located:
    prefix = Path(prefix)
    lines = sorted(m.group(1) for name in _listdir(prefix / "lib")
                   if (m := _LINE.match(name)))
    line = lines[-1] if lines else None
    names = ["bin/python", "bin/python3", *(f"bin/python{ln}" for ln in reversed(lines))]
    exe = next((str(prefix / n) for n in names if os.path.lexists(prefix / n)), None)
    if kind != "venv":
        if exe is None or not os.path.exists(exe):
            return Located(executable=exe, line=line, problem="no bin/python in the prefix")
        binary = os.path.realpath(exe)
        stdlib = str(prefix / "lib" / f"python{line}") if line else None
        return Located(executable=exe, binary=binary, line=line, stdlib=stdlib,
                       base_prefix=str(prefix), libpython=_libpython(binary, str(prefix)),
                       inside=True)
    version = cfg.get("version_info") or cfg.get("version") or ""
    line = ".".join(version.split(".")[:2]) or line
    home = cfg.get("home")
    candidates = [exe] if exe and os.path.exists(exe) else []
    if home:
        candidates += [os.path.join(home, n) for n in (f"python{line}", "python3", "python")]
    binary = next((os.path.realpath(c) for c in candidates if c and os.path.isfile(c)), None)
    system_site = cfg.get("include-system-site-packages", "false").lower() == "true"
    if binary is None:
        return Located(executable=exe, line=line, inside=False, system_site=system_site,
                       problem=f"the base interpreter is gone (home = {home})")
    base = _base_prefix(binary, line)
    stdlib = f"{base}/lib/python{line}" if base and line else None
    return Located(executable=exe or binary, binary=binary, line=line, stdlib=stdlib,
                   base_prefix=base, libpython=_libpython(binary, base), inside=False,
                   system_site=system_site)


def outside_paths(loc: Located) -> tuple[str, ...]:
    """What a venv's manifest must hash besides the prefix: binary, libpython, stdlib, zip."""
    if loc.inside or loc.binary is None:
        return ()
    out = [loc.binary]
    if loc.libpython:
        out.append(loc.libpython)
    if loc.stdlib and os.path.isdir(loc.stdlib):
        out.append(loc.stdlib)
    z = _zip(loc)
    if z and os.path.lexists(z):
        out.append(z)
    return tuple(out)


def _zip(loc: Located) -> str | None:
    if not loc.base_prefix or not loc.line:
        return None
    return f"{loc.base_prefix}/lib/python{loc.line.replace('.', '')}.zip"


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _base_prefix(binary: str, line: str | None) -> str | None:
    """The folder whose lib/pythonX.Y/os.py is the stdlib of ``binary`` (getpath's landmark)."""
    d = os.path.dirname(binary)
    for _ in range(4):
        d = os.path.dirname(d)
        if line and os.path.isfile(f"{d}/lib/python{line}/os.py"):
            return d
        if d == "/":
            break
    return None


def _libpython(binary: str, base: str | None) -> str | None:
    try:
        with open(binary, "rb") as f:
            info = read_elf_info(f)
    except OSError:
        return None
    want = next((n for n in info.needed if n.startswith("libpython")), None)
    if want is None:
        return None
    origin = os.path.dirname(binary)
    dirs = [] if info.has_runpath else list(info.rpath)
    dirs += info.runpath
    dirs = [d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for d in dirs]
    if base:
        dirs.append(f"{base}/lib")
    from verify.linkage import host_library_dirs

    for d in [*dirs, *host_library_dirs()]:
        cand = os.path.join(d, want)
        if os.path.isfile(cand):
            return os.path.realpath(cand)
    return None


# ------------------------------------------------------------------------------- running it

PROBE = (
    "import sys\n"
    "m = sys.modules.get('_frozen_importlib_external')\n"
    "print(repr((NONCE, sys.version.split()[0], sys.implementation.cache_tag,\n"
    "            m.MAGIC_NUMBER if m else None, getattr(sys, '_stdlib_dir', None),\n"
    "            list(sys.path))))\n"
)


def probe(executable: str | None) -> Probe | None:
    """Version, cache tag and magic from the interpreter itself (``-I -S``), or None when it
    does not run here (another architecture, or not a Python)."""
    if not executable:
        return None
    nonce = secrets.token_hex(8)
    try:
        proc = subprocess.run([executable, "-I", "-S", "-B", "-c",
                               PROBE.replace("NONCE", repr(nonce))],
                              capture_output=True, timeout=PROBE_TIMEOUT, stdin=subprocess.DEVNULL)
        got = ast.literal_eval(proc.stdout.decode("utf-8", "replace").strip())
        if proc.returncode != 0 or not isinstance(got, tuple) or got[0] != nonce:
            return None
        _, version, tag, magic, stdlib, path = got
    except (OSError, subprocess.TimeoutExpired, ValueError, SyntaxError, TypeError,
            MemoryError, RecursionError):
        return None
    return Probe(version=str(version), cache_tag=tag if isinstance(tag, str) else None,
                 magic=magic if isinstance(magic, bytes) else None,
                 stdlib=stdlib if isinstance(stdlib, str) else None,
                 path=tuple(p for p in path if isinstance(p, str)))


# --------------------------------------------------------------------------------- identity

def _entries_under(entries: Iterable[Entry], folder: str, cut: int) -> list[Entry]:
    head = folder.rstrip("/") + "/"
    return [e._replace(path=e.path[cut:]) for e in entries
            if e.path.startswith(head) and e.category != "cache"
            and not any(f"/{s}/" in e.path[len(head) - 1:]
                        for s in ("site-packages", "dist-packages"))]


def stdlib_entries(manifest: Manifest, loc: Located) -> list[Entry]:
    """The stdlib folder's entries, with paths relative to it."""
    if not loc.stdlib:
        return []
    if loc.inside:
        rel = os.path.relpath(loc.stdlib, manifest.prefix)
        return _entries_under(manifest.entries, rel, len(rel) + 1)
    return _entries_under(manifest.outside, loc.stdlib, len(loc.stdlib) + 1)


def _sha_of(manifest: Manifest, path: str | None) -> str | None:
    if path is None:
        return None
    prefix = str(manifest.prefix) + "/"
    if path.startswith(prefix):
        e = manifest.by_path().get(path[len(prefix):])
    else:
        e = next((x for x in manifest.outside if x.path == path), None)
    return e.sha256 if e is not None else None


def identity(manifest: Manifest, loc: Located, found: Probe | None) -> dict[str, Any]:
    """The interpreter as the report and an attestation record it (a small dict)."""
    out: dict[str, Any] = {"executable": loc.executable, "path": loc.binary,
                           "inside_prefix": loc.inside, "runs_here": found is not None}
    if loc.problem:
        out["problem"] = loc.problem
    out["version"] = found.version if found else loc.line
    out["cache_tag"] = found.cache_tag if found else (
        f"cpython-{loc.line.replace('.', '')}" if loc.line else None)
    out["sha256"] = _sha_of(manifest, loc.binary)
    out["libpython"] = {"path": loc.libpython, "sha256": _sha_of(manifest, loc.libpython)} \
        if loc.libpython else None
    std = stdlib_entries(manifest, loc)
    out["stdlib"] = {"path": loc.stdlib, "files": len(std), "sha256": stdlib_digest(std)} \
        if loc.stdlib else None
    if not loc.inside:
        out["system_site_packages"] = loc.system_site
    return out


def identity_digest(ident: Mapping[str, Any]) -> str:
    """What enters the environment digest: the binary, libpython and stdlib digests only."""
    lib = ident.get("libpython") or {}
    std = ident.get("stdlib") or {}
    text = "\0".join((ident.get("sha256") or "-", lib.get("sha256") or "-",
                      std.get("sha256") or "-"))
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- start-up files

def startup_candidates(manifest: Manifest, loc: Located) -> list[Entry]:
    """Base-interpreter files outside the prefix that Python runs at start-up."""
    if loc.inside:
        return []  # in the prefix: the walk gives them an owner or calls them unowned
    out = []
    folders = {loc.stdlib, f"{loc.stdlib}/lib-dynload"} if loc.stdlib else set()
    z = _zip(loc)
    packages = (f"{loc.stdlib}/sitecustomize/", f"{loc.stdlib}/usercustomize/")
    for e in manifest.outside:
        folder, name = posixpath.split(e.path)
        if e.path == z or (folder in folders and _STARTUP.match(name)) \
                or e.path.startswith(packages):
            out.append(e)
    return out


def startup_findings(manifest: Manifest, loc: Located) -> list[Finding]:
    owners = base_records(loc)
    out: list[Finding] = []
    for e in startup_candidates(manifest, loc):
        claim = owners.get(e.path)
        if claim is None:
            out.append(Finding(kind="startup", path=e.path, package=_who(loc),
                               actual=_describe(e),
                               detail="runs at start-up; no record owns it"))
        elif claim[1] is not None and claim[1] != _digest_of(e, claim[2]):
            out.append(Finding(kind="modified", path=e.path, package=claim[0],
                               expected=claim[1], actual=_digest_of(e, claim[2]),
                               detail="runs at start-up"))
    if loc.system_site and loc.base_prefix and loc.line:
        out.extend(_system_site_findings(loc))
    if owners and not loc.inside:
        out.extend(_recorded_base_findings(manifest, owners))
    return out


def _who(loc: Located) -> str:
    return f"<python {loc.binary}>"


def _describe(e: Entry) -> str:
    return f"symlink -> {e.target}" if e.type == "symlink" else f"file sha256 {e.sha256}"


def _digest_of(e: Entry, algo: str) -> str | None:
    if e.type == "symlink":
        return e.target
    if algo == "md5":
        return _file_digest(Path(e.path), "md5")
    return e.sha256


def base_records(loc: Located) -> dict[str, tuple[str, str | None, str]]:
    """Absolute path -> (owner, expected digest or link target or None, algorithm), from the
    base interpreter's records: its conda-meta, or Debian's dpkg database."""
    base = loc.base_prefix
    if loc.inside or not base:
        return {}
    if os.path.isdir(f"{base}/conda-meta"):
        from verify.records import read_records

        recs = read_records(Path(base))
        out: dict[str, tuple[str, str | None, str]] = {}
        for rel, claims in recs.claims.items():
            c = claims[-1]
            out[f"{base}/{rel}"] = (c.package, c.target if c.type == "symlink" else c.sha256,
                                    "sha256")
        return out
    return dpkg_records(loc)


def dpkg_records(loc: Located, root: str = "/") -> dict[str, tuple[str, str | None, str]]:
    """Debian: which package owns the base interpreter's start-up files, with their md5."""
    info = os.path.join(root, "var/lib/dpkg/info")
    if not loc.stdlib or not os.path.isdir(info):
        return {}
    want = (loc.stdlib.lstrip("/") + "/", (_zip(loc) or "-").lstrip("/"))
    out: dict[str, tuple[str, str | None, str]] = {}
    for name in sorted(os.listdir(info)):
        if not name.endswith((".md5sums", ".list")):
            continue
        pkg = "deb:" + name.rsplit(".", 1)[0].split(":")[0]
        try:
            with open(os.path.join(info, name), encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            if name.endswith(".md5sums"):
                md5, _, path = line.partition("  ")
                if path.startswith(want):
                    out["/" + path] = (pkg, md5, "md5")
            elif line.lstrip("/").startswith(want) and line not in out:
                out.setdefault(line, (pkg, None, "md5"))  # owned (a symlink or a conffile)
    return out


def _system_site_findings(loc: Located) -> list[Finding]:
    """include-system-site-packages: the base's site-packages run their *.pth at start-up."""
    from verify.records import read_records

    assert loc.base_prefix is not None
    base = Path(loc.base_prefix)
    sp = f"lib/python{loc.line}/site-packages"
    folder = base / sp
    if not folder.is_dir():
        return []
    claims = read_records(base).claims
    out = []
    for name in sorted(os.listdir(folder)):
        if not (name.endswith(".pth") or _STARTUP.match(name)):
            continue
        path = folder / name
        rel = f"{sp}/{name}"
        have = claims.get(rel)
        sha = _file_digest(path, "sha256")
        if not have:
            out.append(Finding(kind="startup", path=str(path), package=_who(loc),
                               actual=f"file sha256 {sha}",
                               detail="runs at start-up (include-system-site-packages); "
                               "no record owns it"))
        elif have[-1].sha256 and have[-1].sha256 != sha:
            out.append(Finding(kind="modified", path=str(path), package=have[-1].package,
                               expected=have[-1].sha256, actual=sha,
                               detail="runs at start-up (include-system-site-packages)"))
    return out


def _recorded_base_findings(manifest: Manifest,
                            owners: Mapping[str, tuple[str, str | None, str]]) -> list[Finding]:
    """A venv on a conda or Debian Python: every base file its records hash, checked."""
    out = []
    for e in manifest.outside:
        claim = owners.get(e.path)
        if claim is None or claim[1] is None or e.category == "cache" or e.type != "file":
            continue
        actual = _digest_of(e, claim[2])
        if actual != claim[1]:
            out.append(Finding(kind="modified", path=e.path, package=claim[0],
                               expected=claim[1], actual=actual,
                               detail="the venv's base interpreter"))
    return out


def _file_digest(path: Path, algo: str) -> str | None:
    h = hashlib.new(algo)
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def site_dirs(loc: Located, prefix: Path) -> Sequence[str]:
    """The folders site.py processes for this environment (absolute)."""
    out = [str(prefix / f"lib/python{loc.line}/site-packages")] if loc.line else []
    if loc.system_site and loc.base_prefix:
        out.append(f"{loc.base_prefix}/lib/python{loc.line}/site-packages")
    return out
