"""A venv's own files: what ``python -m venv``, ``virtualenv`` and ``uv venv`` write.

``pyvenv.cfg`` says which tool made the venv (``virtualenv = 20.39.1``, ``uv = 0.13.9``; neither
for ``python -m venv``), and ``is_scaffold(prefix_relative_path, producer(cfg))`` says whether a
path is that tool's scaffolding. The expected set is keyed on that tool only, so an extra file
in ``bin/`` is still unowned. It is the union over the tool's releases: virtualenv's C-shell
activator gained ``bin/deactivate.csh`` (pypa/virtualenv#3260, September 2026; 21.15.13 writes
it, 20.39.1 does not).

Scaffolding has no record with a hash. What can be checked without a reference is:

- files with fixed contents (``.gitignore``: comments and ``*``; ``CACHEDIR.TAG``; uv's empty
  ``.lock``; virtualenv's ``_virtualenv.pth``), checked (``fixed_content``);
- virtualenv's ``_virtualenv.py`` (which uv writes too, for a Python before 3.10), which runs
  at every start-up: its sha256 against the releases this samebits knows
  (``KNOWN_VIRTUALENV_PY``); another release's is a note, not a finding;
- everything else (activation scripts, ``pyvenv.cfg``): recorded in the environment digest,
  compared only against a reference report (``--against``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

CACHEDIR_TAG = b"Signature: 8a477f597d28d172789f06886806bc55"
_PYTHON = r"bin/(python|python3|python3\.\d+)"
_VENV = re.compile(rf"^(pyvenv\.cfg|lib64|\.gitignore|{_PYTHON}|bin/\U0001d70bthon"
                   r"|bin/(activate|activate\.csh|activate\.fish|Activate\.ps1))$")
_VIRTUALENV = re.compile(
    rf"^(pyvenv\.cfg|lib64|\.gitignore|CACHEDIR\.TAG|{_PYTHON}"
    r"|bin/(activate|activate\.csh|activate\.fish|activate\.nu|activate\.ps1|activate\.xsh"
    r"|activate_this\.py|activate\.bat|deactivate\.bat|deactivate\.csh|pydoc\.bat)"
    r"|lib/python3\.\d+/site-packages/_virtualenv\.(pth|py))$")
# uv writes virtualenv's _virtualenv.py/.pth too, for Python before 3.10 only (its distutils
# patch): a uv venv of a 2022 paper's Python 3.9 was DRIFT on two unowned files before
_UV = re.compile(
    rf"^(pyvenv\.cfg|lib64|\.gitignore|\.lock|CACHEDIR\.TAG|{_PYTHON}"
    r"|bin/(activate|activate\.bat|activate\.csh|activate\.fish|activate\.nu|activate\.ps1"
    r"|activate\.xsh|activate_this\.py|deactivate\.bat|pydoc\.bat)"
    r"|lib/python3\.\d+/site-packages/_virtualenv\.(pth|py))$")

# sha256 of virtualenv's _virtualenv.py (it runs at every start-up of the venv), by release.
KNOWN_VIRTUALENV_PY: Mapping[str, str] = {
    "02943e192823d75212f206e1f2991ac572119882683a95dfbb7a1b913d7b14b5": "20.39.1",
    "cfb3db86aaa53bb62b5ff764970bec2d71c9228590a0ebec57f6ec926cc0bf1a": "uv 0.13.9",
}


def read_pyvenv_cfg(prefix: Path) -> dict[str, str]:
    """``pyvenv.cfg`` as key -> value (keys lower-cased); {} when there is none."""
    out: dict[str, str] = {}
    try:
        text = (prefix / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out.setdefault(key.strip().lower(), value.strip())
    return out


def producer(cfg: Mapping[str, str]) -> str:
    """Which tool made the venv: ``virtualenv``, ``uv`` or ``venv`` (``python -m venv``)."""
    if "virtualenv" in cfg:
        return "virtualenv"
    if "uv" in cfg:
        return "uv"
    return "venv"


def is_scaffold(rel: str, made_by: str) -> bool:
    pattern = {"virtualenv": _VIRTUALENV, "uv": _UV}.get(made_by, _VENV)
    return pattern.match(rel) is not None


def fixed_content(rel: str, made_by: str) -> tuple[str, bytes] | None:
    """(how the check reads, the bytes expected) for scaffolding whose contents are fixed."""
    name = rel.rsplit("/", 1)[-1]
    if rel == ".gitignore":
        return "gitignore", b"*"
    if rel == ".lock" and made_by == "uv":
        return "exact", b""
    if rel == "CACHEDIR.TAG":
        return "starts", CACHEDIR_TAG
    if name == "_virtualenv.pth":
        return "exact", b"import _virtualenv"
    return None


def content_problem(data: bytes, rule: tuple[str, bytes]) -> str | None:
    how, want = rule
    if how == "gitignore":  # comments and "*" only: the folder is ignored, nothing else said
        lines = [ln.strip() for ln in data.splitlines()]
        if any(ln and not ln.startswith(b"#") and ln != b"*" for ln in lines) \
                or b"*" not in lines:
            return "expected comments and a single '*'"
        return None
    if how == "exact" and data.rstrip(b"\n") != want.rstrip(b"\n"):
        return f"expected {want[:60]!r}"
    if how == "starts" and not data.startswith(want):
        return f"expected a file starting with {want!r}"
    return None
