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

What the interpreter runs at start-up is checked by ``verify.env.startup``.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import re
import secrets
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits.childenv import child_environ
from verify.env.digest import stdlib_digest
from verify.env.elfinfo import ElfInfo, read_elf_info
from verify.env.manifest import Entry, Manifest, PrefixKind

PROBE_TIMEOUT = 60.0
_LINE = re.compile(r"^python(3\.\d+)$")


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


def locate(prefix: Path, kind: PrefixKind, cfg: Mapping[str, str], *,
           facts: Path | None = None) -> Located:
    """``facts``: where the seals are trusted, the cache whose stat memo keeps the
    interpreter binary's dynamic section (``binary_facts``)."""
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
                       base_prefix=str(prefix),
                       libpython=_libpython(binary, str(prefix), facts),
                       inside=True)
    version = cfg.get("version_info") or cfg.get("version") or ""
    line = ".".join(version.split(".")[:2]) or line
    home = cfg.get("home")
    candidates = [exe] if exe and os.path.exists(exe) else []
    if exe is not None and candidates and os.path.realpath(exe).startswith(f"{prefix}/"):
        candidates = []  # a copy in the venv (--copies): the base is where `home` says
    if home:
        candidates += [os.path.join(home, n) for n in (f"python{line}", "python3", "python")]
    found = next((os.path.realpath(c) for c in candidates if c and os.path.isfile(c)), None)
    system_site = cfg.get("include-system-site-packages", "false").lower() == "true"
    if found is None:
        return Located(executable=exe, line=line, inside=False, system_site=system_site,
                       problem=f"the base interpreter is gone (home = {home})")
    binary = found
    base = _base_prefix(binary, line)
    stdlib = f"{base}/lib/python{line}" if base and line else None
    return Located(executable=exe or binary, binary=binary, line=line, stdlib=stdlib,
                   base_prefix=base, libpython=_libpython(binary, base, facts), inside=False,
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
    z = zip_path(loc)
    if z and os.path.lexists(z):
        out.append(z)
    return tuple(out)


def zip_path(loc: Located) -> str | None:
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


def _libpython(binary: str, base: str | None, facts: Path | None) -> str | None:
    info = binary_facts(binary, facts)
    if info is None:
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
    from verify.env.linkage import host_library_dirs

    for d in [*dirs, *host_library_dirs()]:
        cand = os.path.join(d, want)
        if os.path.isfile(cand):
            return os.path.realpath(cand)
    return None


# The interpreter binary's dynamic section, by its stat: CACHE/statmemo/binaries.json
#     {"format": 1, "kind": "samebits.binaries",
#      "files": [[path, st_dev, st_ino, size, mtime_ns, ctime_ns, st_mode, <ElfInfo fields>]]}
# read where the seals are trusted, as the stat memo is (``verify.env.statmemo``: an inode
# whose stat is the remembered one to the nanosecond has the remembered bytes), so a warm
# verify neither reads the binary nor imports pyelftools to find its libpython.
BINARIES = "binaries.json"
BINARIES_KIND = "samebits.binaries"


def binary_facts(binary: str, facts: Path | None) -> ElfInfo | None:
    """``read_elf_info`` of ``binary`` (None: unreadable); with ``facts``, taken from its
    memo there while the binary's stat is the remembered one, and remembered when read."""
    from samebits._io import atomic_write, stat_key
    from verify.env.headmemo import elf_json, elf_of
    from verify.env.statmemo import FOLDER

    try:
        st = os.stat(binary)
    except OSError:
        return None
    memo = facts / FOLDER / BINARIES if facts is not None else None
    rows: dict[str, list[Any]] = {}
    if memo is not None:
        try:
            doc = json.loads(memo.read_bytes())
            if doc.get("format") == 1 and doc.get("kind") == BINARIES_KIND:
                rows = {row[0]: row for row in doc["files"]}
            row = rows.get(binary)
            if row is not None and tuple(row[1:7]) == stat_key(st):
                return elf_of(row[7])
        except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError):
            rows = {}
    try:
        with open(binary, "rb") as f:
            info = read_elf_info(f)
    except OSError:
        return None
    if memo is not None and info.error is None and stat_key(os.stat(binary)) == stat_key(st):
        rows[binary] = [binary, *stat_key(st), elf_json(info)]
        doc = {"format": 1, "kind": BINARIES_KIND, "files": [rows[k] for k in sorted(rows)]}
        with contextlib.suppress(OSError):  # a read-only cache: read again next time
            atomic_write(memo, json.dumps(doc, separators=(",", ":")) + "\n")
    return info


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
    return probe_result(start_probe(executable))


Started = tuple[subprocess.Popen[bytes], str] | None


def start_probe(executable: str | None) -> Started:
    """``probe`` started: the interpreter runs while the caller works (no thread of this
    process waits on it); ``probe_result`` takes its answer."""
    if not executable:
        return None
    nonce = secrets.token_hex(8)
    try:
        proc = subprocess.Popen([executable, "-I", "-S", "-B", "-c",
                                 PROBE.replace("NONCE", repr(nonce))],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, env=child_environ(os.environ))
    except OSError:
        return None
    return proc, nonce


def stop_probe(started: Started) -> None:
    """The interpreter ``start_probe`` started, killed and waited for: its answer unread."""
    if started is not None:
        started[0].kill()
        started[0].communicate()


def probe_result(started: Started) -> Probe | None:
    """What the interpreter ``start_probe`` started answered (within ``PROBE_TIMEOUT`` of
    being asked), or None."""
    if started is None:
        return None
    proc, nonce = started
    try:
        out, _ = proc.communicate(timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        stop_probe(started)
        return None
    try:
        got = ast.literal_eval(out.decode("utf-8", "replace").strip())
        if proc.returncode != 0 or not isinstance(got, tuple) or got[0] != nonce:
            return None
        _, version, tag, magic, stdlib, path = got
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return Probe(version=str(version), cache_tag=tag if isinstance(tag, str) else None,
                 magic=magic if isinstance(magic, bytes) else None,
                 stdlib=stdlib if isinstance(stdlib, str) else None,
                 path=tuple(p for p in path if isinstance(p, str)))


# --------------------------------------------------------------------------------- identity

def _entries_under(entries: Iterable[Entry], folder: str, cut: int) -> list[Entry]:
    """The entries below ``folder`` but its cache and site folders, each path cut by ``cut``
    (a venv's 7,500 stdlib files: one loop, no generator or ``_replace`` per entry)."""
    head = folder.rstrip("/") + "/"
    skip = len(head) - 1
    out: list[Entry] = []
    for e in entries:
        path = e.path
        if path.startswith(head) and e.category != "cache":
            rest = path[skip:]
            if "/site-packages/" not in rest and "/dist-packages/" not in rest:
                out.append(Entry(path[cut:], *e[1:]))
    return out


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
