"""The interpreter a PyPI-only lock's venv runs on: found by running candidates, never by name.

``python3.12`` on PATH can be a pyenv shim that runs nothing until a version is selected
(``pyenv: python3.12: command not found``, exit 127). So every candidate is run
(``-I -S -c``, 30 s at most) and kept only when it starts and reports the lock's ``X.Y``:

1. ``--python`` when given (then nothing else: a wrong one is an error, not a fallback);
2. every ``pythonX.Y`` on PATH, in PATH order;
3. ``$PYENV_ROOT/versions/*/bin/pythonX.Y`` (``~/.pyenv`` by default), newest first;
4. ``/usr/local/bin/pythonX.Y``, ``/usr/bin/pythonX.Y``;
5. ``uv python find X.Y``, where uv is installed (it is a samebits dependency).

When none runs, the error lists every path tried and why each was refused. ``Places`` (where
to look) is read from the environment once by the caller and passed in, so tests can build one.

``probe`` is also how the installer learns whether an environment's own interpreter runs here
and what it is (version, cache tag, magic number, binary and libpython), for bytecode.
``probe_known`` answers that for bytecode from what an earlier probe of the very same binary
and libpython said, proved by their stats (``FACTS``), and probes and hashes them again
otherwise.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from samebits._io import atomic_write, sha256_file, stat_key
from samebits.errors import InputError

PROBE_TIMEOUT = 30.0
# CACHE/interpreters/<sha256 of the binary's real path>[:32].json: what ``probe`` said of one
# binary and its ``identity``, with the stats of the binary and libpython as they were then
FACTS = "interpreters"
FACTS_KIND = "samebits.interpreter"
PROBE = (
    "import sys, json, importlib.util, os, sysconfig\n"
    "lib = None\n"
    "if sysconfig.get_config_var('Py_ENABLE_SHARED'):\n"
    "    d, n = sysconfig.get_config_var('LIBDIR'), sysconfig.get_config_var('LDLIBRARY')\n"
    "    lib = os.path.join(d, n) if d and n and os.path.exists(os.path.join(d, n)) else None\n"
    "print(json.dumps({'executable': sys.executable, 'version': '%d.%d.%d' % "
    "sys.version_info[:3], 'line': '%d.%d' % sys.version_info[:2], 'cache_tag': "
    "sys.implementation.cache_tag, 'magic': importlib.util.MAGIC_NUMBER.hex(), "
    "'libpython': lib, 'machine': os.uname().machine}))\n"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Interpreter:
    """What a Python that ran here said about itself."""

    executable: str
    version: str
    line: str
    cache_tag: str | None
    magic: str
    libpython: str | None
    machine: str

    def identity(self) -> dict[str, str | None]:
        """Everything a compile depends on: version, cache tag, magic and the sha256 of the
        binary (and of libpython, where the compiler lives in a shared build)."""
        return {"version": self.version, "cache_tag": self.cache_tag, "magic": self.magic,
                "binary_sha256": sha256_file(os.path.realpath(self.executable)),
                "libpython_sha256": sha256_file(self.libpython) if self.libpython else None}


@dataclass(frozen=True, slots=True, kw_only=True)
class Places:
    """Where to look for an interpreter (see the module docstring)."""

    path: tuple[str, ...] = ()
    pyenv_root: str | None = None
    fixed: tuple[str, ...] = ("/usr/local/bin", "/usr/bin")
    uv: str | None = None

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> Places:
        env = dict(os.environ if environ is None else environ)
        home = env.get("HOME") or os.path.expanduser("~")
        return cls(path=tuple(p for p in env.get("PATH", "").split(os.pathsep) if p),
                   pyenv_root=env.get("PYENV_ROOT") or os.path.join(home, ".pyenv"),
                   uv=_uv_binary())


@dataclass(frozen=True, slots=True)
class Tried:
    path: str
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Search:
    """The outcome of looking: the interpreter found, and every candidate refused before it."""

    found: Interpreter | None
    tried: tuple[Tried, ...] = field(default=())


def _uv_binary() -> str | None:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return None



def probe(python: str, *, env: dict[str, str] | None = None) -> Interpreter | str:
    """Run ``python`` isolated and without site; what it is, or why it does not run here."""
    try:
        proc = subprocess.run([python, "-I", "-S", "-c", PROBE], capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT, env=env, cwd="/")
    except FileNotFoundError:
        return "not found"
    except PermissionError:
        return "not executable"
    except OSError as exc:
        return f"cannot run: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        return f"did not answer within {PROBE_TIMEOUT:g} s"
    if proc.returncode != 0:
        tail = _quote(proc.stderr or proc.stdout)
        return f"exit {proc.returncode}" + (f": {tail}" if tail else "")
    try:
        doc = json.loads(proc.stdout.strip().splitlines()[-1])
        return Interpreter(executable=doc["executable"], version=doc["version"],
                           line=doc["line"], cache_tag=doc["cache_tag"], magic=doc["magic"],
                           libpython=doc["libpython"], machine=doc["machine"])
    except (ValueError, KeyError, IndexError, TypeError):
        return f"printed something that is not Python's answer: {_quote(proc.stdout, 60)!r}"


def _quote(text: str, limit: int = 80) -> str:
    """What a program said, on one line, at most ``limit`` characters."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", name))


def candidates(line: str, places: Places) -> list[tuple[str, str]]:
    """(path, where it came from) in the order they are tried, each path once."""
    exe = f"python{line}"
    out: list[tuple[str, str]] = [(os.path.join(d, exe), "PATH") for d in places.path]
    if places.pyenv_root:
        versions = Path(places.pyenv_root) / "versions"
        try:
            names = sorted(os.listdir(versions), key=_version_key, reverse=True)
        except OSError:
            names = []
        out += [(str(versions / n / "bin" / exe), "pyenv") for n in names
                if (versions / n / "bin" / exe).exists()]
    out += [(os.path.join(d, exe), "system") for d in places.fixed]
    seen: set[str] = set()
    unique = []
    for path, where in out:
        real = os.path.realpath(path) if os.path.exists(path) else path
        if real not in seen and (where != "PATH" or os.path.exists(path)):
            seen.add(real)
            unique.append((path, where))
    return unique


def search(line: str, places: Places) -> Search:
    """The first candidate that runs and is Python ``line``, and every one refused before it."""
    tried: list[Tried] = []
    for path, where in candidates(line, places):
        if not os.path.exists(path):
            tried.append(Tried(path, "not there"))
            continue
        got = probe(path)
        if isinstance(got, str):
            tried.append(Tried(path, f"{got} ({where})"))
        elif got.line != line:
            tried.append(Tried(path, f"is Python {got.version}, not {line} ({where})"))
        else:
            return Search(found=got, tried=tuple(tried))
    if places.uv:
        cmd = f"uv python find {line}"
        try:
            proc = subprocess.run([places.uv, "python", "find", line], capture_output=True,
                                  text=True, timeout=PROBE_TIMEOUT)
            out = proc.stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            proc, out = None, str(exc)
        if proc is None or proc.returncode != 0 or not out:
            why = _quote(out if proc is None else proc.stderr)
            tried.append(Tried(cmd, f"exit {proc.returncode if proc else '-'}: {why}"))
        else:
            got = probe(out)
            if isinstance(got, str) or got.line != line:
                why = got if isinstance(got, str) else f"is Python {got.version}"
                tried.append(Tried(f"{out} ({cmd})", why))
            else:
                return Search(found=got, tried=tuple(tried))
    return Search(found=None, tried=tuple(tried))


def find_interpreter(line: str, given: str | None = None, *,
                     places: Places | None = None, facts: Path | None = None) -> Interpreter:
    """A working Python ``line`` here (``given`` when passed), or an error naming every path
    tried and why it was refused. ``facts``: where ``probe_known`` keeps what ``given`` said
    of itself (a real binary's answer, proved by its stat; a shim is always run)."""
    if given:
        known = probe_known(given, facts) if facts is not None else probe(given)
        got = known if isinstance(known, (str, Interpreter)) else known[0]
        if isinstance(got, str):
            raise InputError(f'--python "{given}": {got}')
        if got.line != line:
            raise InputError(f'--python "{given}": is Python {got.version}, the lock needs '
                             f"Python {line}")
        return got
    result = search(line, places or Places.from_environ())
    if result.found is not None:
        return result.found
    lines = [f"{t.path}: {t.why}" for t in result.tried] or ["(no candidate at all)"]
    raise InputError(f"no working Python {line} interpreter here; tried:\n  "
                     + "\n  ".join(lines),
                     hint=f"pass --python /path/to/python{line}, or install one "
                     f"(uv python install {line})")


def probe_known(python: str, facts: Path | None, *, env: dict[str, str] | None = None
                ) -> tuple[Interpreter, dict[str, str | None]] | str:
    """``probe(python, env=env)`` and the ``identity`` of what answered (the sha256 of its
    binary and libpython: 0.04 s of a warm install, with the probe's start), or why it does
    not run here. Where ``facts`` (a cache folder) remembers them for the same binary and
    libpython, with stats that are still the remembered ones to the nanosecond (device, inode,
    size, mtime, ctime, mode: ``verify.env.statmemo``'s rule, which a write, a chmod or a
    reinstall in place all break), that is the answer, and nothing runs. Only for a real
    binary: ``python`` is resolved through its links first, so a pyenv shim (a script whose
    answer depends on the environment) is never taken for the interpreter it runs. The
    environment's own verify runs it all the same (``verify.env.interpreter.probe``)."""
    binary = os.path.realpath(python)
    memo = None
    if facts is not None:
        name = hashlib.sha256(binary.encode()).hexdigest()[:32]
        memo = facts / FACTS / f"{name}.json"
        got = _remembered(memo, python, binary)
        if got is not None:
            return got
    found = probe(python, env=env)
    if isinstance(found, str) or memo is None:
        return found if isinstance(found, str) else (found, found.identity())
    before = _stats(binary, found.libpython)  # before hashing: a change meanwhile shows
    identity = found.identity()
    if before is not None and os.path.realpath(found.executable) == binary:
        doc = {"format": 1, "kind": FACTS_KIND, "binary": binary, "stats": before,
               "answer": {k: getattr(found, k) for k in _ANSWER}, "identity": identity}
        with contextlib.suppress(OSError):  # a read-only cache: probed again next time
            atomic_write(memo, json.dumps(doc, sort_keys=True) + "\n")
    return found, identity


_ANSWER = ("version", "line", "cache_tag", "magic", "libpython", "machine")


def _stats(binary: str, libpython: str | None) -> list[list[int] | None] | None:
    try:
        return [list(stat_key(os.stat(binary))),
                list(stat_key(os.stat(libpython))) if libpython else None]
    except OSError:
        return None


def _remembered(memo: Path, python: str, binary: str
                ) -> tuple[Interpreter, dict[str, str | None]] | None:
    try:
        doc = json.loads(memo.read_bytes())
        if doc.get("format") != 1 or doc.get("kind") != FACTS_KIND or doc["binary"] != binary:
            return None
        answer = {k: doc["answer"][k] for k in _ANSWER}
        if _stats(binary, answer["libpython"]) != doc["stats"]:
            return None
        found = Interpreter(executable=python, **answer)
        identity = {str(k): (None if v is None else str(v)) for k, v in doc["identity"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return found, identity
