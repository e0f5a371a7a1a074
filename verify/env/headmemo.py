"""What a sealed file's head says, kept beside its seal: so a proven file is not opened again.

A file a seal vouches for (``samebits.install.seal``: its stat proves its sha256) is not read
by ``verify env`` for its hash, but two facts still came from its first bytes on every run: an
ELF file's dynamic section (``verify.env.elfinfo``, through pyelftools: most of the time a warm
verify spent in its workers) and a ``.pyc``'s 16-byte header (``verify.env.bytecode``). Both
are functions of the file's bytes, and so of the sha256 the seal proves. The memo keeps them per
cache entry, by that sha256:

    CACHE/unpacked/<key>/heads.json, CACHE/pyc/<key>/<name>/heads.json, and for a venv's
    base interpreter files, which the stat memo proves (``verify.env.statmemo``),
    CACHE/statmemo/<name>/heads.json
        {"format": 1, "kind": "samebits.heads",
         "heads": {"<sha256>": [<ElfInfo fields, or null>, "<pyc header hex, or null>"], ...}}

written (atomically, sorted: the same heads give the same bytes) when a verify read heads the
file did not hold, and read only where the seals are trusted (install's own verify, ``verify
env --trust-seal``, ``verify node`` between its full runs): a head is used only for a file
whose sealed sha256 the stat has just proven, and only the head read from bytes of that
sha256 is ever remembered under it. A memo that does not parse, or is of another format, is
ignored and written again. It lives in the cache entry, as the seal does, and guards against
the same things: accidents and tools writing through a link, not the cache's owner, who could
rewrite the seal as well (``verify env`` without ``--trust-seal``, and so an audit, reads every
byte and every head).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import Any

from samebits._io import atomic_write
from verify.env.elfinfo import ElfInfo

FILE = "heads.json"
FORMAT = 1
KIND = "samebits.heads"

Head = tuple[ElfInfo | None, bytes | None]
_FIELDS = [f.name for f in dataclasses.fields(ElfInfo)]


def elf_json(info: ElfInfo | None) -> list[Any] | None:
    return None if info is None else [getattr(info, name) for name in _FIELDS]


def elf_of(doc: Any) -> ElfInfo | None:
    if doc is None:
        return None
    if not isinstance(doc, list) or len(doc) != len(_FIELDS):
        raise ValueError("not ElfInfo fields")
    got = dict(zip(_FIELDS, doc, strict=True))
    for name in ("needed", "rpath", "runpath"):
        got[name] = tuple(str(v) for v in got[name])
    return ElfInfo(**got)


class HeadMemo:
    """The heads of the sealed files of some cache entries (``root``: the entry's folder, as
    ``SealIndex.root_of`` names it), loaded once per entry, saved where something was added."""

    def __init__(self) -> None:
        self._known: dict[str, dict[str, Head]] = {}
        self._raw: dict[str, dict[str, Any]] = {}  # as parsed, turned into a Head when asked
        self._added: dict[str, dict[str, Head]] = {}
        self.used = 0

    def _load(self, root: str) -> dict[str, Head]:
        known = self._known.get(root)
        if known is None:
            known, raw = {}, {}
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError, AttributeError):
                doc = json.loads((Path(root) / FILE).read_bytes())
                if doc.get("format") == FORMAT and doc.get("kind") == KIND \
                        and isinstance(doc["heads"], dict):
                    raw = doc["heads"]
            self._known[root], self._raw[root] = known, raw
        return known

    def _head(self, root: str, sha256: str) -> Head | None:
        """The remembered head, made from its JSON the first time it is asked for (a memo
        holds thousands; a run asks for those it proves); one that does not parse is none."""
        known = self._load(root)
        got = known.get(sha256)
        if got is None and sha256 in self._raw[root]:
            try:
                elf, head = self._raw[root].pop(sha256)
                got = (elf_of(elf), None if head is None else bytes.fromhex(head))
            except (ValueError, TypeError, KeyError, AttributeError):
                return None
            known[sha256] = got
        return got

    def get(self, root: str, sha256: str) -> Head | None:
        """The head remembered for the file of ``sha256`` in the entry ``root``, or None."""
        got = self._head(root, sha256)
        if got is not None:
            self.used += 1
        return got

    def remember(self, root: str, sha256: str, elf: ElfInfo | None, head: bytes | None) -> None:
        """What reading the head of that file gave (only a read of bytes proven to be
        ``sha256``, with no error)."""
        if self._head(root, sha256) != (elf, head):
            self._added.setdefault(root, {})[sha256] = (elf, head)

    def save(self) -> None:
        """Write each entry's memo that gained heads; a read-only cache is left as it is."""
        for root, added in sorted(self._added.items()):
            for sha in list(self._raw[root]):  # every remembered head, written again
                self._head(root, sha)
            heads = {**self._known[root], **added}
            doc = {"format": FORMAT, "kind": KIND,
                   "heads": {sha: [elf_json(elf), None if head is None else head.hex()]
                             for sha, (elf, head) in sorted(heads.items())}}
            with contextlib.suppress(OSError):
                atomic_write(Path(root) / FILE, json.dumps(doc, sort_keys=True,
                                                           separators=(",", ":")).encode())
            self._known[root] = heads
        self._added = {}
