"""The proof and the re-seal of what ``samebits install`` linked, on the other core while its
verify goes on.

``install_prefix(reseal=False)`` links every file and leaves its re-seal (``seal.reseal``: the
new ctime and link count of each linked inode written into its entry's seal) to the verify
that follows, and names every path it linked (``InstallReport.linked``). That verify
(``verify.env.check.check_env`` with ``placed``) takes each such path that its walk finds as a
regular file from its seal, without a stat, and has it proven instead: as soon as it has read
the seals it calls ``Resealer.start``, which forks a child that stats every linked path
(``seal.prove_placed``: the sealed inode, size, mtime and mode; linking moved its ctime and
link count) and re-seals from those very stats (reading 48 seals, 22,376 stats, 48 seals
written for the cpu lock), while the verify walks the prefix and checks the rest; it yields
the core to them (``RESEAL_NICE``): its answer is needed only before the report.
``unproven`` waits for the child (``WAIT_LIMIT`` at most: each entry's lock is waited for
``seal.LOCK_TIMEOUT`` at most) before the verify takes its report: a path it did not prove
makes the verify check everything again with a stat of every file. ``finish`` says how many
files were re-sealed.

Where no child can be forked (``samebits.forked``: another thread alive, no ``fork``, a fork
that fails) or the child fails, the proof runs here, in ``unproven``, and the re-seal in
``finish``, as they would have: never skipped silently. A child that outlives the limit is
killed and ``finish`` says so; the seals it did not write stay as they were, which proves
nothing less (the next install's check vouches for links that came or went, or hashes the
file), it only costs that check.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from samebits.forked import Child, fork_call
from samebits.install.cache import Entry
from samebits.install.seal import CHILD_LIMIT, prove_placed, reseal_all

if TYPE_CHECKING:
    from samebits.install.seal import SealIndex

WAIT_LIMIT = CHILD_LIMIT   # seconds for the child to finish at most
RESEAL_NICE = 10           # the child's niceness (``os.nice``): the verify goes first


class Resealer:
    """``verify.env.sealproof.Placed`` for an install: ``start(seals)`` once the verify has
    read the seals, ``unproven()`` before it takes its report, ``finish()`` once it is done
    (the number of files re-sealed and what went wrong, if anything)."""

    def __init__(self, to_reseal: Sequence[tuple[Entry, tuple[str, ...]]],
                 linked: Mapping[str, str], prefix: str) -> None:
        self.to_reseal, self.paths, self.prefix = to_reseal, linked, prefix
        self.seals: SealIndex | None = None
        self.seen: Mapping[str, os.stat_result] | None = None  # the proof's, taken here
        self.child: Child[tuple[list[str], int]] | None = None
        self.resealed: int | None = None    # the child's count
        self.timed_out = False

    @property
    def pid(self) -> int | None:
        """The child's process id; None where the work runs here."""
        return self.child.pid if self.child is not None else None

    def start(self, seals: SealIndex) -> None:
        self.seals = seals
        if self.paths or self.to_reseal:  # no child where it cannot fork safely
            self.child = fork_call(self._both)

    def _prove(self) -> tuple[list[str], dict[str, os.stat_result]]:
        assert self.seals is not None
        return prove_placed(self.prefix, self.paths, self.seals)

    def _both(self) -> tuple[list[str], int]:
        # the verify needs the proof only before its report: the walk, and the base
        # interpreter's walk it waits for as soon as its own is done, go first
        with contextlib.suppress(OSError):
            os.nice(RESEAL_NICE)
        unproven, seen = self._prove()
        return unproven, reseal_all(self.to_reseal, seen)

    def unproven(self) -> list[str] | None:
        """The linked paths not proven (``verify.env.sealproof.Placed``)."""
        if self.seals is None:
            return []
        if self.child is not None:
            answered, got = self.child.wait(WAIT_LIMIT)
            self.timed_out = self.child.timed_out
            self.child = None
            if answered and got is not None:
                self.resealed = got[1]
                return got[0]
        unproven, self.seen = self._prove()  # no child, or it failed: here, as before
        return unproven

    def finish(self) -> tuple[int, str]:
        """(files re-sealed, a note when the child was killed, else "")."""
        if self.seals is None or not self.to_reseal:
            return 0, ""
        if self.child is not None:  # the verify failed before it asked
            self.unproven()
        if self.resealed is not None:
            return self.resealed, ""
        if self.timed_out:
            return 0, (f"the cache's seals were not refreshed: the re-seal took more "
                       f"than {WAIT_LIMIT:g} s (another samebits held their locks); the "
                       "next install checks those files again")
        return reseal_all(self.to_reseal, self.seen), ""  # no child, or it failed: here
