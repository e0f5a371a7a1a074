"""The environment digest a rank in the environment under test can compute: its files as they are.

``verify env``'s digests (``verify.env.digest``) need samebits' own dependencies, which a rank
started by ``samebits verify fleet --prefix ENV -- LAUNCHER`` does not have: it runs on the
environment's interpreter with the standard library and torch alone. Such a rank's local rank 0
digests its host's ``sys.prefix`` this way instead, so the fleet still groups hosts by what
they run and names the odd one:

    tree   sha256 over ``samebits-fleet-tree 1\\n`` and one record per regular file and symlink
           under the prefix, sorted by the bytes of its prefix-relative path, each written as
           ``verify env``'s manifest writes an entry:

               <path bytes> \\0 <f|l|o> \\0 <x|-> \\0 <sha256 hex of the content | link target> \\0

           (``x`` when a file's owner-execute bit is set; a file that cannot be read hashes
           as ``unreadable``)

Left out, as ``verify env`` leaves them out: folders (an empty one is invisible), timestamps,
owners, other permission bits, every ``__pycache__/`` folder (Python writes new caches at run
time) and a conda prefix's ``conda-meta/`` (the installer's records, with cache paths and
times). Unlike ``verify env``'s digest it sorts no file into a package and does not hash the
interpreter a venv links to: two hosts agree when the files under the prefix are the same,
and the report names it ``tree`` so it is never read as ``verify env``'s ``environment``.
Symlinks are not followed. Changing the format changes every digest: bump ``TREE_VERSION``.

In the environment under test's interpreter (``verify.gpu.launch.IN_ENV``): the standard
library only, Python 3.8 or later.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator

TREE_VERSION = 1
HEADER = f"samebits-fleet-tree {TREE_VERSION}\n".encode()
SKIPPED_DIRS = (b"__pycache__",)
SKIPPED_TOP = (b"conda-meta",)
CHUNK = 1 << 20


def _entries(prefix: str) -> Iterator[tuple[bytes, bytes]]:
    """(path relative to ``prefix``, path) of every entry that is not a folder, as bytes."""
    root = os.fsencode(prefix)
    for folder, dirs, files in os.walk(root, followlinks=False):
        top = folder == root
        dirs[:] = [d for d in dirs
                   if d not in SKIPPED_DIRS and not (top and d in SKIPPED_TOP)]
        # os.walk lists symlinks to folders among dirs: entries here, never descended into
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)
            yield os.path.relpath(path, root), path


def _sha256(path: bytes) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                h.update(chunk)
    except OSError:
        return "unreadable"
    return h.hexdigest()


def record(rel: bytes, path: bytes) -> bytes:
    """One entry's bytes, as ``verify.env.digest.manifest_record`` writes them."""
    st = os.lstat(path)
    exe = b"-"
    if stat.S_ISLNK(st.st_mode):
        kind, value = b"l", os.readlink(path)
    elif stat.S_ISREG(st.st_mode):
        kind, value = b"f", _sha256(path).encode()
        exe = b"x" if st.st_mode & stat.S_IXUSR else b"-"
    else:
        kind, value = b"o", b""
    return b"\0".join((rel, kind, exe, value)) + b"\0"


def tree_digest(prefix: str) -> str:
    """The ``tree`` digest of the folder at ``prefix`` (module docstring)."""
    h = hashlib.sha256(HEADER)
    for rel, path in sorted(_entries(prefix)):
        h.update(record(rel, path))
    return h.hexdigest()


def tree_digests(prefix: str) -> dict[str, str]:
    """What a rank's statement names as its environment: ``{"tree": sha256 hex}``."""
    return {"tree": tree_digest(prefix)}
