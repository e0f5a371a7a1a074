"""What samebits' in-environment code needs to run on Python 3.8 and 3.9.

samebits itself runs on Python 3.10 or later, but the modules it hands to a worker in the
audited environment (``verify.gpu.launch.IN_ENV``: the facts probe, the workloads, the error
statistics, the node canary, and the core's ``errors``, ``_io`` and ``childenv`` they import)
run on that environment's Python, which for a torch 1.13 paper is often 3.8 or 3.9. Those
modules write their domain values as the rest of samebits does,

    from samebits._compat import dataclass

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Facts: ...

and get, on 3.10 and later, ``dataclasses.dataclass`` itself (so the type checker sees the real
thing), and on 3.8 and 3.9, where ``dataclass`` takes no ``slots`` and no ``kw_only``, a
``dataclass`` that leaves those two out: a frozen dataclass with a ``__dict__`` whose fields may
also be passed by position. Nothing in the worker relies on either, and on 3.10 and later (the
Python samebits' own tests run on) both hold, so a positional call is still caught there. On
3.8 and 3.9 a field without a default may not follow one with a default: every in-environment
dataclass lists its defaulted fields last (``tests/integration/test_inenv_pythons.py`` imports
each module with real 3.8 and 3.9 interpreters).

``removeprefix`` and ``removesuffix`` stand in for the ``str`` methods of 3.9. The other
rules for those modules (``zip(strict=)`` and ``isinstance(x, A | B)`` are 3.10, ``dict[str,
X]`` outside an annotation is 3.9: annotations are strings under ``from __future__ import
annotations`` and are never evaluated there) need no helper: the modules do without
(``tests/integration/test_inenv_pythons.py`` looks for each).
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 10):  # noqa: UP036 -- the in-environment modules run on 3.8+
    from dataclasses import dataclass as dataclass
else:
    import dataclasses

    def dataclass(*, slots: bool = False, kw_only: bool = False, **options):
        """``dataclasses.dataclass(**options)``: Python 3.8 and 3.9 have no slots, no kw_only."""
        return dataclasses.dataclass(**options)


def removeprefix(text: str, prefix: str) -> str:
    """``text.removeprefix(prefix)`` (a 3.9 method)."""
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


def removesuffix(text: str, suffix: str) -> str:
    """``text.removesuffix(suffix)`` (a 3.9 method)."""
    return text[:-len(suffix)] if suffix and text.endswith(suffix) else text
