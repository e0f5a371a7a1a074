"""Which files ``verify env`` may prove by their cache seal instead of hashing them.

By default nothing: ``verify env`` (and so an audit) reads and hashes every byte. Install's
own verify, and ``verify env --trust-seal``, pass the seals of samebits' cache entries
(``samebits.install.seal.SealIndex``): a prefix file that is one of those sealed inodes, as a
stat shows, takes the sealed sha256, which the prefix's records are then checked against like
any hash. What the seal proves, and the one write it cannot see, is said in
``samebits.install.seal``; the report's ``proof`` says how many files were proven each way,
and whether the seal was trusted at all.

Install's own verify knows more: which prefix paths it has just hardlinked from which cache
files (``Placed``). The walk then takes each such name that is still a regular file with its
sealed facts (size, mode, mtime, sha256) and does not stat it; ``samebits.install.seal.
prove_placed`` stats every one of them instead, by the rule of a file just linked
(``unchanged_but_links``: the sealed inode, size, mtime and mode; linking moved its ctime and
link count), on the other core while the walk goes on (install's re-seal then writes those
very stats). The report is only taken
once every such path is proven: where one is not, or the proof could not be had, the whole
verify runs again with a stat of every file (``verify.env.check.check_env``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from verify.env.records import Records, read_records

if TYPE_CHECKING:
    from samebits.install.seal import SealIndex
    from verify.env.manifest import Manifest


class Placed(Protocol):
    """What an install hardlinked into the prefix a moment ago, and its proof (module
    docstring): ``start`` once the seals are read, ``unproven`` before the report."""

    @property
    def paths(self) -> Mapping[str, str]:
        """Prefix-relative path -> the cache path it was hardlinked from."""
        ...

    def start(self, seals: SealIndex) -> None:
        """Begin proving ``paths`` against ``seals`` (``prove_placed``)."""
        ...

    def unproven(self) -> Collection[str] | None:
        """The paths ``prove_placed`` did not prove; None where the proof could not be had;
        nothing where ``start`` was not called."""
        ...


def seals_for(prefix: Path, cache: Path, trust: bool | Collection[str]
              ) -> tuple[SealIndex | None, Records | None]:
    """(the seals to trust, the prefix's records when they had to be read to find them).
    ``trust``: False (none), True (the entries whose archives the prefix's records name by
    sha256 or md5), or the keys of the entries themselves (install knows them)."""
    if not trust:  # False, or no entry to trust
        return None, None
    from samebits.install.seal import SealIndex

    records = None
    if trust is True:
        records = read_records(prefix, archives=cache)
        keys = {h.lower() for p in records.packages for h in (p.sha256, p.md5) if h}
    else:
        keys = set(trust)
    return SealIndex.load(cache, keys), records


def proof_doc(manifest: Manifest, seals: SealIndex | None) -> dict[str, Any]:
    """How the files were proven: every byte hashed, or some by their seal (the prefix's)
    and by the stat memo (the base interpreter's, outside the prefix)."""
    return {"trust_seal": seals is not None, "by_hash": manifest.by_hash,
            "by_identity": manifest.by_identity, "by_memo": manifest.by_memo,
            "seals": len(seals.entries) if seals is not None else 0,
            "seals_refused": [{"key": k, "why": w} for k, w in seals.refused]
            if seals is not None else []}
