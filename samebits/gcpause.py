"""Python's cycle collector paused for the passes that build large heaps with no cycles.

A warm install and its verify make hundreds of thousands of small containers and keep them
to the end: a tuple per file placed, a seal per inode, a claim per RECORD line, an entry per
file walked. None of them refers back to itself, so reference counting frees every one; the
cycle collector cannot know that. It runs every 700 allocations and, as the heap grows, walks
every object alive again and again: 0.2 to 0.35 s of a 1.7 s warm install of the cpu lock
(15 to 20 %, its peak memory 130 MB with the collector and without). ``paused_gc`` turns it
off for one such pass and back on after (only if it was on: nested passes, and a caller
that turned it off itself, keep what they had); the garbage the pass leaves, if any, is
collected by the next automatic run after it. As a decorator it pauses the collector for
each call::

    @paused_gc()
    def install_prefix(...): ...

When the command is done the process ends, and Python's finalization runs the collector over
everything still alive (the modules, the parsed seals kept for the process) several times
while it tears the modules down, then frees every object one by one: 0.05 to 0.09 s after a
warm install's report was printed. ``exit_now`` does what of that can be seen from outside and
leaves the rest to the kernel, which takes back the whole heap at once: the ``atexit``
callbacks (logging's flush, ``weakref.finalize`` clean-ups, a pool's shutdown), then stdout
and stderr flushed, then ``os._exit`` (as mypy ends). Where another thread is still running
(whose end Python would wait for) or a stream cannot be flushed (a reader gone: Python says
so and exits 120), the process ends as Python ends it, the heap frozen first (``gc.freeze``:
the collector skips it). What ``samebits`` and ``python -m samebits`` / ``python -m verify``
end with, and the workers that run in an environment's own interpreter (``verify node``'s
canary, the GPU workloads, the error statistics: with torch loaded, its teardown took 0.4-0.6
s after the answer, and the caller waited for the exit; the ``atexit`` callbacks took 5 ms);
never a function a test calls in-process.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cycle collector off inside, as it was after (see the module docstring)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def exit_now(code: int) -> NoReturn:
    """End the process with ``code``: its ``atexit`` callbacks run and its output flushed, its
    heap left to the kernel (see the module docstring)."""
    gc.freeze()
    if threading.active_count() == 1:
        atexit._run_exitfuncs()
        if threading.active_count() == 1:  # a callback may start one: Python would wait
            try:
                for stream in (sys.stdout, sys.stderr):
                    if stream is not None:
                        stream.flush()
            except (OSError, ValueError):
                pass  # said by Python's own exit, below
            else:
                os._exit(code)
    sys.exit(code)
