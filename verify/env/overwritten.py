"""Overwritten files: one path two packages' RECORDs claim with different hashes.

pip installs a resolution's wheels one after another; where two write one path, the file of the
one installed later stays, and the earlier one's RECORD still lists the path with its own hash
(``samebits install`` leaves a prefix the same way: ``samebits.install.overwrite``). Such a
path is attributed, not reported as drift:

- with a lock that records the path (``samebits.lock.shared``: its writers in pip's order, the
  last the winner) the file must be the winner's, by the hash of the winner's RECORD line
  (``winner_claims``; ``verify.env.drift`` checks it against that line). A file with another
  writer's bytes is ``modified``: the lock says whose file stays, so the other's is not it.
- without a lock, or one that does not record the path (a lock older than the record, or
  another tool's), the file must match one of its claims (``verify.env.manifest.pick_claim``):
  the one it matches is the winner, however pip ordered them.

Either way the other writers' lines for the path are **overwritten** by the winner
(``overwrites``): listed in the report's notes, one note per pair of packages, every path
named (``overwrite_notes``). A file that matches no claim is still ``modified``: two records
claiming a path never let a third set of bytes through. Lines without a hash (pip's pycs) and
lines with the winner's own hash (the same file) are not overwritten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from samebits.errors import plural
from verify.env.manifest import Manifest
from verify.env.records import Claim, Records, canonical_name

Shared = Mapping[str, Sequence[str]]  # path -> its writers in pip's order (the lock's record)


class Overwritten(NamedTuple):
    path: str
    loser: str       # Package.id whose RECORD line the file is not
    winner: str      # Package.id whose file it is
    recorded: bool   # the lock records the order


def pip_names(records: Records) -> dict[str, str]:
    """Package id -> canonical project name, for the pip packages."""
    return {p.id: canonical_name(p.name) for p in records.packages if p.manager == "pip"}


def winner_claims(manifest: Manifest, shared: Shared | None) -> dict[str, Claim]:
    """Path -> the RECORD line of the writer the lock says stays, for every recorded path
    whose winner's RECORD claims it."""
    if not shared:
        return {}
    names = pip_names(manifest.records)
    out = {}
    for path, writers in shared.items():
        for c in manifest.records.claims.get(path, ()):
            if c.type == "file" and names.get(c.package) == writers[-1]:
                out[path] = c
    return out


def overwrites(manifest: Manifest, shared: Shared | None = None) -> list[Overwritten]:
    """Every RECORD line whose file another package's bytes replaced, as pip leaves them."""
    winners = winner_claims(manifest, shared)
    out: list[Overwritten] = []
    several = {path for path, claims in manifest.records.claims.items() if len(claims) > 1}
    if not several:
        return out
    for e in manifest.entries:
        if e.path not in several:
            continue
        claims = manifest.records.claims[e.path]
        if e.type != "file" or e.category != "package" or not e.sha256:
            continue
        won = winners.get(e.path)
        if won is None:
            won = next((c for c in claims if c.type == "file" and c.sha256 == e.sha256), None)
        if won is None or won.sha256 != e.sha256:
            continue  # the file is no writer's: drift (verify.env.drift)
        for c in claims:
            if c.type == "file" and c.sha256 and c.sha256 != won.sha256 \
                    and c.package != won.package:
                out.append(Overwritten(e.path, c.package, won.package, e.path in winners))
    return out


def overwrite_notes(manifest: Manifest, shared: Shared | None = None) -> list[str]:
    """One note per (overwritten package, package whose files stay), naming every path."""
    groups: dict[tuple[str, str, bool], list[str]] = {}
    for o in overwrites(manifest, shared):
        groups.setdefault((o.loser, o.winner, o.recorded), []).append(o.path)
    notes = []
    for (loser, winner, recorded), paths in sorted(groups.items()):
        why = "the lock records that order" if recorded else "pip leaves the later one's"
        notes.append(f"{loser}: {plural(len(paths), 'file')} of its RECORD overwritten by "
                     f"{winner} ({why}): {', '.join(sorted(paths))}")
    return notes
