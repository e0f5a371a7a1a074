"""``samebits audit --many PAPERS.toml --out DIR``: a committee's list of papers, each audited
from its URL, one summary (``summary``); the scheduling is ``many``'s.

The list (format 1; every key checked, an unknown one named)::

    [defaults]                      # optional: any of require, timeout, trust
    require = "within-tolerance"
    timeout = 7200

    [[paper]]
    name = "paper-17"               # its folder DIR/paper-17/ (letters, digits, . _ -)
    url = "https://github.com/lab/paper17"
    commit = "0123...cdef"          # a full commit id; or sha256 = "..." for an archive URL
    path = "artifact"               # optional: the paper folder inside the repository
    require = "bit-identical"       # optional: the weakest verdict accepted
    timeout = 3600                  # optional: seconds for its audit (default 7200)
    trust = "keys/paper17.pub"      # optional: the authors' key, relative to the list

Each paper is one task (``many.Task``): ``samebits audit URL --commit C [--path P] --target
DIR/NAME/env --replace --out DIR/NAME/report`` plus the options every paper shares
(``--workload-python``, ``--device``, ``--no-workloads``, ``--platform``, ``--find-links``,
``--mirror``, ``--sign``, ``--cache-dir``), its log in DIR/NAME/log.txt. Its key (what makes
an earlier result stand): the URL, commit or sha256, path, the trust key's sha256, those
options and samebits' version. Exit codes 0 and 1 are verdicts (a result); 2, 4 and 5 (a
missing commit, an unreachable URL, a tool that failed), a timeout or a crash are that
paper's failure, its row's reason, and run again next time.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits import __version__
from samebits._io import read_regular
from samebits.errors import InputError
from samebits_app.audit.many import LOG_FILE, Task, check_name, task_record
from samebits_app.audit.source import COMMIT, SHA256, check_path, looks_like_url

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LIST_FORMAT = 1
DEFAULT_TIMEOUT = 7200.0
REPORT = "report"   # DIR/NAME/report/: the audit's own files
ENV = "env"         # DIR/NAME/env/: the environment installed for it (removed unless --keep)
LEVELS = ("bit-identical", "within-tolerance", "explained", "environment-identical",
          "not-reproduced")
KEYS = {"name", "url", "commit", "sha256", "path", "require", "timeout", "trust"}
DEFAULT_KEYS = {"require", "timeout", "trust"}
VERDICT_EXITS = frozenset({0, 1})


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    index: int                # its place in the list, from 0 (the Slurm array index)
    name: str
    url: str
    commit: str | None = None
    sha256: str | None = None
    path: str | None = None
    require: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    trust: Path | None = None

    def source_words(self) -> list[str]:
        words = [self.url, *(["--commit", self.commit] if self.commit else
                             ["--sha256", str(self.sha256)])]
        return words + (["--path", self.path] if self.path else [])


def read_papers(path: Path) -> tuple[Entry, ...]:
    """The list at ``path``: every entry checked, every problem named by entry and key."""
    try:
        doc = tomllib.loads(read_regular(Path(path)).decode("utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such list of papers",
                         hint="write one: [[paper]] with name, url and commit (or sha256)") \
            from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{path}: not TOML: {exc}") from None
    problems: list[str] = []
    extra = set(doc) - {"format", "defaults", "paper"}
    if extra:
        problems.append(f"unknown key {', '.join(sorted(extra))} (the list has format, "
                        "[defaults] and [[paper]])")
    if doc.get("format", LIST_FORMAT) != LIST_FORMAT:
        problems.append(f"format = {doc.get('format')!r}: this samebits reads format "
                        f"{LIST_FORMAT}")
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict) or set(defaults) - DEFAULT_KEYS:
        problems.append(f"[defaults]: only {', '.join(sorted(DEFAULT_KEYS))}")
        defaults = {}
    papers = doc.get("paper")
    if not isinstance(papers, list) or not papers:
        problems.append("no [[paper]] entries")
        papers = []
    entries: list[Entry] = []
    names: set[str] = set()
    for i, raw in enumerate(papers):
        where = f"[[paper]] {i + 1}" + (f" ({raw.get('name')})" if isinstance(raw, dict)
                                         and isinstance(raw.get("name"), str) else "")
        try:
            entry = _entry(i, raw, defaults, Path(path).parent, where)
        except InputError as exc:
            problems.append(exc.message)
            continue
        if entry.name in names:
            problems.append(f"{where}: name = {json.dumps(entry.name)} is used twice")
        names.add(entry.name)
        entries.append(entry)
    if problems:
        raise InputError(f"{path}: " + (problems[0] if len(problems) == 1 else
                                        f"{len(problems)} problems:\n  " + "\n  ".join(problems)),
                         hint="nothing was run")
    return tuple(entries)


def _text(raw: Mapping[str, Any], key: str, where: str, *, required: bool = False
          ) -> str | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: {key} = {json.dumps(value)}: expected a string"
                         if value is not None else f"{where}: no {key}")
    return value.strip()


def _entry(index: int, raw: Any, defaults: Mapping[str, Any], base: Path, where: str) -> Entry:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a table")
    unknown = set(raw) - KEYS
    if unknown:
        raise InputError(f"{where}: unknown key {', '.join(sorted(unknown))} (known: "
                         f"{', '.join(sorted(KEYS))})")
    merged = {**defaults, **raw}
    name = check_name(str(_text(raw, "name", where, required=True)), where)
    url = str(_text(raw, "url", where, required=True))
    if not looks_like_url(url):
        raise InputError(f"{where}: url = {json.dumps(url)}: expected a URL (https://, "
                         "ssh://, file://, or git's host:path)")
    commit, sha256 = _text(raw, "commit", where), _text(raw, "sha256", where)
    if (commit is None) == (sha256 is None):
        raise InputError(f"{where}: give one of commit (a git repository) or sha256 (an "
                         "archive)", hint="a branch name is not a result anyone can rerun: "
                         "`git ls-remote URL BRANCH` gives its commit")
    if commit is not None and not COMMIT.fullmatch(commit.lower()):
        raise InputError(f"{where}: commit = {json.dumps(commit)}: expected a full commit id "
                         "(40 hex digits)")
    if sha256 is not None and not SHA256.fullmatch(sha256.lower()):
        raise InputError(f"{where}: sha256 = {json.dumps(sha256)}: expected 64 hex digits")
    try:
        path = check_path(_text(raw, "path", where))
    except InputError as exc:
        raise InputError(f"{where}: path: {exc.message}") from None
    require = merged.get("require")
    if require is not None and require not in LEVELS[:-1]:
        raise InputError(f"{where}: require = {json.dumps(require)}: one of "
                         f"{', '.join(LEVELS[:-1])}")
    timeout = merged.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InputError(f"{where}: timeout = {json.dumps(timeout)}: expected seconds > 0")
    trust = merged.get("trust")
    if trust is not None and (not isinstance(trust, str) or not trust):
        raise InputError(f"{where}: trust = {json.dumps(trust)}: expected a public key's path")
    key = (base / trust).absolute() if trust else None
    if key is not None and not key.is_file():
        raise InputError(f"{where}: trust = {json.dumps(trust)}: no such file ({key})")
    return Entry(index=index, name=name, url=url, commit=commit.lower() if commit else None,
                 sha256=sha256.lower() if sha256 else None, path=path, require=require,
                 timeout=float(timeout), trust=key)


# ------------------------------------------------------------------------------ tasks

def samebits_command() -> list[str]:
    """How this samebits runs in a child process (on a cluster node too: an absolute path)."""
    return [str(Path(sys.executable).absolute()), "-m", "samebits"]


def entry_key(entry: Entry, shared: Sequence[str]) -> dict[str, Any]:
    """What an earlier result of ``entry`` must have been run with to stand."""
    from samebits.net import public_url

    trust = hashlib.sha256(entry.trust.read_bytes()).hexdigest() if entry.trust else None
    return {"url": public_url(entry.url), "commit": entry.commit, "sha256": entry.sha256,
            "path": entry.path, "trust": trust, "options": list(shared),
            "samebits": __version__}


def paper_task(entry: Entry, out: Path, shared: Sequence[str], *, cache: Path) -> Task:
    """One paper's audit as a task: its command, timeout, key and environment folder."""
    folder = Path(out).absolute() / entry.name
    argv = [*samebits_command(), "audit", *entry.source_words(),
            "--target", str(folder / ENV), "--replace", "--out", str(folder / REPORT),
            "--cache-dir", str(cache), *shared,
            *(["--trust", str(entry.trust)] if entry.trust else [])]
    return Task(name=entry.name, argv=tuple(argv), timeout=entry.timeout,
                key=entry_key(entry, shared), complete=VERDICT_EXITS,
                remove=(folder / ENV,), proof=folder / REPORT / "audit.json")


# ------------------------------------------------------------------------------ rows

def _first_error(log: Path) -> str | None:
    """The first ``error:`` line of a paper's log (its audit's error message), else the
    last line (a traceback's)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("error: "):
            return line.removeprefix("error: ").strip()
    tail = [ln.strip() for ln in lines if ln.strip()]
    return tail[-1] if len(tail) > 1 else None


def row(entry: Entry, out: Path, shared: Sequence[str]) -> dict[str, Any]:
    """The summary's row of ``entry``: from DIR/NAME/task.json and its report. Byte-stable:
    no time, no absolute path."""
    folder = Path(out) / entry.name
    base = {"name": entry.name, "url": entry_key(entry, shared)["url"],
            "commit": entry.commit, "sha256": entry.sha256, "path": entry.path,
            "require": entry.require, "level": None, "accepted": False, "reason": "",
            "exit_code": None, "report": None, "log": f"{entry.name}/{LOG_FILE}"}
    rec = task_record(folder)
    if rec is None or rec.get("key") != json.loads(json.dumps(entry_key(entry, shared))):
        why = ("no result yet (not run, or still running)" if rec is None else
               "no result for this commit and samebits version yet (an earlier one is there)")
        return {**base, "status": "not run", "reason": why,
                "log": base["log"] if (folder / LOG_FILE).exists() else None}
    status, code = rec.get("status"), rec.get("exit_code")
    base["exit_code"] = code
    doc = _report(folder / REPORT / "audit.json")
    if status == "done" and doc is not None:
        verdict = doc.get("verdict") or {}
        level = verdict.get("level")
        reasons = verdict.get("reasons") or []
        accepted = level in LEVELS and level != "not-reproduced" and (
            entry.require is None or LEVELS.index(level) <= LEVELS.index(entry.require))
        reason = reasons[0].get("text", "") if reasons else (
            "" if accepted else f"weaker than the required {entry.require}")
        return {**base, "status": "verdict", "level": level, "accepted": accepted,
                "reason": reason, "report": f"{entry.name}/{REPORT}/audit.html"}
    if status == "timeout":
        return {**base, "status": "timeout",
                "reason": f"stopped after {rec.get('timeout'):g} s (its timeout)"}
    said = _first_error(folder / LOG_FILE) or f"exit {code}"
    return {**base, "status": "failed", "reason": said}


def _report(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
