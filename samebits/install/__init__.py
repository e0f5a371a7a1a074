"""Install one platform of a lock into a prefix: exactly the locked archives, nothing resolved.

    check      every package is one install can place (a wheel, a conda package, an sdist
               whose build the lock records); all others named before any download (builds)
    fetch      every archive without a cache entry into ``CACHE/archives/<sha256>/``, its
               sha256 (and md5 for conda) checked against the lock; a ``--find-links`` file
               or ``--mirror`` URL with the lock's hash serves as well    (fetch, sources)
    build      an sdist's wheel: filed under its own sha256, or built again from the locked
               build environment and refused unless it is the recorded bytes  (build)
    unpack     scanned (absolute or '..' paths, links out, devices, zip bombs refused), then
               unpacked once into ``CACHE/unpacked/<sha256>/`` with the sha256 of every member
               computed from the proved archive's bytes and checked against the archive's own
               RECORD / info/paths.json, then sealed: every file's inode as stat sees it,
               with its sha256; as soon as each archive is proved  (unpack, cache, seal)
    check      every entry against its seal, a stat per file; what the seal cannot vouch for
               is hashed, a changed entry evicted and unpacked again             (seal)
    place      each entry's files into the staged prefix by reflink, else hardlink (the
               sealed inode, re-sealed after linking), else copy; conda packages linked as
               py-rattler links them, wheels laid out as pypa/installer lays them out, plus
               PEP 610 direct_url.json; every record written from the entry's manifest, never
               from the cached files       (place, seal, conda, wheels, placeholder, entryfiles)
    compile    bytecode by the prefix's own interpreter when it runs here     (bytecode)
    verify     ``verify env`` of the result, in the caller (samebits_app.cmd_install): each
               hardlinked file proven by a stat against the seal, every other by its hash

Why not ``uv pip install`` / ``pip install --require-hashes --no-deps``: both need a running
interpreter of the lock's Python and CPU architecture and write the host's paths into the
prefix; this needs neither (bytecode, which does, is skipped with a reason), so an aarch64 or
Python 3.12 prefix builds on an x86_64 Python 3.11 host, byte for byte the same in any folder.
The Containerfile, which runs inside the image, uses pip with --require-hashes --no-deps.

The argument for trusting a warm install is in ``samebits.install.cache`` and
docs/explanation/install-cache.md. The interpreter of a PyPI-only lock's venv is found by
running candidates (``interpreter``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each name is imported from its module when it is first asked for (PEP 562), so that a
# command that only needs a constant of one module (``--find-links``' help, in every command's
# options) does not import every step of an install.
_FROM = {
    "host_platform": "samebits.host", "BytecodeReport": "samebits.install.bytecode",
    **dict.fromkeys(("Fetched", "Fetcher", "default_cache_dir", "fetch_all", "fetch_url",
                     "hash_problem"), "samebits.install.fetch"),
    **dict.fromkeys(("Interpreter", "Places", "find_interpreter"),
                    "samebits.install.interpreter"),
    **dict.fromkeys(("LINK_MODES", "LinkMode"), "samebits.install.place"),
    **dict.fromkeys(("VENV_LINKS", "InstallReport", "install_prefix", "python_line",
                     "venv_files"), "samebits.install.prefix"),
    "Sources": "samebits.install.sources",
}

if TYPE_CHECKING:
    from samebits.host import host_platform
    from samebits.install.bytecode import BytecodeReport
    from samebits.install.fetch import (
        Fetched,
        Fetcher,
        default_cache_dir,
        fetch_all,
        fetch_url,
        hash_problem,
    )
    from samebits.install.interpreter import Interpreter, Places, find_interpreter
    from samebits.install.place import LINK_MODES, LinkMode
    from samebits.install.prefix import (
        VENV_LINKS,
        InstallReport,
        install_prefix,
        python_line,
        venv_files,
    )
    from samebits.install.sources import Sources


def __getattr__(name: str) -> Any:
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def host_interpreter(line: str, given: str | None = None) -> str | None:
    """The path of a working Python ``line`` here (``given`` when passed: an error when it is
    not one), or None when there is none. See ``find_interpreter`` for the search."""
    from samebits.errors import InputError
    from samebits.install.interpreter import find_interpreter

    try:
        return find_interpreter(line, given).executable
    except InputError:
        if given:
            raise
        return None


__all__ = ["LINK_MODES", "VENV_LINKS", "BytecodeReport", "Fetched", "Fetcher",
           "InstallReport", "Interpreter", "LinkMode", "Places", "Sources", "default_cache_dir",
           "fetch_all", "fetch_url", "find_interpreter", "hash_problem", "host_interpreter",
           "host_platform", "install_prefix", "python_line", "venv_files"]
