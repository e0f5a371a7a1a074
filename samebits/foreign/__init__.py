"""The locks authors already have, read into samebits' ``Lock``: one reader per format.

    pixi.py          pixi.lock v6/v7 (py-rattler, pixi's own reader); --lock-env picks the env
    uvlock.py        uv.lock v1: the dependency graph walked for a target platform and Python
    pylock.py        pylock.toml (PEP 751), validated by packaging.pylock
    requirements.py  requirements.txt in pip's hash-checking mode; wheels chosen from the index
    explicit.py      conda explicit files (#md5 / #sha256), with conda-lock's "# pip" lines
    target.py        the platform/Python/glibc a universal lock is resolved for: markers, tags
    simpleindex.py   the simple repository API (PEP 691/503) and find-links folders
    model.py         ReadOptions in; Conversion out (the choices made, every package dropped)
    sources.py       not locks: what authors ship (requirements.txt; sources_files.py:
                     environment.yml, pyproject.toml, and any lock above as pins), read into
                     the ``Declared`` that ``samebits init`` drafts a spec from

``sniff(path, text)`` names the format from the content (the file name only breaks ties);
``read_foreign(path, text, options)`` converts. conda-lock files are not read here but by
``samebits.lock.model.parse_lock``; ``samebits.lock.read.load_lock`` is what every command calls.
"""

from __future__ import annotations

import re
from pathlib import Path

from samebits.errors import LockfileError, clip
from samebits.foreign.model import Conversion, Converted, Dropped, ReadOptions

__all__ = ["Conversion", "Converted", "Dropped", "ReadOptions", "read_foreign", "sniff",
           "FORMATS"]

FORMATS = ("conda-lock", "pixi.lock", "uv.lock", "pylock.toml", "requirements.txt",
           "conda explicit")
KNOWN = ("a conda-lock file, pixi.lock (v6, v7), uv.lock, pylock.toml, a requirements.txt "
         "with --hash, or a conda explicit file (@EXPLICIT)")


def sniff(path: Path, text: str) -> str:
    """The format of ``text`` (the file at ``path``), one of ``FORMATS``. Each reader's
    module is imported only when its test is reached (a conda-lock file, the common case,
    imports none: the requirements reader brings urllib and http.client)."""
    name = Path(path).name
    if name.endswith(("conda-lock.yml", "conda-lock.yaml")):
        return "conda-lock"
    from samebits.foreign.pixi import is_pixi

    if is_pixi(text):
        return "pixi.lock"
    if re.search(r"^(metadata|package):", text, re.M) or name.endswith((".yml", ".yaml")):
        return "conda-lock"  # or a broken one: conda-lock's parser says what is wrong
    from samebits.foreign.explicit import is_explicit

    if is_explicit(text):
        return "conda explicit"
    if name.endswith(".toml") or name == "uv.lock" or "[[package" in text:
        from samebits.foreign.pylock import load_toml_text

        try:
            data = load_toml_text(text, source=str(path))
        except LockfileError:
            if name.endswith(".toml") or name == "uv.lock":
                raise
        else:
            if "lock-version" in data:
                return "pylock.toml"
            if isinstance(data.get("package"), list):
                return "uv.lock"
    from samebits.foreign.requirements import is_hashed_requirements

    if is_hashed_requirements(text):
        return "requirements.txt"
    raise LockfileError(f"{path}: not a lock samebits reads", hint=f"samebits reads {KNOWN}")


def read_foreign(path: Path, text: str, *, fmt: str, options: ReadOptions,
                 source: str | None = None) -> Converted:
    """Convert ``text`` (of format ``fmt``, not conda-lock) into a ``Lock``. A document of
    the right syntax but the wrong shape (a number where a list of tables belongs, a table
    without its ``name``) is a LockfileError naming the file, whichever reader met it."""
    source = source or str(path)
    try:
        return _read_foreign(path, text, fmt=fmt, options=options, source=source)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise LockfileError(f"{source}: not a {fmt} samebits can read: a value of the wrong "
                            f"kind ({type(exc).__name__}: {clip(str(exc), 120)})") from None


def _read_foreign(path: Path, text: str, *, fmt: str, options: ReadOptions,
                  source: str) -> Converted:
    if fmt == "pixi.lock":
        from samebits.foreign.pixi import read_pixi

        return read_pixi(path, text, source=source, options=options)
    if fmt == "conda explicit":
        from samebits.foreign.explicit import read_explicit

        return read_explicit(text, source=source, options=options)
    if fmt == "requirements.txt":
        from samebits.foreign.requirements import read_requirements

        return read_requirements(path, text, source=source, options=options)
    from samebits.foreign.pylock import load_toml_text

    data = load_toml_text(text, source=source)
    if fmt == "pylock.toml":
        from samebits.foreign.pylock import read_pylock

        return read_pylock(path, data, source=source, options=options)
    if fmt == "uv.lock":
        from samebits.foreign.uvlock import read_uvlock

        return read_uvlock(path, data, source=source, options=options)
    raise LockfileError(f"{source}: format {fmt!r} is not one samebits converts")
