"""Conda prefix placeholders, replaced the way rattler (and conda) replace them. Pure.

A conda package built in ``/opt/conda-bld/.../_h_env_placehold_placehold...`` records that path
in ``info/paths.json`` as the ``prefix_placeholder`` of each file that contains it:

- ``text`` files get every occurrence replaced by the install prefix. A first line ``#!...``
  is handled on its own: when the new shebang is over 127 bytes (Linux's limit) or the prefix
  has a space, ``#!/path/to/python3.12 -E`` becomes the ``/bin/sh`` trampoline
  ``#!/bin/sh\\n'''exec' "/path/to/python3.12" -E "$0" "$@" #'''`` and any other interpreter
  ``#!/usr/bin/env NAME ...``;
- ``binary`` files keep their length: inside each NUL-terminated string that holds the
  placeholder, the placeholder is replaced and the string padded with NULs up to its old end.
  A prefix longer than the placeholder cannot fit: an error, before anything is written.

Only the UTF-8 form of the placeholder is replaced (conda's rule; rattler also replaces
UTF-16/32 forms where a package records them, which no package in a samebits lock does yet).
"""

from __future__ import annotations

import re

LINUX_SHEBANG_MAX = 127
_SHEBANG = re.compile(r"^(#!(?:[ ]*)(/(?:\\ |[^ \n\r\t])*)(.*))$", re.DOTALL)
_PYTHON = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")


class PlaceholderError(ValueError):
    """The prefix cannot replace the placeholder (a binary file and a longer prefix)."""


def _to_env(shebang: str) -> str:
    m = _SHEBANG.match(shebang)
    if m is None:
        return shebang
    path, rest = m.group(2), m.group(3)
    exe = path.rsplit("/", 1)[-1]
    if _PYTHON.match(exe):
        return f"#!/bin/sh\n'''exec' \"{path}\"{rest} \"$0\" \"$@\" #'''"
    return f"#!/usr/bin/env {exe}{rest}"


def replace_shebang(line: str, placeholder: str, prefix: str) -> str:
    """The first line of a text file with ``placeholder`` replaced by ``prefix`` (no newline)."""
    if " " in prefix:
        if placeholder not in line:
            return line
        return _to_env(line).replace(placeholder, prefix)
    new = line.replace(placeholder, prefix)
    if not new.startswith("#!") or len(new.encode()) <= LINUX_SHEBANG_MAX:
        return new
    return _to_env(new)


def replace_text(data: bytes, placeholder: str, prefix: str) -> bytes:
    """A text file with every occurrence of ``placeholder`` replaced by ``prefix``."""
    old, new = placeholder.encode(), prefix.encode()
    if not old:
        return data
    if not data.startswith(b"#!"):
        return data.replace(old, new)
    end = data.find(b"\n")
    end = len(data) if end < 0 else end + 1
    first = data[:end]
    newline = first.endswith(b"\n")
    line = first[:-1] if newline else first
    shebang = replace_shebang(line.decode("utf-8", "surrogateescape"), placeholder, prefix)
    head = shebang.encode("utf-8", "surrogateescape") + (b"\n" if newline else b"")
    return head + data[end:].replace(old, new)


def replace_binary(data: bytes, placeholder: str, prefix: str) -> bytes:
    """A binary file with the placeholder replaced inside each C string, length kept."""
    old, new = placeholder.encode(), prefix.encode()
    if not old or old not in data:
        return data
    if len(new) > len(old):
        raise PlaceholderError(f"the install path ({len(new)} bytes) is longer than the "
                               f"package's placeholder ({len(old)} bytes), which a binary "
                               "file cannot grow")
    out = bytearray()
    pos = 0
    search = 0
    while (first := data.find(old, search)) >= 0:
        nul = data.find(b"\0", first + len(old))
        end = len(data) if nul < 0 else nul
        out += data[pos:first]
        string = data[first:end]
        count = string.count(old)
        out += string.replace(old, new)
        out += b"\0" * (count * (len(old) - len(new)))
        pos = search = end
    out += data[pos:]
    return bytes(out)
