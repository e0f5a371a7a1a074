"""The unpack cache: each archive's contents, unpacked once, keyed by the archive's hash.

    CACHE/archives/<sha256>/<filename>     the archive (samebits.install.fetch)
    CACHE/unpacked/<sha256>/manifest.json  every member: path, type, sha256, size, exec bit,
                                           link target; computed while unpacking the archive
                                           right after it was proved against the lock
    CACHE/unpacked/<sha256>/tree/...       the members, stored read-only (0444, 0555)
    CACHE/unpacked/<sha256>/seal.json      each file's inode as stat saw it once proved,
                                           with seal.sha256 beside it (samebits.install.seal)
    CACHE/pyc/<sha256>/<key>/              the bytecode of an archive's sources, compiled by
                                           one interpreter (samebits.install.bytecode), sealed
                                           like an unpacked entry

An entry is built in ``.tmp-<pid>-<random>/`` beside its final name and renamed into place
with its manifest already inside, so a reader sees no entry or a whole one: two installs filling
the same entry at once both succeed (the second rename loses and its copy is dropped), and a
``kill -9`` leaves at most a ``.tmp-`` folder that the next fill removes once its process is
gone. A broken entry (its manifest unreadable, a member missing, a placed file that verify
finds changed) is evicted by renaming it away first, then deleting it.

What an entry is trusted for (docs/explanation/install-cache.md): the manifest's hashes were
computed from the archive's bytes while they were proved against the lock, and they, not the files
in ``tree/`` nor the RECORD or paths.json stored there, are what the installer writes into the
prefix's records. So a file changed in the cache, or a file changed together with its RECORD,
makes the prefix fail ``verify env``. The manifest itself lives in the same writable folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

ENTRY_FORMAT = 1
ENTRY_KIND = "samebits.unpacked"
UNPACKED = "unpacked"
PYC = "pyc"

MemberType = Literal["file", "symlink", "dir"]


class Member(NamedTuple):
    """One member of an unpacked archive (a NamedTuple: a CUDA wheel has thousands)."""

    path: str                    # '/'-separated, relative to the archive root
    type: MemberType
    sha256: str | None = None    # file: sha256 of its bytes as unpacked from the archive
    size: int = 0
    exec: bool = False           # owner-execute bit from the archive
    target: str | None = None    # symlink: its target


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """An unpacked archive: ``root/tree`` holds the members the manifest lists."""

    root: Path
    key: str
    filename: str
    kind: Literal["wheel", "conda", "pyc"]
    members: tuple[Member, ...]
    sha256: str = ""             # the archive's, computed when it was proved
    md5: str = ""
    size: int = 0
    notes: tuple[str, ...] = ()
    manifest_sha256: str = ""    # of manifest.json's bytes, as read (the seal names it)

    @property
    def tree(self) -> Path:
        return self.root / "tree"

    def source(self, member: str) -> str:
        """The path of ``member`` in the cache, as a string (the hot path of placing)."""
        return f"{self.root}/tree/{member}"

    def by_path(self) -> dict[str, Member]:
        return {m.path: m for m in self.members}


def manifest_doc(*, key: str, filename: str, kind: str, sha256: str, md5: str, size: int,
                 members: list[Member], notes: list[str]) -> dict[str, Any]:
    return {"format": ENTRY_FORMAT, "kind": ENTRY_KIND,
            "archive": {"key": key, "filename": filename, "type": kind, "sha256": sha256,
                        "md5": md5, "size": size},
            "notes": notes, "members": [list(m) for m in sorted(members)]}


def manifest_bytes(doc: dict[str, Any]) -> bytes:
    """manifest.json as written (the seal hashes these bytes)."""
    return json.dumps(doc, separators=(",", ":")).encode()


def read_entry(cache: Path, key: str, filename: str | None) -> Entry | None:
    """The entry for the archive ``key``/``filename`` (any filename when None), or None when
    there is no whole one."""
    root = cache / UNPACKED / key
    try:
        data = (root / "manifest.json").read_bytes()
        doc = json.loads(data)
        archive = doc["archive"]
        filename = archive["filename"] if filename is None else filename
        if (doc.get("format") != ENTRY_FORMAT or doc.get("kind") != ENTRY_KIND
                or archive["key"] != key or archive["filename"] != filename
                or archive["type"] not in ("wheel", "conda")):
            return None
        members = tuple(Member(str(p), t, s, int(n), bool(x), g)
                        for p, t, s, n, x, g in doc["members"])
        return Entry(root=root, key=key, filename=filename, kind=archive["type"],
                     members=members, sha256=str(archive["sha256"]), md5=str(archive["md5"]),
                     size=int(archive["size"]), notes=tuple(doc.get("notes") or ()),
                     manifest_sha256=hashlib.sha256(data).hexdigest())
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_manifest(root: Path, *, kind: str) -> dict[str, Any] | None:
    """The manifest of the entry at ``root`` when it is whole and of ``kind``, else None."""
    try:
        doc = json.loads((root / "manifest.json").read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("kind") != kind or doc.get("format") != 1:
        return None
    return doc


def staging(folder: Path) -> Path:
    """A new private folder beside the entries of ``folder``, to build one entry in."""
    folder.mkdir(parents=True, exist_ok=True)
    sweep(folder)
    tmp = folder / f".tmp-{os.getpid()}-{secrets.token_hex(6)}"
    tmp.mkdir()
    return tmp


def commit(folder: Path, tmp: Path, key: str, doc: dict[str, Any]) -> Path:
    """Write ``doc`` as ``tmp``'s manifest and rename ``tmp`` to ``folder/key``. When another
    process published the same key first, its entry is kept and ``tmp`` dropped."""
    final = folder / key
    try:
        (tmp / "manifest.json").write_bytes(manifest_bytes(doc))
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "manifest.json").exists():
                raise
    finally:
        if tmp.exists():
            remove_tree(tmp)
    return final


def publish(folder: Path, key: str, build: Callable[[Path], dict[str, Any]]) -> Path:
    """Build ``folder/key`` in a private temporary folder and rename it into place:
    ``build(tmp)`` writes the contents and returns the manifest document, written last."""
    tmp = staging(folder)
    try:
        doc = build(tmp)
    except BaseException:
        remove_tree(tmp)
        raise
    return commit(folder, tmp, key, doc)


def evict(folder: Path, key: str) -> None:
    """Remove the entry ``folder/key``: renamed away first, so no reader sees half of it."""
    final = folder / key
    trash = folder / f".trash-{os.getpid()}-{secrets.token_hex(6)}"
    try:
        os.rename(final, trash)
    except FileNotFoundError:
        return
    remove_tree(trash)


def sweep(folder: Path) -> None:
    """Remove the ``.tmp-`` and ``.trash-`` folders of processes that no longer run."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        if not name.startswith((".tmp-", ".trash-")):
            continue
        pid = name.split("-")[1]
        if pid.isdigit() and not _alive(int(pid)):
            remove_tree(folder / name)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_tree(path: Path) -> None:
    """Delete a folder of read-only files: their folders stay writable (0755), which is what
    deleting needs. What cannot be deleted is left for the next sweep."""
    shutil.rmtree(path, ignore_errors=True)
