"""The re-seal after ``samebits install``'s verify, on the other core while the verify goes on.

``install_prefix(reseal=False)`` links every file and leaves its re-seal (``seal.reseal``: the
new ctime and link count of each linked inode written into its entry's seal) to the verify
that follows, whose walk stats those very inodes (``SealIndex.linked_now``). Once the walk
is done, what is left of the verify (the bytecode check, the findings, the linkage, the
kernels' coverage, the digests) needs nothing from the seals, and the re-seal (reading 48
seals, 22,376 stats compared, 48 seals written: 0.13 s of a warm install of the cpu lock)
needs nothing from the verify but those stats. ``Resealer.start`` forks a child that
re-seals while the verify goes on; ``finish`` waits for it (``WAIT_LIMIT`` at most: each
entry's lock is waited for ``seal.LOCK_TIMEOUT`` at most) and says how many files it
re-sealed.

Where no child can be forked (``samebits.forked``: another thread alive, no ``fork``, a fork
that fails) or the child fails, the re-seal runs here as it would have, in ``finish``: never
skipped silently. A child that outlives the limit is killed and ``finish`` says so; the
seals it did not write stay as they were, which proves nothing less (the next install's
check vouches for links that came or went, or hashes the file), it only costs that check.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from samebits.forked import Child, fork_call
from samebits.install.cache import Entry
from samebits.install.seal import CHILD_LIMIT, reseal_all

WAIT_LIMIT = CHILD_LIMIT   # seconds for the child to finish at most


class Resealer:
    """``start(seen)`` as the verify's walk has proven the linked files (``check_env``'s
    ``after_walk``), ``finish()`` once the verify is done: the number of files re-sealed and
    what went wrong, if anything."""

    def __init__(self, to_reseal: Sequence[tuple[Entry, tuple[str, ...]]]) -> None:
        self.to_reseal = to_reseal
        self.seen: Mapping[str, os.stat_result] = {}
        self.child: Child[int] | None = None
        self.started = False

    @property
    def pid(self) -> int | None:
        """The child's process id; None where the re-seal runs here, in ``finish``."""
        return self.child.pid if self.child is not None else None

    def start(self, seen: Mapping[str, os.stat_result]) -> None:
        self.seen, self.started = seen, True
        if self.to_reseal:  # no child where it cannot fork safely: re-sealed in finish()
            self.child = fork_call(self._reseal)

    def _reseal(self) -> int:
        return reseal_all(self.to_reseal, self.seen)

    def finish(self) -> tuple[int, str]:
        """(files re-sealed, a note when the child was killed, else "")."""
        if not self.started or not self.to_reseal:
            return 0, ""
        if self.child is not None:
            answered, n = self.child.wait(WAIT_LIMIT)
            if answered and n is not None:
                return n, ""
            if self.child.timed_out:
                return 0, (f"the cache's seals were not refreshed: the re-seal took more "
                           f"than {WAIT_LIMIT:g} s (another samebits held their locks); the "
                           "next install checks those files again")
        return self._reseal(), ""  # no child, or it failed: here, as before
