"""Reading a cache entry's small files when install decides something from them.

A wheel's ``WHEEL`` and ``entry_points.txt``, a script whose shebang is rewritten, a conda
package's ``info/*.json`` and every file with a prefix placeholder are read from the cache and
turned into something else, so the verify that follows could not tell a changed source from
the placed result. Each is therefore hashed as it is read and compared with the entry's
manifest (whose hashes come from the proved archive); a mismatch is ``CorruptEntry``, which
the installer answers by evicting the entry and unpacking the archive again.
"""

from __future__ import annotations

import hashlib
import os
import stat

from samebits.install.cache import Entry, Member


class CorruptEntry(Exception):
    """A cache entry whose files no longer match its manifest."""

    def __init__(self, entry: Entry, path: str, why: str) -> None:
        super().__init__(f"{entry.filename}: {path}: {why}")
        self.entry = entry


class EntryGone(CorruptEntry):
    """The entry was renamed away while this process read it: another process that shares the
    cache replaced it. What is there now is that process's whole entry, read again, never
    evicted (evicting it would pull it from under the process using it)."""


def read_checked(entry: Entry, member: Member) -> bytes:
    """The bytes of ``member``, proved equal to what the archive held."""
    try:
        data = (entry.tree / member.path).read_bytes()
    except OSError as exc:
        raise CorruptEntry(entry, member.path, f"unreadable ({exc.strerror})") from None
    if hashlib.sha256(data).hexdigest() != member.sha256:
        raise CorruptEntry(entry, member.path, "differs from the archive")
    return data


def read_member(entry: Entry, members: dict[str, Member], path: str) -> bytes | None:
    """``read_checked`` of the member at ``path``; None when the archive has no such file."""
    m = members.get(path)
    if m is None or m.type != "file":
        return None
    return read_checked(entry, m)


def check_tree(entry: Entry) -> None:
    """Every file of the manifest is in the entry's tree with its size (a cheap stat each):
    what a kill, a cleaner or a full disk can leave behind is found before anything is
    placed. Contents are the verify's to check."""
    for m in entry.members:
        if m.type != "file":
            continue
        try:
            st = os.lstat(entry.source(m.path))
        except OSError:
            raise CorruptEntry(entry, m.path, "missing from the cache") from None
        if not stat.S_ISREG(st.st_mode) or st.st_size != m.size:
            raise CorruptEntry(entry, m.path, f"{st.st_size} bytes in the cache, the archive "
                               f"held {m.size}")
