"""What a paper command wrote and what it read, for ``samebits paper init``: from its scratch
copy before and after the run, and from the files its Python processes opened.

    snapshot(root)    every file and link under the scratch copy (no link followed): its
                      kind, size, mtime and inode, by posix path
    written(...)      the files the command wrote: new, with a stat that moved, or opened for
                      writing (the hook's "w" lines, ``hook``, so a file rewritten with the same
                      bytes counts); by the leave-out rule (``left_out``) some are not outputs;
                      a file of the paper's own code (``is_code``) it changed is named
    reads(...)        the files it read, sorted by the inputs rule below

The leave-out rule (``left_out``): caches and temporary files are never outputs, whatever
the command does with them: any path under a folder named ``__pycache__``, ``.cache``,
``.ipynb_checkpoints``, ``wandb`` (a run folder named by its time and a random id),
``mlruns``, ``.pytest_cache``, ``.mypy_cache``, ``.ruff_cache``, ``.hypothesis``, ``.git``,
``.hg``, ``.svn``, ``.nox`` or ``.tox``; a file named ``*.pyc``, ``*.pyo``, ``*.tmp``,
``*.swp``, ``.DS_Store`` or ``events.out.tfevents.*`` (TensorBoard: named by the time, the
host and the pid); and a symbolic link (an output is a plain file, ``confine``). A Lightning
``lightning_logs/version_N`` folder is kept: in a fresh copy the first run is ``version_0``.

The code rule (``is_code``): a file is the paper's code when its suffix is one of
``CODE_SUFFIXES`` (Python, C/C++/CUDA sources, extensions, shell scripts, notebooks) or a
folder above it, inside the paper folder, holds an ``__init__.py`` (a Python package: its
files are code, whatever their suffix). A command that changes the bytes of such a file that
existed before it ran is refused by name: the tree attest records would not be the code that
ran.

The inputs rule (``reads``): a file the command read is an input (``[[inputs]]``: pinned by
its sha256) when it lies in the paper folder, existed before the command ran, is not code, not
an output of this command or a declared one, not the manifest, its lockfile or attestation,
not under the leave-out rule, and is a plain file there. A read of the environment (its folder
and its base interpreter's), of samebits' own private folders or of the system (``/proc``,
``/sys``, ``/dev``, ``/run``, ``/etc``, ``/usr``, ``/lib*``, ``/bin``, ``/sbin``, ``/tmp``,
``/var/tmp``) is not; any other file read from outside the paper folder (``~/.cache``, a
dataset under ``/data``) is named, never pinned: the manifest cannot pin what is not in the
paper folder. Only Python's opens are seen (``open``, ``io.open_code``, ``os.open``): a file a
C library opens itself (HDF5) or a program that is not Python reads is not.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from samebits._io import sha256_file

LEAVE_DIRS = ("__pycache__", ".cache", ".ipynb_checkpoints", "wandb", "mlruns", ".pytest_cache",
              ".mypy_cache", ".ruff_cache", ".hypothesis", ".git", ".hg", ".svn", ".nox", ".tox")
LEAVE_FILES = ("*.pyc", "*.pyo", "*.tmp", "*.swp", ".DS_Store", "events.out.tfevents.*")
CODE_SUFFIXES = (".py", ".pyi", ".pyx", ".pxd", ".pyc", ".pyo", ".so", ".pyd", ".c", ".cc",
                 ".cpp", ".cxx", ".h", ".hpp", ".cu", ".cuh", ".sh", ".ipynb")
SYSTEM = ("/proc", "/sys", "/dev", "/run", "/etc", "/usr", "/lib", "/lib32", "/lib64",
          "/libx32", "/bin", "/sbin", "/tmp", "/var/tmp")


@dataclass(frozen=True, slots=True, kw_only=True)
class Stat:
    link: bool
    size: int
    mtime_ns: int
    ino: int


Snapshot = Mapping[str, Stat]


@dataclass(frozen=True, slots=True, kw_only=True)
class Opens:
    """The files a run's Python processes opened (absolute paths), as the hook recorded."""

    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class Written:
    files: tuple[str, ...]                   # outputs: plain files written, not left out
    left_out: tuple[tuple[str, str], ...]    # (path, why) written but not outputs
    changed_code: tuple[str, ...]            # code that existed and whose bytes changed
    existed: tuple[str, ...]                 # outputs that were in the copy before it ran
    deleted: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reads:
    inputs: tuple[str, ...]                  # paper-folder paths: the data
    code: int                                # code files read (not inputs)
    outside: tuple[str, ...]                 # absolute: outside the folder and the system
    notes: tuple[str, ...] = ()


def snapshot(root: Path) -> dict[str, Stat]:
    """Every file and link under ``root`` by posix path (no link followed, folders not)."""
    out: dict[str, Stat] = {}
    base = str(root)
    for where, dirs, files in os.walk(base):
        rel_dir = os.path.relpath(where, base)
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(where, d)))]:
            st = os.lstat(os.path.join(where, name))
            rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
            out[rel] = Stat(link=os.path.islink(os.path.join(where, name)), size=st.st_size,
                            mtime_ns=st.st_mtime_ns, ino=st.st_ino)
    return dict(sorted(out.items()))


def read_opens(path: Path) -> Opens:
    """The hook's record: one JSON ``[mode, path]`` a line; a line cut short (a process
    killed mid-write) is skipped."""
    reads: set[str] = set()
    writes: set[str] = set()
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        return Opens()
    for line in text.splitlines():
        try:
            mode, name = json.loads(line)
        except (ValueError, TypeError):
            continue
        if isinstance(name, str):
            (writes if mode == "w" else reads).add(os.path.normpath(name))
    return Opens(reads=frozenset(reads), writes=frozenset(writes))


def left_out(rel: str) -> str | None:
    """Why a written path is not an output (the leave-out rule), or None when it is one."""
    parts = PurePosixPath(rel).parts
    for d in parts[:-1]:
        if d in LEAVE_DIRS:
            return f"under {d}/ (a cache or a run folder, never an output)"
    name = parts[-1] if parts else rel
    for pattern in LEAVE_FILES:
        if fnmatch.fnmatchcase(name, pattern):
            return f"{pattern} (a cache or temporary file, never an output)"
    return None


def is_code(rel: str, root: Path) -> bool:
    """The code rule: a code suffix, or a file inside a Python package of the paper folder."""
    path = PurePosixPath(rel)
    if path.suffix.lower() in CODE_SUFFIXES:
        return True
    return any((root / parent / "__init__.py").is_file() for parent in path.parents
               if str(parent) != ".")


def _inside(path: str, root: Path) -> str | None:
    """``path`` relative to ``root`` (posix), or None when it is not below it."""
    base = os.path.normpath(str(root))
    if path == base or not path.startswith(base + os.sep):
        return None
    return path[len(base) + 1:].replace(os.sep, "/")


def written(before: Snapshot, after: Snapshot, opens: Opens, *, root: Path,
            paper: Path) -> Written:
    """What one run wrote in its scratch copy ``root`` (``paper``: the folder it is a copy of,
    whose bytes are the ones before the run)."""
    hooked = {rel for p in opens.writes if (rel := _inside(p, root)) is not None}
    touched = sorted(rel for rel, st in after.items()
                     if rel not in before or before[rel] != st or rel in hooked)
    files: list[str] = []
    leave: list[tuple[str, str]] = []
    code: list[str] = []
    existed: list[str] = []
    for rel in touched:
        why = "a link (an output is a plain file)" if after[rel].link else left_out(rel)
        if rel in before and is_code(rel, root):
            original = paper / rel
            if original.is_file() and not original.is_symlink() and (
                    sha256_file(original) != sha256_file(root / rel)):
                code.append(rel)
            continue
        if why is not None:
            leave.append((rel, why))
            continue
        files.append(rel)
        if rel in before:
            existed.append(rel)
    deleted = tuple(sorted(set(before) - set(after)))
    return Written(files=tuple(files), left_out=tuple(leave), changed_code=tuple(code),
                   existed=tuple(existed), deleted=deleted)


def reads(opens: Iterable[Opens], *, root: Path, paper: Path, before: Snapshot,
          outputs: Collection[str], special: Collection[str],
          ignore: Sequence[Path]) -> Reads:
    """The files the runs read (``opens``, each run's, all in copies laid out as ``root``:
    pass each run's own root through ``relative``), sorted by the inputs rule (module doc).
    ``outputs``: paths written by the command or declared by the manifest; ``special``: the
    manifest, its lockfile and attestation; ``ignore``: the environment's folders and
    samebits' private ones."""
    inputs: set[str] = set()
    code: set[str] = set()
    outside: set[str] = set()
    notes: list[str] = []
    skip = [os.path.normpath(str(p)) for p in ignore]
    for run in opens:
        for path in sorted(run.reads):
            rel = _inside(path, root)
            if rel is None:
                if not any(path == s or path.startswith(s.rstrip(os.sep) + os.sep)
                           for s in [*skip, *SYSTEM]):
                    outside.add(path)
                continue
            if (rel in outputs or rel not in before or rel in special
                    or left_out(rel) is not None):
                continue
            if is_code(rel, root):
                code.add(rel)
            elif before[rel].link:
                notes.append(f"{rel}: read through a link: not pinned (an input is a plain "
                             "file in the paper folder)")
            elif not (paper / rel).is_file():
                notes.append(f"{rel}: read, but written by an earlier command that does not "
                             "declare it: declare it as that command's output")
            else:
                inputs.add(rel)
    return Reads(inputs=tuple(sorted(inputs)), code=len(code),
                 outside=tuple(sorted(outside)), notes=tuple(dict.fromkeys(notes)))


def relative(opens: Opens, *, root: Path, to: Path) -> Opens:
    """``opens`` of a run in ``root`` as if it had run in ``to`` (the runs' copies differ)."""
    def move(paths: frozenset[str]) -> frozenset[str]:
        out = set()
        for p in paths:
            rel = _inside(p, root)
            out.add(os.path.normpath(os.path.join(str(to), rel)) if rel is not None else p)
        return frozenset(out)

    return Opens(reads=move(opens.reads), writes=move(opens.writes))
