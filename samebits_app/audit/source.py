"""Where a paper lives: a git repository at one commit, or a deposited archive and its sha256.

    samebits audit URL --commit SHA [--path SUBDIR]   git (https://, ssh://, file://, host:path)
    samebits audit URL --ref NAME [--path SUBDIR]     a branch or tag, resolved once
    samebits audit URL --sha256 H [--path SUBDIR]     a .zip or tar archive (``deposit``)

A commit is fetched alone, never a branch: ``git init``, ``git fetch --depth 1 --no-tags URL
SHA``, ``git checkout --detach FETCH_HEAD``, and ``HEAD`` must then be SHA. ``--ref`` is
resolved once with ``git ls-remote`` (a branch or a tag, the peeled commit of an annotated
tag) and said; the audit then fetches that commit like any other and records both. Every git
call has a timeout and runs with ``GIT_TERMINAL_PROMPT=0`` (no password prompt: a private
repository needs a credential helper or an ssh agent), ssh in batch mode, no hooks.

The cache (``CACHE``: ``--cache-dir``, default ``samebits.host.cache_dir()``):

    CACHE/sources/git/<commit>/              the checkout (its .git holds that one commit)
    CACHE/sources/archives/<sha256>/<name>   a deposit, proved by its sha256 (``deposit``)
    CACHE/sources/unpacked/<sha256>/         its tree, unpacked by the archive rules
    CACHE/sources/locks/<entry>/seal.lock    one flock per entry

An entry is built in a folder beside its final name and renamed into place
(``samebits.staging.staged_dir``), under an exclusive ``flock`` on its lock
(``samebits.install.seal.entry_lock``, the install cache's own), so processes on one machine
or on the nodes of a cluster sharing the cache (``flock`` over NFS is a POSIX lock) fetch each
commit once: the others wait, then use it. A checkout is used again only while ``HEAD`` is its
commit and ``git status`` finds nothing changed or added; otherwise it is fetched again.

``Source.record()`` is what the report and the reviewer's attestation name: the URL (without
``user:password``), the commit (and the ref it came from) or the sha256, and the path.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from samebits.errors import InputError, SamebitsError, ToolError, UnreachableError
from samebits.net import public_url

COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1, or a SHA-256 repository's
SHA256 = re.compile(r"[0-9a-f]{64}")
FETCH_TIMEOUT = 900.0   # seconds for one git fetch (or one download) of a paper
GIT_TIMEOUT = 60.0      # seconds for any other git call
LOCK_SLACK = 120.0      # a lock held longer than a fetch may take is an error, not a hang
SOURCES = "sources"

Say = Callable[[str], None]

# git's words for a commit the remote does not have (upload-pack, http, older servers)
_MISSING = ("not our ref", "unadvertised object", "couldn't find remote ref",
            "no such remote ref", "did not send all necessary objects")
_NOT_THERE = ("does not appear to be a git repository", "not found", "authentication failed",
              "terminal prompts disabled", "could not read username", "permission denied",
              "could not read from remote repository")
_NETWORK = ("could not resolve host", "connection refused", "connection timed out",
            "failed to connect", "network is unreachable", "connection reset",
            "temporary failure in name resolution", "could not resolve hostname")


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """A paper's origin and where it now lies: ``root`` (the checkout or the unpacked tree)
    and ``folder`` (``root/path``, the paper folder)."""

    kind: Literal["git", "archive"]
    url: str                   # without user:password
    root: Path
    commit: str | None = None
    ref: str | None = None     # the --ref it was resolved from
    sha256: str | None = None
    path: str | None = None
    how: str = "fetched"       # or "in the cache"

    @property
    def folder(self) -> Path:
        return self.root / self.path if self.path else self.root

    def record(self) -> dict[str, Any]:
        """What the report and the reviewer's attestation name (byte-stable: no local path)."""
        return {"kind": self.kind, "url": self.url, "commit": self.commit, "ref": self.ref,
                "sha256": self.sha256, "path": self.path}

    def text(self) -> str:
        where = (f"commit {self.commit}" + (f" (--ref {self.ref})" if self.ref else "")
                 if self.kind == "git" else f"sha256 {self.sha256}")
        return f"{self.url} at {where}" + (f", folder {self.path}" if self.path else "")


def source_words(record: Mapping[str, Any]) -> list[str]:
    """The command-line words that name a recorded source: URL --commit C [--path P]."""
    words = [str(record["url"])]
    words += ["--commit", str(record["commit"])] if record.get("commit") else [
        "--sha256", str(record["sha256"])]
    return words + (["--path", str(record["path"])] if record.get("path") else [])


def looks_like_url(text: str | None) -> bool:
    """Whether audit's first argument is a URL (``scheme://...`` or git's ``host:path``)
    rather than a folder or a lock."""
    if not text:
        return False
    if "://" in text:
        return True
    return re.fullmatch(r"[\w.-]+@[\w.-]+:[^/].*", text) is not None


def check_path(path: str | None) -> str | None:
    """``--path``: a folder inside the source, '/'-separated, never absolute or with '..'."""
    if path is None or path.strip("/") in ("", "."):
        return None
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts:
        raise InputError(f"--path {path}: a folder inside the repository or archive (relative, "
                         "no '..')")
    return p.as_posix().strip("/")


def check_commit(commit: str, *, flag: str = "--commit") -> str:
    value = commit.strip().lower()
    if not COMMIT.fullmatch(value):
        raise InputError(f"{flag} {commit}: not a full commit id (40 hex digits)",
                         hint="an abbreviated id cannot be fetched by itself: `git rev-parse "
                         "ABBREV` in a clone, or `git ls-remote URL` for the branches' commits")
    return value


def open_source(url: str, *, commit: str | None = None, ref: str | None = None,
                sha256: str | None = None, path: str | None = None, cache: Path,
                say: Say = lambda s: None, timeout: float = FETCH_TIMEOUT) -> Source:
    """The paper at ``url``: fetched (or found in the cache), checked, its folder there."""
    given = [f for f, v in (("--commit", commit), ("--ref", ref), ("--sha256", sha256)) if v]
    if len(given) != 1:
        raise InputError(f"{public_url(url)}: name what to audit with one of --commit SHA, "
                         "--ref NAME (a branch or tag) or --sha256 H (an archive)"
                         + (f", not {' and '.join(given)}" if given else ""),
                         hint="a commit pins the code: `samebits audit URL --commit SHA`")
    sub = check_path(path)
    if sha256 is not None:
        from samebits_app.audit.deposit import open_deposit

        digest = sha256.strip().lower()
        if not SHA256.fullmatch(digest):
            raise InputError(f"--sha256 {sha256}: expected 64 hex digits (sha256sum FILE)")
        root, how = open_deposit(url, digest, cache, say=say, timeout=timeout)
        return _inside(Source(kind="archive", url=public_url(url), root=root, sha256=digest,
                              path=sub, how=how))
    if ref is not None:
        commit, full = resolve_ref(url, ref)
        say(f"--ref {ref} is {full} at commit {commit} ({public_url(url)})")
    assert commit is not None
    commit = check_commit(commit)
    root, how = fetch_commit(url, commit, cache, say=say, timeout=timeout)
    return _inside(Source(kind="git", url=public_url(url), root=root, commit=commit,
                          ref=ref, path=sub, how=how))


def _inside(src: Source) -> Source:
    folder = src.folder
    real, top = folder.resolve(), src.root.resolve()
    if real != top and top not in real.parents:
        raise InputError(f"{src.text()}: {src.path} leads out of the "
                         f"{'repository' if src.kind == 'git' else 'archive'} (a link)")
    if not folder.is_dir():
        names = sorted(p.name for p in src.root.iterdir() if p.name != ".git")
        raise InputError(f"{src.text()}: no folder {src.path} there (its top level: "
                         f"{', '.join(names[:12]) or 'nothing'})", hint="pass --path SUBDIR")
    return src


# ------------------------------------------------------------------------------ git

def git_env() -> dict[str, str]:
    """This process's environment for git: no prompt, ssh in batch mode, none of a calling
    git's GIT_DIR or GIT_WORK_TREE."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                        "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE")}
    env.update(GIT_TERMINAL_PROMPT="0", GCM_INTERACTIVE="never", GIT_OPTIONAL_LOCKS="0")
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    return env


def git(*args: str, cwd: Path | None = None, timeout: float = GIT_TIMEOUT, url: str = ""
        ) -> subprocess.CompletedProcess[str]:
    """One git call, bounded by ``timeout``; the completed process (any exit code)."""
    exe = shutil.which("git")
    if exe is None:
        raise ToolError("git: not found on PATH: auditing a git URL needs git",
                        hint="install git (apt-get install git), or audit a local folder")
    cmd = [exe, "-c", "core.hooksPath=/dev/null", "-c", "advice.detachedHead=false", *args]
    try:
        return subprocess.run(cmd, cwd=cwd, env=git_env(), capture_output=True, text=True,
                              errors="replace", timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UnreachableError(f"{public_url(url) or 'git'}: git {args[0]} did not finish in "
                               f"{timeout:g} s", hint="check the network, or the URL") from None


def _said(proc: subprocess.CompletedProcess[str], url: str,
          words: tuple[str, ...] = ()) -> str:
    """git's line that says why, the same whichever of its processes wrote first (a remote
    and a local upload-pack may both say it, in either order): the first in sorted order of
    the fatal lines with one of ``words``, else of the fatal lines, else of all."""
    lines = sorted({ln.strip() for ln in proc.stderr.replace(url, public_url(url)).splitlines()
                    if ln.strip()})
    fatal = [ln for ln in lines if ln.lower().startswith(("fatal:", "error:"))]
    named = [ln for ln in fatal if any(w in ln.lower() for w in words)]
    return (named or fatal or lines or [f"exit {proc.returncode}"])[0]


def git_failure(proc: subprocess.CompletedProcess[str], url: str, what: str) -> SamebitsError:
    """The error for a failed fetch or ls-remote, by what git said: no such commit or
    repository (exit 2), no network (exit 4), else a tool failure (exit 5)."""
    text = proc.stderr.lower()
    where = public_url(url)
    for words in (_MISSING, _NETWORK, _NOT_THERE):
        if any(w in text for w in words):
            said = _said(proc, url, words)
            break
    else:
        return ToolError(f"{where}: git failed fetching {what} ({_said(proc, url)})")
    if words is _MISSING:
        return InputError(f"{where}: no {what} there ({said})",
                          hint="check the commit id: `git ls-remote URL` lists the branches "
                          "and tags; a commit force-pushed away or only in a fork is not there")
    if words is _NETWORK:
        return UnreachableError(f"{where}: {said}", hint="check the network, or the URL")
    return InputError(f"{where}: not a git repository this machine can read ({said})",
                      hint="check the URL; a private repository needs a credential helper "
                      "or an ssh agent (samebits never prompts)")


def resolve_ref(url: str, ref: str) -> tuple[str, str]:
    """(commit, full ref name) of a branch or tag at ``url``: ``git ls-remote``, once."""
    if COMMIT.fullmatch(ref.lower()):
        return ref.lower(), ref.lower()
    proc = git("ls-remote", "--", url, timeout=GIT_TIMEOUT * 2, url=url)
    if proc.returncode != 0:
        raise git_failure(proc, url, f"ref {ref}")
    refs: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if name.endswith("^{}"):
            refs[name[:-3]] = sha  # an annotated tag: the commit it points at
        else:
            refs.setdefault(name, sha)
    wanted = [ref] if ref.startswith("refs/") or ref == "HEAD" else [
        f"refs/heads/{ref}", f"refs/tags/{ref}"]
    found = [n for n in wanted if n in refs]
    if len(found) > 1:
        raise InputError(f"{public_url(url)}: --ref {ref} is both {' and '.join(found)}",
                         hint=f"pass the full name: --ref {found[0]}")
    if not found:
        names = sorted(n.removeprefix("refs/heads/").removeprefix("refs/tags/")
                       for n in refs if n.startswith(("refs/heads/", "refs/tags/")))
        raise InputError(f"{public_url(url)}: no branch or tag {ref} (it has: "
                         f"{', '.join(names[:12]) or 'none'}"
                         f"{' and more' if len(names) > 12 else ''})")
    return refs[found[0]], found[0]


def _clean_checkout(root: Path, commit: str) -> bool:
    if not (root / ".git").is_dir():
        return False
    head = git("rev-parse", "--verify", "-q", "HEAD", cwd=root)
    if head.returncode != 0 or head.stdout.strip() != commit:
        return False
    status = git("status", "--porcelain", "--untracked-files=all", cwd=root)
    return status.returncode == 0 and status.stdout.strip() == ""


def fetch_commit(url: str, commit: str, cache: Path, *, say: Say = lambda s: None,
                 timeout: float = FETCH_TIMEOUT) -> tuple[Path, str]:
    """(the checkout of ``commit`` under ``cache``, "fetched" or "in the cache")."""
    from samebits.staging import staged_dir

    final = Path(cache) / SOURCES / "git" / commit
    with entry_locked(cache, f"git-{commit}", timeout=timeout + LOCK_SLACK):
        sweep_partials(final)
        if _clean_checkout(final, commit):
            say(f"commit {commit[:12]} of {public_url(url)}: in the cache ({final})")
            return final, "in the cache"
        say(f"fetching commit {commit} from {public_url(url)} (that commit alone, depth 1)")
        with staged_dir(final, replace=True) as stage:
            for args, limit in ((("init", "-q", "."), GIT_TIMEOUT),
                                (("fetch", "-q", "--depth", "1", "--no-tags", "--", url,
                                  commit), timeout),
                                (("checkout", "-q", "--detach", "FETCH_HEAD"), GIT_TIMEOUT)):
                proc = git(*args, cwd=stage, timeout=limit, url=url)
                if proc.returncode != 0:
                    if args[0] == "fetch":
                        raise git_failure(proc, url, f"commit {commit}")
                    raise ToolError(f"{public_url(url)}: git {args[0]} failed "
                                    f"({_said(proc, url)})")
            head = git("rev-parse", "HEAD", cwd=stage).stdout.strip()
            if head != commit:
                raise InputError(f"{public_url(url)}: asked for commit {commit}, the checkout "
                                 f"is at {head or 'nothing'}")
            (stage / ".git" / "FETCH_HEAD").unlink(missing_ok=True)  # it names the URL as
            # given, a user:password in it too: the cache keeps no credential
    return final, "fetched"


def sweep_partials(final: Path) -> None:
    """What a build of this entry that was killed left beside it (``staged_dir``'s
    ``.NAME.*.partial`` and ``.old`` folders): removed. The caller holds the entry's lock, so
    no other process is building it."""
    if not final.parent.is_dir():
        return
    for p in final.parent.glob(f".{final.name}.*"):
        if p.name.endswith((".partial", ".old")) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)


@contextmanager
def entry_locked(cache: Path, entry: str, *, timeout: float) -> Iterator[None]:
    """An exclusive flock on ``CACHE/sources/locks/<entry>/`` (the install cache's
    ``entry_lock``), waited for at most ``timeout`` seconds."""
    from samebits.install.seal import entry_lock

    folder = Path(cache) / SOURCES / "locks" / entry
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with entry_lock(folder, exclusive=True, timeout=timeout):
            yield
    except TimeoutError as exc:
        raise SamebitsError(str(exc), hint="another samebits process is fetching this source; "
                            "wait for it, or pass another --cache-dir") from None
