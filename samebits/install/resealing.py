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

Where this process has threads besides its own (a fork would copy a lock another thread
holds, never released in the child), where it cannot fork (or the fork fails), or where the
child fails, the re-seal runs here as it would have, in ``finish``: never skipped silently.
A child that outlives the limit is killed and ``finish`` says so; the seals it did not write
stay as they were, which proves nothing less (the next install's check vouches for links
that came or went, or hashes the file), it only costs that check.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping, Sequence

from samebits.host import thread_count
from samebits.install.cache import Entry
from samebits.install.seal import LOCK_TIMEOUT, reseal_all

WAIT_LIMIT = 2 * LOCK_TIMEOUT + 60.0   # seconds for the child to finish at most
POLL = 0.005


class Resealer:
    """``start(seen)`` as the verify's walk has proven the linked files (``check_env``'s
    ``after_walk``), ``finish()`` once the verify is done: the number of files re-sealed and
    what went wrong, if anything."""

    def __init__(self, to_reseal: Sequence[tuple[Entry, tuple[str, ...]]]) -> None:
        self.to_reseal = to_reseal
        self.seen: Mapping[str, os.stat_result] = {}
        self.pid: int | None = None
        self.pipe: int | None = None
        self.started = False

    def start(self, seen: Mapping[str, os.stat_result]) -> None:
        self.seen, self.started = seen, True
        if not self.to_reseal or not hasattr(os, "fork") or thread_count() != 1:
            return  # re-sealed in finish(), in this process
        read, write = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no memory or no process left for a child: here, in finish()
            os.close(read)
            os.close(write)
            return
        if pid == 0:  # the child: re-seal, write the count, and end without any cleanup
            code = 1
            try:
                os.close(read)
                os.write(write, str(reseal_all(self.to_reseal, seen)).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        self.pid, self.pipe = pid, read

    def finish(self) -> tuple[int, str]:
        """(files re-sealed, a note when the child failed or was killed, else "")."""
        if not self.started or not self.to_reseal:
            return 0, ""
        if self.pid is None:
            return reseal_all(self.to_reseal, self.seen), ""
        assert self.pipe is not None
        deadline = time.monotonic() + WAIT_LIMIT
        status = None
        while status is None:
            pid, raw = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(raw)
            elif time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                os.close(self.pipe)
                return 0, (f"the cache's seals were not refreshed: the re-seal took more "
                           f"than {WAIT_LIMIT:g} s (another samebits held their locks); the "
                           "next install checks those files again")
            else:
                time.sleep(POLL)
        with open(self.pipe, "rb", closefd=True) as out:
            said = out.read().decode().strip()
        if status == 0 and said.isdigit():
            return int(said), ""
        return reseal_all(self.to_reseal, self.seen), ""  # the child failed: here, as before
