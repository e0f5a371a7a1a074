"""What a paper command's last lines say went wrong, where samebits' way of running it is the
cause and the manifest the cure: one sentence naming the manifest key, or None.

    numba       "cannot cache function ...: no locator available for file ..." (librosa,
                resampy): numba caches compiled code beside the package, which the sandbox
                keeps read-only, else in ``~/.cache/numba``, read-only too
    read-only   "Read-only file system": a command writes only inside the paper's copy and
                /tmp
    network     a name that does not resolve, a network that is unreachable: no network
                unless the command says ``network = true``
"""

from __future__ import annotations

from collections.abc import Sequence

_HINTS = (
    (("no locator available for file", "cannot cache function"),
     'numba could not write its cache (beside the package or in ~/.cache, both read-only to '
     'the command): give the command env = { NUMBA_CACHE_DIR = "/tmp/numba" }'),
    (("Read-only file system",),
     "the command wrote outside the paper's folder and /tmp, which it cannot: write under "
     "the paper's folder (a declared output) or /tmp"),
    (("Temporary failure in name resolution", "Network is unreachable",
      "Name or service not known", "nodename nor servname"),
     "the command has no network: a command that downloads says network = true (and the "
     "audit then depends on what the server sends)"),
)


def failure_hint(tail: Sequence[str]) -> str | None:
    """The hint for the first known cause in ``tail`` (a failed command's last lines)."""
    text = "\n".join(tail)
    for needles, hint in _HINTS:
        if any(n in text for n in needles):
            return hint
    return None
