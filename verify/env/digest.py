"""Two digests of an installed prefix, so two machines compare one line each.

**environment** — sha256 over the canonical manifest. The manifest lists every regular file and
symlink under the prefix whose category is package, scaffold, base or unowned (see
``verify.env.manifest``), sorted by the bytes of its prefix-relative path; each one is written as
four NUL-terminated fields::

    <path bytes> \\0 <f|l|o> \\0 <x|-> \\0 <sha256 hex of the content | link target bytes> \\0

(``f`` file, ``l`` symlink, ``o`` anything else; ``x`` when the owner-execute bit is set), after
the header ``samebits-environment-manifest 2\\n`` and, for a venv or a bare install, the
interpreter it runs on (``<interpreter>\\0i\\0-\\0<identity digest>\\0``: sha256 over the
interpreter binary's, libpython's and the stdlib folder's digests, ``verify.env.interpreter``), so
two machines whose venvs run on different interpreters never share a digest. Not covered:
directories (an empty one is invisible), timestamps, owners, permission bits other than
owner-execute, ``conda-meta/`` and py-rattler's ``CACHEDIR.TAG`` (the installer's own records,
which hold cache paths and timestamps; the packages digest covers what they identify), and
bytecode in ``__pycache__/`` that no package hashes (derived from its source, which is covered,
and checked against it by ``verify.env.bytecode``; Python writes new caches at run time). The
install path does enter: conda rewrites its prefix placeholder in text and binary files
(conda-meta ``sha256_in_prefix``), pip writes it into console-script shebangs and
``direct_url.json``, venv into ``pyvenv.cfg`` and ``bin/activate*``. Two installs of one lock
into the same path give the same environment digest; into different paths, not.

**packages** — sha256 of the compact canonical JSON list of the installed packages' identities,
sorted: conda ``{manager, name, version, build, sha256 (else md5) of the archive}``, pip
``{manager, name (PEP 503), version, tags (from WHEEL)}`` plus ``editable`` when so. It does not
depend on the install path, and it says nothing about whether the files are intact: the
environment digest does.

Changing either format changes every digest: bump ``MANIFEST_VERSION`` and say so in CHANGELOG.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from samebits._io import compact_json, sha256_hex
from verify.env.manifest import Entry, Manifest, build_manifest, by_path_bytes
from verify.env.records import Package

MANIFEST_VERSION = 2
HEADER = f"samebits-environment-manifest {MANIFEST_VERSION}\n".encode()
_TYPE = {"file": b"f", "symlink": b"l", "other": b"o"}


def manifest_record(e: Entry) -> bytes:
    """One entry's bytes in the canonical manifest."""
    if e.type == "file":
        value = (e.sha256 or "unreadable").encode()
    elif e.type == "symlink":
        value = os.fsencode(e.target or "")
    else:
        value = b""
    return b"\0".join((os.fsencode(e.path), _TYPE[e.type], b"x" if e.exec else b"-",
                       value)) + b"\0"


def canonical_manifest(entries: Iterable[Entry], interpreter: str | None = None
                       ) -> Iterable[bytes]:
    yield HEADER
    if interpreter is not None:
        yield b"<interpreter>\0i\0-\0" + interpreter.encode() + b"\0"
    for e in by_path_bytes(e for e in entries if e.in_digest):
        yield manifest_record(e)


def environment_digest(entries: Iterable[Entry], interpreter: str | None = None) -> str:
    h = hashlib.sha256()
    for chunk in canonical_manifest(entries, interpreter):
        h.update(chunk)
    return h.hexdigest()


def stdlib_digest(entries: Iterable[Entry]) -> str:
    """sha256 of a stdlib folder's files (paths relative to it), written as the environment
    manifest writes entries, after ``samebits-stdlib 1\n``."""
    h = hashlib.sha256(b"samebits-stdlib 1\n")
    for e in by_path_bytes(entries):
        h.update(manifest_record(e))
    return h.hexdigest()


def packages_digest(packages: Iterable[Package]) -> str:
    ids = sorted((p.identity() for p in packages), key=compact_json)
    return sha256_hex(compact_json(ids))


def digests(manifest: Manifest, interpreter: str | None = None) -> dict[str, str]:
    """``interpreter``: ``verify.env.interpreter.identity_digest`` for a venv or a bare install."""
    return {"environment": environment_digest(manifest.entries, interpreter),
            "packages": packages_digest(manifest.records.packages)}


def prefix_digests(prefix: Path) -> dict[str, str]:
    """{"environment": sha256 hex, "packages": sha256 hex} for the prefix at ``prefix``."""
    from verify.env.interpreter import identity, identity_digest, locate, outside_paths
    from verify.env.manifest import prefix_kind
    from verify.env.scaffold import read_pyvenv_cfg

    prefix = Path(prefix)
    kind = prefix_kind(prefix)
    loc = locate(prefix, kind, read_pyvenv_cfg(prefix))
    m = build_manifest(prefix, elf=False, outside=outside_paths(loc))
    return digests(m, identity_digest(identity(m, loc, None)) if kind != "conda" else None)
