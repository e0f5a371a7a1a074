"""Running the environment's interpreter on bytecode, and remembering what it said.

``run_checker(executable, batch)`` starts ``executable -I -S -B -W ignore -c CHECKER`` (no site,
no start-up code of the environment, no bytecode written) and sends it, marshalled, a batch of
(pyc path, source path, optimisation level); for each it answers one line: ``same``,
``differs``, ``unmarshal``, ``nocompile`` or ``unreadable``, plus ``hash-ok`` / ``hash-stale``
for a hash-based pyc (the source hash checked by that interpreter's own ``_imp.source_hash``).
The answer is plain ASCII, parsed strictly: the verifier never unmarshals what the environment
sends back. ``same`` means the unmarshalled body equals a fresh ``compile`` of the source
(``==`` on code objects, every ``co_qualname``, and constants compared by bits so that NaN
equals itself).

``VerdictCache`` keeps verdicts in ``<cache>/bytecode/<interpreter key>.v1``, one
``<key> <verdict>`` line each, appended; a torn last line is ignored.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from samebits.childenv import child_environ
from samebits.pycompare import SAME

CACHE_VERSION = 2  # 2: keys without the pyc's path
CHECK_TIMEOUT = 3600.0

CHECKER = r"""
import sys, marshal
""" + SAME + r"""
out = []
for i, (pyc, src, opt) in enumerate(marshal.loads(sys.stdin.buffer.read())):
    try:
        with open(pyc, 'rb') as f:
            data = f.read()
        with open(src, 'rb') as f:
            source = f.read()
    except OSError:
        out.append('%d unreadable' % i)
        continue
    head = hash_head(data, source)
    try:
        code = marshal.loads(data[16:])
        if type(code) is not CODE:
            raise ValueError
    except Exception:
        out.append('%d unmarshal%s' % (i, head))
        continue
    try:
        fresh = compile(source, '<samebits>', 'exec', dont_inherit=True, optimize=opt)
    except Exception:
        out.append('%d nocompile%s' % (i, head))
        continue
    out.append('%d %s%s' % (i, 'same' if same(code, fresh) else 'differs', head))
sys.stdout.write('\n'.join(out) + '\nend\n')
"""
VERDICTS = frozenset({"same", "differs", "unmarshal", "nocompile", "unreadable"})


class Handed(NamedTuple):
    """Verdicts from the compile of ``samebits install`` (``samebits.install.bytecode``): the
    compiling interpreter's ``Interpreter.identity()`` and, per pyc it wrote, (source sha256,
    optimisation level, pyc sha256, verdict), each the checker's own answer for those bytes."""

    identity: Mapping[str, Any]
    verdicts: Sequence[tuple[str, int, str, str]]


class VerdictCache:
    """Verdicts by key, in one append-only file per interpreter (a torn last line is ignored)."""

    def __init__(self, folder: Path | None, interpreter_key: str) -> None:
        self.file = folder / f"{interpreter_key[:32]}.v{CACHE_VERSION}" if folder else None
        self.known: dict[str, str] = {}
        if self.file is None:
            return
        try:
            text = self.file.read_text(encoding="ascii", errors="replace")
        except OSError:
            return
        for line in text.split("\n"):
            key, _, verdict = line.partition(" ")
            if len(key) == 64 and verdict.split(" ")[0] in VERDICTS:
                self.known[key] = verdict

    def add(self, new: Mapping[str, str]) -> None:
        if self.file is None or not new:
            return
        text = "".join(f"{k} {v}\n" for k, v in new.items())
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, text.encode("ascii"))
            finally:
                os.close(fd)
        except OSError:
            pass  # a read-only cache: the next run compiles again


def _key(binary: str | None, libpython: str | None, version: str | None,
         cache_tag: str | None, magic_hex: str | None) -> str:
    parts = (binary, libpython, version, cache_tag, magic_hex)
    return hashlib.sha256("\0".join(p or "-" for p in parts).encode()).hexdigest()


def interpreter_key(ident: Mapping[str, Any], magic: bytes | None) -> str:
    lib = ident.get("libpython") or {}
    return _key(ident.get("sha256"), lib.get("sha256"), ident.get("version"),
                ident.get("cache_tag"), magic.hex() if magic else None)


def compiler_key(identity: Mapping[str, Any]) -> str | None:
    """``interpreter_key`` of the interpreter ``samebits install`` compiled with, from its
    ``Interpreter.identity()``; None when a part is unknown (no verdict is then handed on)."""
    binary, magic = identity.get("binary_sha256"), identity.get("magic")
    if not binary or not magic or not identity.get("version") or not identity.get("cache_tag"):
        return None
    return _key(binary, identity.get("libpython_sha256"), identity["version"],
                identity["cache_tag"], bytes.fromhex(magic).hex())


def verdict_key(source_sha256: str, opt: int, pyc_sha256: str) -> str:
    """What a verdict depends on besides the interpreter: the two files' bytes and the
    optimisation level (not their paths: a compile's result does not depend on the name it
    is given but for ``co_filename``, which the check ignores)."""
    return hashlib.sha256("\0".join((source_sha256, str(opt), pyc_sha256)).encode()).hexdigest()


Runner = Callable[[str, Sequence[tuple[bytes, bytes, int]]], list[str] | str]


def run_checker(executable: str, batch: Sequence[tuple[bytes, bytes, int]]) -> list[str] | str:
    """Verdicts for one batch from the environment's interpreter, or why there are none."""
    try:
        proc = subprocess.run([executable, "-I", "-S", "-B", "-W", "ignore", "-c", CHECKER],
                              input=marshal.dumps(list(batch), 4), capture_output=True,
                              timeout=CHECK_TIMEOUT, env=child_environ(os.environ))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{executable}: {exc}"
    lines = proc.stdout.decode("ascii", "replace").split("\n")
    if proc.returncode != 0 or len(lines) < 2 or lines[-2] != "end":
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return f"{executable} exited {proc.returncode}: {tail[0][:200]}"
    out = [""] * len(batch)
    for line in lines[:-2]:
        i, _, verdict = line.partition(" ")
        if i.isdigit() and int(i) < len(batch) and verdict.split(" ")[0] in VERDICTS:
            out[int(i)] = verdict
    if "" in out:
        return f"{executable}: incomplete answer"
    return out


