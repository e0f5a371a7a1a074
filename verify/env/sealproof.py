"""Which files ``verify env`` may prove by their cache seal instead of hashing them.

By default nothing: ``verify env`` (and so an audit) reads and hashes every byte. Install's
own verify, and ``verify env --trust-seal``, pass the seals of samebits' cache entries
(``samebits.install.seal.SealIndex``): a prefix file that is one of those sealed inodes, as a
stat shows, takes the sealed sha256, which the prefix's records are then checked against like
any hash. What the seal proves, and the one write it cannot see, is said in
``samebits.install.seal``; the report's ``proof`` says how many files were proven each way,
and whether the seal was trusted at all.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verify.env.records import Records, read_records

if TYPE_CHECKING:
    from samebits.install.seal import SealIndex
    from verify.env.manifest import Manifest


def seals_for(prefix: Path, cache: Path, trust: bool | Collection[str],
              linked_now: Collection[str] = ()) -> tuple[SealIndex | None, Records | None]:
    """(the seals to trust, the prefix's records when they had to be read to find them).
    ``trust``: False (none), True (the entries whose archives the prefix's records name by
    sha256 or md5), or the keys of the entries themselves (install knows them).
    ``linked_now``: the cache paths install has just linked (``SealIndex.linked_now``)."""
    if not trust:  # False, or no entry to trust
        return None, None
    from samebits.install.seal import SealIndex

    records = None
    if trust is True:
        records = read_records(prefix, archives=cache)
        keys = {h.lower() for p in records.packages for h in (p.sha256, p.md5) if h}
    else:
        keys = set(trust)
    return SealIndex.load(cache, keys, linked_now), records


def proof_doc(manifest: Manifest, seals: SealIndex | None) -> dict[str, Any]:
    """How the files were proven: every byte hashed, or some by their seal (the prefix's)
    and by the stat memo (the base interpreter's, outside the prefix)."""
    return {"trust_seal": seals is not None, "by_hash": manifest.by_hash,
            "by_identity": manifest.by_identity, "by_memo": manifest.by_memo,
            "seals": len(seals.entries) if seals is not None else 0,
            "seals_refused": [{"key": k, "why": w} for k, w in seals.refused]
            if seals is not None else []}
