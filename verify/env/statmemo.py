"""Remembered hashes of a venv's base interpreter files, proved again by a stat.

A venv's files are linked from sealed cache entries (``samebits.install.seal``), but the
interpreter it runs on (its binary, libpython, the stdlib: about 7,600 files for CPython 3.12)
lives outside the prefix, in no cache entry, and ``verify env`` hashes all of it on every run.
The memo remembers what the last hash of each of those files gave, with the inode as stat saw
it while it was read:

    CACHE/statmemo/<sha256 of the outside paths>[:32].json
        {"format": 1, "kind": "samebits.statmemo", "paths": [...],
         "files": [[path, st_dev, st_ino, size, mtime_ns, ctime_ns, st_mode, sha256, elf],
                   ...]}

(``elf``: whether the file is an ELF object, or null when the hash that made the entry did not
look). An ELF file's dynamic section and a pyc's header, facts of the bytes the memo proves, are
kept beside it by ``verify.env.headmemo`` (``CACHE/statmemo/<the same name>/heads.json``, by
sha256), so that a run the memo proves opens none of those files: 5,133 stdlib pycs of CPython
3.12, whose headers the bytecode check reads.

**What a stat proves here**, as for a seal: ``ctime`` cannot be set from user space, and any
change to an inode (its bytes, its mode, its links, its times) moves it to now. A file whose
(dev, inode, size, mtime_ns, ctime_ns, mode) are all the remembered ones, to the nanosecond,
has the remembered bytes. The rule is stricter than the seal's: no link count may change
either, since nothing samebits does links these files.

**When it is used**: only where the caller trusts the cache's seals (install's own verify,
``verify env --trust-seal``, ``verify node`` between its full runs); ``verify env`` without
``--trust-seal`` (and so an audit) still reads every byte, and refreshes the memo from what it
read. A memo that does not parse, or is of another format, is ignored and written again. The
memo lives in the same writable cache as the seals and guards against the same things (see
``samebits.install.seal``): accidents and tools, not the cache's owner.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from samebits._io import atomic_write, stat_key

FOLDER = "statmemo"
FORMAT = 1
KIND = "samebits.statmemo"

Key = tuple[int, int, int, int, int, int]   # dev, ino, size, mtime_ns, ctime_ns, mode


class StatMemo:
    """The memo of one set of outside paths: ``lookup`` when ``trusted``, ``remember`` what
    was hashed, ``save`` when something changed."""

    def __init__(self, cache: Path, paths: Iterable[str], *, trusted: bool) -> None:
        self.paths = sorted(set(paths))
        digest = hashlib.sha256("\0".join(self.paths).encode()).hexdigest()
        self.file = cache / FOLDER / f"{digest[:32]}.json"
        # where ``verify.env.headmemo`` keeps the heads of these files (a pyc's header, an
        # ELF file's facts), by the sha256 this memo proves: not read again on each run
        self.heads_root = str(cache / FOLDER / digest[:32])
        self.trusted = trusted
        self.known: dict[str, tuple[Key, str, bool | None]] = {}
        self.changed = False
        self.used = 0            # files proven by the memo in this run
        try:
            doc = json.loads(self.file.read_bytes())
            if doc.get("format") == FORMAT and doc.get("kind") == KIND \
                    and doc.get("paths") == self.paths:
                # each row as JSON typed it: a field of the wrong type never equals a stat's
                # (``lookup`` compares tuples), so its file is hashed and remembered again
                self.known = {row[0]: (tuple(row[1:7]), row[7], row[8])
                              for row in doc["files"]
                              if len(row) == 9 and type(row[7]) is str}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            self.known = {}

    def lookup(self, path: str, st: os.stat_result) -> tuple[str, bool | None] | None:
        """(the remembered sha256, ELF or not) of ``path`` when its stat is the remembered
        one, else None (always None when the memo is not trusted)."""
        if not self.trusted:
            return None
        got = self.known.get(path)
        if got is None or got[0] != stat_key(st):
            return None
        self.used += 1
        return got[1], got[2]

    def remember(self, path: str, st: os.stat_result, sha256: str, elf: bool | None) -> None:
        """What hashing ``path`` gave, with the stat taken before it was read (a file that
        changed while it was read has another ctime now, and is hashed next time)."""
        value = (stat_key(st), sha256, elf)
        if self.known.get(path) != value:
            self.known[path] = value
            self.changed = True

    def save(self) -> None:
        """Write the memo when it changed; a cache that cannot be written is left alone."""
        if not self.changed:
            return
        doc = {"format": FORMAT, "kind": KIND, "paths": self.paths,
               "files": [[p, *k, sha, elf] for p, (k, sha, elf) in sorted(self.known.items())]}
        with contextlib.suppress(OSError):  # read-only cache: the next run hashes them again
            atomic_write(self.file, json.dumps(doc, separators=(",", ":")) + "\n")
        self.changed = False
