"""Work for the other core: a function run in a forked child while this process goes on.

An install is one Python thread on a machine with two cores or more; where two steps need
nothing from each other (the seal check of the cache entries and the planning that reads
their manifests; the re-seal after linking and the verify's checks), ``fork_call(fn)`` runs
``fn()`` in a child forked at once and ``Child.wait(limit)`` reads back what it returned
(pickled through a pipe). The child shares every object this process had when it forked and
changes none of them here: whatever ``fn`` writes to disk is written, whatever it changes in
memory stays in the child.

No fork where it is unsafe or impossible: this process has another thread (a lock that
thread holds would stay held in the child), the platform has no ``fork``, or it fails (no
memory, no process left). ``fork_call`` then returns None and the caller runs ``fn`` itself,
as it would have; the same where the child raised, died, or answered nothing in ``limit``
seconds (``wait`` kills it then): a child only ever saves time, it never decides. A thread
that can stop for a moment says so (``pausing``: the progress bars on a terminal, whose
refresh thread ``samebits.ui`` stops and starts again): ``fork_call`` stops it, forks, and
starts it again, so that a run on a terminal forks as a piped one does.

A fork shares this process's heap page by page until either side writes a page: every page
this process writes afterwards is copied first (a page fault each). Forked from a whole
install's heap (the plans, 45,000 cache members, the seals), that cost the verify's walk
35 ms of a 0.3 s walk. ``spawn_call(fn, *args)`` runs a module-level ``fn(*args)`` in a
fresh interpreter instead (this one's executable and ``sys.path``; ``fn`` and ``args`` sent
pickled): it shares nothing and costs its own start (0.08 s on the other core), for work
that takes longer than that and needs only what it is sent.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from samebits.host import thread_count

T = TypeVar("T")


class Child(Generic[T]):
    """A forked ``fn()`` (or a spawned one: ``proc``): ``wait`` for its answer."""

    def __init__(self, pid: int, pipe: int, proc: subprocess.Popen[bytes] | None = None
                 ) -> None:
        self.pid, self.pipe, self.proc = pid, pipe, proc
        self.timed_out = False

    def _reap(self) -> int:
        if self.proc is not None:
            return self.proc.wait()
        return os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])

    def wait(self, limit: float) -> tuple[bool, T | None]:
        """(True, what ``fn`` returned) once the child has answered and ended; (False, None)
        when it raised, died or did not answer within ``limit`` seconds (then it is killed,
        and ``timed_out`` says so)."""
        deadline = time.monotonic() + limit
        chunks: list[bytes] = []
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.pipe], [], [], left)[0]:
                    self.timed_out = True
                    self._kill()
                    break
                chunk = os.read(self.pipe, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(self.pipe)
            code = self._reap()
        if self.timed_out or code != 0:
            return False, None
        try:
            return True, pickle.loads(b"".join(chunks))
        except Exception:  # a torn answer: as if there were none
            return False, None

    def answered(self) -> bool:
        """Whether the child has written its answer (or ended): ``wait`` would not wait."""
        return bool(select.select([self.pipe], [], [], 0)[0])

    def stop(self) -> None:
        """Kill the child and forget its answer (this process is giving up: an interrupt)."""
        self._kill()
        os.close(self.pipe)
        self._reap()

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile: reaped next
            os.kill(self.pid, signal.SIGKILL)


def answer(child: Child[T] | None, fn: Callable[[], T], limit: float) -> T:
    """What ``child`` (``fork_call`` or ``spawn_call`` of the same work as ``fn``) answered
    within ``limit`` seconds, else ``fn()`` run here (no child, or it raised, died or was too
    slow: what it raised is raised here)."""
    if child is not None:
        answered, got = child.wait(limit)
        if answered:
            return got  # type: ignore[return-value]  # what fn returned, a T
    return fn()


# what runs a thread of its own and can stop it for a moment: each a context manager
# factory, stopped on entry and started again on exit (``pausing``)
_PAUSERS: list[Callable[[], contextlib.AbstractContextManager[object]]] = []
ALONE_WAIT = 0.05   # seconds for a stopped thread's task to leave /proc at most


def pausing(pause: Callable[[], contextlib.AbstractContextManager[object]]
            ) -> Callable[[], None]:
    """Register ``pause`` (a thread stopped while its context is entered) for ``fork_call``;
    the function returned unregisters it."""
    _PAUSERS.append(pause)
    return lambda: _PAUSERS.remove(pause) if pause in _PAUSERS else None


def fork_call(fn: Callable[[], T]) -> Child[T] | None:
    """``fn()`` in a child forked now; None where no child could be forked safely."""
    if not hasattr(os, "fork"):
        return None
    with contextlib.ExitStack() as paused:
        if thread_count() != 1:
            for pause in list(_PAUSERS):
                paused.enter_context(pause())
            if not _alone():
                return None
        read, write = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            return None
        if pid == 0:  # the child: answer, and end without any cleanup of the parent's state
            code = 1
            try:
                os.close(read)
                data = memoryview(pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL))
                while data:
                    data = data[os.write(write, data):]
                code = 0
            finally:
                os._exit(code)
        os.close(write)
    return Child(pid, read)


def _alone() -> bool:
    """Whether this is the process's one thread, once a thread just stopped has left."""
    deadline = time.monotonic() + ALONE_WAIT
    while thread_count() != 1:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


# the spawned interpreter: this one's sys.path, then (fn, args), both pickled on stdin; the
# answer pickled on stdout; no clean-up (os._exit) once it is written
_BOOT = ("import gc, os, pickle, sys\n"
         "gc.disable()\n"  # as this process's work runs (``samebits.gcpause``)
         "sys.path[:] = pickle.load(sys.stdin.buffer)\n"
         "fn, args = pickle.load(sys.stdin.buffer)\n"
         "sys.stdout.buffer.write(pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL))\n"
         "sys.stdout.buffer.flush()\n"
         "os._exit(0)\n")


def spawn_call(fn: Callable[..., T], *args: Any) -> Child[T] | None:
    """``fn(*args)`` in a fresh interpreter started now (``fn`` a module-level function,
    ``args`` picklable); None where none could be started. ``answer`` reads it as a fork's."""
    if not sys.executable:
        return None
    try:
        payload = (pickle.dumps(list(sys.path)) +
                   pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL))
        proc = subprocess.Popen([sys.executable, "-c", _BOOT], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return None
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(payload)  # read at once by the child, whatever its size
        proc.stdin.close()
    except OSError:  # it died before reading: nothing to wait for
        proc.kill()
        proc.wait()
        proc.stdout.close()
        return None
    pipe = os.dup(proc.stdout.fileno())
    proc.stdout.close()
    return Child(proc.pid, pipe, proc)
