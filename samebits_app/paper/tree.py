"""The paper's tree: the files its commands read, recorded so that "the code differs" is a fact.

``attest`` records, in the attestation's ``paper.tree`` and as one in-toto subject per file
(``paper/<path>``), every file of the paper folder the commands are given, each with its sha256
and size and, for a text file up to ``LINES_MAX`` bytes, a short digest of every line (so the
audit can say "1 line changed (line 71)" without the authors' copy of the file). Which files
(``rule``, recorded beside them):

    plain folder   every file under the paper folder
    git checkout   the files git tracks or would add (``git ls-files --cached --others
                   --exclude-standard``: .gitignore applies), plus the commit and every
                   uncommitted change (``git``: modified, added, deleted, untracked); a
                   folder its work tree ignores is a plain folder (git tracks none of it)

and in both, never (``LEFT_OUT``): the manifest (compared by its declarations, command by
command), the lockfile and the attestation (their own checks), the outputs folder, every
declared output and every ``[[inputs]]`` path (compared as outputs and as inputs), Python
environments (``is_environment``), caches (``CACHE_DIRS``, ``CACHE_FILES``) and what the
caller names (the audit's own folders, an
environment inside the paper folder). The scratch copy the commands run in holds exactly the
recorded files (``left_out`` names the rest for ``runner.prepare_workdir``), so nothing a
command reads goes unrecorded. Byte-stable: the same files give the same record; no mtimes,
no owners.

The audit (``check``) hashes, for each file the authors recorded, the reviewer's file at that
path, and copies only those into the run: a file the authors did not have is not read by the
rerun (a note names it); a file that differs or is missing is a reason ("code differs").
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samebits.errors import plural
from samebits_app.paper.manifest import PaperManifest

TREE_FORMAT = 1
CACHE_DIRS = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis",
              ".ipynb_checkpoints", ".nox", ".tox", ".git", ".hg", ".svn")
CACHE_FILES = ("*.pyc", "*.pyo", ".DS_Store")
LINES_MAX = 256 * 1024  # bytes: a larger file is recorded by its sha256 alone
LINE_DIGEST = 12        # hex digits of each line's sha256
GIT_TIMEOUT = 60.0
RULE_PLAIN = "every file under the paper folder"
RULE_GIT = "the files git tracks or would add (.gitignore applies)"
LEFT_OUT = ("not the manifest (compared by its declarations), the lockfile and the attestation "
            "(their own checks), the outputs folder, declared outputs and [[inputs]] paths "
            "(compared as outputs and inputs), Python environments (a folder with pyvenv.cfg "
            "or conda-meta/: verify env checks them), caches (" + ", ".join(
                [f"{d}/" for d in CACHE_DIRS] + list(CACHE_FILES)) + ")")
MAX_NAMED = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeFile:
    path: str                           # posix, relative to the paper folder
    sha256: str                         # of the bytes; of the target text for a link
    size: int = 0
    lines: tuple[str, ...] | None = None  # per-line digests, for a text file
    link: str | None = None             # a symbolic link: its target, as written

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sha256": self.sha256, "size": self.size}
        if self.link is not None:
            out["link"] = self.link
        if self.lines is not None:
            out["lines"] = list(self.lines)
        return out

    @classmethod
    def from_json(cls, path: str, data: Mapping[str, Any]) -> TreeFile:
        lines = data.get("lines")
        return cls(path=path, sha256=str(data.get("sha256")), size=int(data.get("size") or 0),
                   lines=tuple(str(x) for x in lines) if isinstance(lines, list) else None,
                   link=data.get("link"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Tree:
    files: tuple[TreeFile, ...]
    rule: str
    git: Mapping[str, Any] | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {"format": TREE_FORMAT, "rule": self.rule, "left_out": LEFT_OUT,
                "git": dict(self.git) if self.git is not None else None,
                "files": {f.path: f.to_json() for f in self.files}}

    def subjects(self) -> dict[str, str]:
        """in-toto subjects: ``paper/<path>`` -> sha256."""
        return {f"paper/{f.path}": f.sha256 for f in self.files}


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeCheck:
    """The reviewer's tree against the authors' record: what runs, and what differs."""

    tree: Tree                      # the files copied into the run (the reviewer's record)
    differences: tuple[str, ...]    # "code differs: train.py (...)", one per file
    notes: tuple[str, ...] = ()
    extra: tuple[str, ...] = field(default_factory=tuple)  # the reviewer's, not the authors'


# ------------------------------------------------------------------------------ which files

def _norm(p: Path) -> Path:
    return Path(os.path.normpath(p.absolute()))


def excluded(manifest: PaperManifest, skip: Sequence[Path] = ()) -> set[Path]:
    """The paths (absolute, normalised) never in the tree, whatever the rule."""
    folder = manifest.folder
    out = {_norm(p) for p in (manifest.file, manifest.lockfile, manifest.attestation,
                              manifest.outputs, *skip)}
    for cmd in manifest.commands:
        out.update(_norm(folder / cmd.cwd / o.path) for o in cmd.outputs if o.path)
    out.update(_norm(folder / i.path) for i in manifest.inputs)
    return out


def _cache(name: str, is_dir: bool) -> bool:
    if is_dir:
        return name in CACHE_DIRS
    return any(fnmatch.fnmatchcase(name, p) for p in CACHE_FILES)


def is_environment(path: Path) -> bool:
    """A Python environment (a venv's ``pyvenv.cfg``, a conda prefix's ``conda-meta/``): what
    the commands run with, checked by ``verify env``, not the paper's code."""
    return (path / "pyvenv.cfg").is_file() or (path / "conda-meta").is_dir()


def _walk(folder: Path, leave: set[Path]) -> list[str]:
    """Every file and link under ``folder`` but the excluded, the caches and environments (no
    link followed)."""
    out: list[str] = []
    root = _norm(folder)
    for where, dirs, files in os.walk(root):
        base = Path(where)
        dirs[:] = sorted(d for d in dirs if not _cache(d, True) and base / d not in leave
                         and not (base / d).is_symlink() and not is_environment(base / d))
        links = [d for d in os.listdir(base) if (base / d).is_symlink()
                 and (base / d).is_dir()]
        for name in sorted({*files, *links}):
            p = base / name
            if not _cache(name, False) and p not in leave:
                out.append(p.relative_to(root).as_posix())
    return sorted(out)


def _under(path: Path, leave: set[Path]) -> bool:
    return any(path == p or p in path.parents for p in leave)


def _git(folder: Path, *args: str) -> bytes | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        proc = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, env=env,
                              timeout=GIT_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _zsplit(data: bytes) -> list[str]:
    return [p for p in data.decode("utf-8", "surrogateescape").split("\0") if p]


def git_files(folder: Path) -> tuple[list[str], dict[str, Any]] | None:
    """(the files git tracks or would add, relative to ``folder``; the commit and the
    uncommitted changes), or None where ``folder`` is not in a git work tree git can read or
    is a folder that work tree ignores."""
    inside = _git(folder, "rev-parse", "--is-inside-work-tree")
    if inside is None or inside.strip() != b"true":
        return None
    if _git(folder, "check-ignore", "-q", ".") is not None:
        # a folder the work tree ignores (a paper unpacked into a checkout's build/): git
        # would list none of its files, and "the files git tracks" would be none at all
        return None
    listed = _git(folder, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if listed is None:
        return None
    head = _git(folder, "rev-parse", "--verify", "-q", "HEAD")
    commit = head.decode().strip() if head else None
    changes: dict[str, str] = {}
    if commit is not None:
        diff = _git(folder, "diff", "--relative", "--no-renames", "--name-status", "-z",
                    "HEAD", "--", ".")
        parts = _zsplit(diff or b"")
        words = {"M": "modified", "A": "added", "D": "deleted", "T": "type changed"}
        for status, path in zip(parts[::2], parts[1::2], strict=False):
            changes[path] = words.get(status[:1], status)
    others = _git(folder, "ls-files", "-z", "--others", "--exclude-standard")
    for path in _zsplit(others or b""):
        changes[path] = "untracked"
    files = []
    for path in _zsplit(listed):
        p = folder / path
        if p.is_dir() and not p.is_symlink():  # a submodule: its files, plainly
            files += [f"{path}/{q}" for q in _walk(p, set())]
        elif p.is_symlink() or p.exists():
            files.append(path)
    return sorted(set(files)), {"commit": commit, "changes": dict(sorted(changes.items()))}


def candidates(manifest: PaperManifest, skip: Sequence[Path] = ()
               ) -> tuple[list[str], str, dict[str, Any] | None]:
    """(the files the rule takes, which rule, git's commit and changes) for the paper folder."""
    folder = manifest.folder
    leave = excluded(manifest, skip)
    found = git_files(folder)
    if found is None:
        return _walk(folder, leave), RULE_PLAIN, None
    files, git = found
    root = _norm(folder)

    dirs = {d for f in files for d in (root / f).parents if root in d.parents}
    envs = {d for d in dirs if is_environment(d)}

    def keep(path: str) -> bool:
        parts = Path(path).parts
        return not any(_cache(n, i < len(parts) - 1) for i, n in enumerate(parts)) \
            and not _under(root / path, leave | envs)

    git["changes"] = {p: s for p, s in git["changes"].items() if keep(p)}
    return [f for f in files if keep(f)], RULE_GIT, git


# ------------------------------------------------------------------------------ records

def line_digests(data: bytes) -> tuple[str, ...] | None:
    """A short digest of every line of a text file (UTF-8, no NUL, up to ``LINES_MAX``)."""
    if len(data) > LINES_MAX or b"\0" in data:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return tuple(hashlib.sha256(line).hexdigest()[:LINE_DIGEST]
                 for line in data.splitlines())


def read_file(folder: Path, path: str) -> TreeFile | None:
    """One file's record, None when it is not there."""
    p = folder / path
    if p.is_symlink():
        target = os.readlink(p)
        return TreeFile(path=path, sha256=hashlib.sha256(target.encode()).hexdigest(),
                        size=len(target), link=target)
    if not p.is_file():
        return None
    data = p.read_bytes()
    return TreeFile(path=path, sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                    lines=line_digests(data))


def read_tree(folder: Path, paths: Iterable[str], *, rule: str,
              git: Mapping[str, Any] | None = None) -> Tree:
    files = (read_file(folder, p) for p in sorted(set(paths)))
    return Tree(files=tuple(f for f in files if f is not None), rule=rule, git=git)


def tree_of(manifest: PaperManifest, skip: Sequence[Path] = ()) -> Tree:
    """The authors' side: the paper folder's tree under its rule."""
    paths, rule, git = candidates(manifest, skip)
    return read_tree(manifest.folder, paths, rule=rule, git=git)


def parse_tree(data: Any) -> Tree | None:
    """The attested record, None when there is none (an attestation from before trees)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("files"), Mapping):
        return None
    files = tuple(TreeFile.from_json(str(p), f) for p, f in sorted(data["files"].items())
                  if isinstance(f, Mapping))
    return Tree(files=files, rule=str(data.get("rule", "")), git=data.get("git"))


def left_out(folder: Path, keep: Iterable[str]) -> list[Path]:
    """The paths under ``folder`` (whole folders where nothing in them is kept) that are not
    in ``keep``: what the scratch copy must leave out to hold exactly ``keep``."""
    keep = set(keep)
    dirs = {str(Path(k).parent.as_posix()) for k in keep}
    parents = {str(p.as_posix()) for k in keep for p in Path(k).parents}
    out: list[Path] = []
    root = _norm(folder)
    for where, subdirs, files in os.walk(root):
        base = Path(where)
        rel = base.relative_to(root).as_posix()
        kept_dirs = []
        for d in subdirs:
            r = d if rel == "." else f"{rel}/{d}"
            if (base / d).is_symlink():
                if r not in keep:
                    out.append(base / d)
            elif r in parents or r in dirs:
                kept_dirs.append(d)
            else:
                out.append(base / d)
        subdirs[:] = kept_dirs
        for name in files:
            r = name if rel == "." else f"{rel}/{name}"
            if r not in keep:
                out.append(base / name)
    return sorted(out)


# ------------------------------------------------------------------------------ the audit

def change_text(a: TreeFile, b: TreeFile) -> str:
    """How ``b`` (the reviewer's) differs from ``a`` (the authors'), in lines where both are
    text: "1 line changed (line 71)", "2 lines added, 1 removed (lines 10-12)"."""
    if a.link is not None or b.link is not None:
        return (f"a link to {b.link}" if b.link is not None else "a file") + ", the authors' " \
            + (f"a link to {a.link}" if a.link is not None else "a file")
    if a.lines is None or b.lines is None:
        return f"{b.size:,} bytes, the authors' {a.size:,}"
    ops = difflib.SequenceMatcher(a=a.lines, b=b.lines, autojunk=False).get_opcodes()
    changed = added = removed = 0
    starts: list[int] = []  # the reviewer's line number where each change starts
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        common = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        changed += common
        added += (j2 - j1) - common
        removed += (i2 - i1) - common
        starts.append(max(j1 + (1 if j2 > j1 else 0), 1))
    parts = [f"{plural(n, 'line')} {word}" for n, word in ((changed, "changed"),
                                                          (added, "added"),
                                                          (removed, "removed")) if n]
    if not parts:  # the same lines: line endings or a final newline
        return "the same lines, other bytes (line endings or the final newline)"
    shown = ", ".join(str(n) for n in starts[:MAX_NAMED]) + (
        f" and {len(starts) - MAX_NAMED} more places" if len(starts) > MAX_NAMED else "")
    return f"{', '.join(parts)} (at line {shown})" if len(starts) == 1 else \
        f"{', '.join(parts)} (at lines {shown})"


def check(attested: Tree, manifest: PaperManifest, skip: Sequence[Path] = ()) -> TreeCheck:
    """The reviewer's files at the authors' paths; every difference named, file by file."""
    folder = manifest.folder
    leave = excluded(manifest, skip)
    root = _norm(folder)
    differences: list[str] = []
    mine: list[TreeFile] = []
    for a in attested.files:
        if _under(root / a.path, leave):
            differences.append(f"code differs: {a.path} is in the authors' tree; the "
                               f"manifest here makes it an output or input")
            continue
        b = read_file(folder, a.path)
        if b is None:
            differences.append(f"code differs: {a.path} is missing (the authors' sha256 "
                               f"{a.sha256[:12]})")
            continue
        mine.append(b)
        if b.sha256 != a.sha256 or (a.link is None) != (b.link is None):
            differences.append(f"code differs: {a.path} (sha256 {b.sha256[:12]}, the "
                               f"authors' {a.sha256[:12]}): {change_text(a, b)}")
    theirs = set(attested.paths)
    paths, rule, git = candidates(manifest, skip)
    extra = tuple(p for p in paths if p not in theirs)
    notes = []
    if extra:
        named = ", ".join(extra[:MAX_NAMED]) + (f" and {len(extra) - MAX_NAMED} more"
                                                if len(extra) > MAX_NAMED else "")
        notes.append(f"{plural(len(extra), 'file')} of this paper folder "
                     f"{'is' if len(extra) == 1 else 'are'} not in the authors' tree and "
                     f"{'was' if len(extra) == 1 else 'were'} not given to the commands: "
                     + named)
    a_commit = (attested.git or {}).get("commit")
    b_commit = (git or {}).get("commit")
    if a_commit and b_commit and a_commit != b_commit:
        notes.append(f"the authors attested at git commit {a_commit[:12]}, this checkout is "
                     f"at {b_commit[:12]}: the files decide")
    tree = Tree(files=tuple(mine), rule=rule, git=git)
    return TreeCheck(tree=tree, differences=tuple(differences), notes=tuple(notes),
                     extra=extra)
