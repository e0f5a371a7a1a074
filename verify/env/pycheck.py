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
from typing import Any

from samebits.childenv import child_environ

CACHE_VERSION = 2  # 2: keys without the pyc's path
CHECK_TIMEOUT = 3600.0

CHECKER = r"""
import sys, marshal, _imp
E = sys.modules['_frozen_importlib_external']
CODE = type(compile('', '', 'exec'))
ATTRS = ('co_argcount', 'co_posonlyargcount', 'co_kwonlyargcount', 'co_flags',
         'co_firstlineno', 'co_stacksize', 'co_code', 'co_names', 'co_varnames',
         'co_freevars', 'co_cellvars', 'co_name', 'co_qualname', 'co_linetable',
         'co_lnotab', 'co_exceptiontable')
def key(x):
    t = type(x)
    if t is float:
        return ('f', x.hex())
    if t is complex:
        return ('c', x.real.hex(), x.imag.hex())
    if t is tuple:
        return ('t', tuple(key(y) for y in x))
    if t is frozenset:
        return ('s', frozenset(key(y) for y in x))
    if t is CODE:
        return ('k', id(x))
    return (t.__name__, x)
def same(a, b):
    if a == b and getattr(a, 'co_qualname', 0) == getattr(b, 'co_qualname', 0):
        codes = [(x, y) for x, y in zip(a.co_consts, b.co_consts) if type(x) is CODE]
        return all(same(x, y) for x, y in codes)
    for name in ATTRS:  # == says no: NaN constants are never equal to themselves
        if getattr(a, name, None) != getattr(b, name, None):
            return False
    if len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if type(x) is CODE or type(y) is CODE:
            if type(x) is not type(y) or not same(x, y):
                return False
        elif key(x) != key(y):
            return False
    return True
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
    head = ''
    if int.from_bytes(data[4:8], 'little') & 1:
        ok = data[8:16] == _imp.source_hash(E._RAW_MAGIC_NUMBER, source)
        head = ' hash-ok' if ok else ' hash-stale'
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


def interpreter_key(ident: Mapping[str, Any], magic: bytes | None) -> str:
    lib = ident.get("libpython") or {}
    parts = (ident.get("sha256") or "-", lib.get("sha256") or "-", ident.get("version") or "-",
             ident.get("cache_tag") or "-", magic.hex() if magic else "-")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


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


