"""Writing ``samebits-paper.toml`` for ``samebits paper init``: the measured command as one
``[[commands]]`` block, the data it read as ``[[inputs]]``, a comment beside every tolerance.

Every value is written by ``tomli_w`` (one key at a time, so that a comment can follow it on
its line); the text around them is fixed, so the same measurements give the same bytes. A new
manifest is a header comment, ``format = 1``, ``lockfile``, the command block, the inputs. An
existing manifest keeps its text: the block of a command of the same name is replaced in
place (``--replace``), a new command's block goes after the last command's, new inputs go at
the end; nothing else of the file changes. A block is the ``[[commands]]`` header, every
``[commands.*]`` table after it, and the comment lines directly above each (no blank line
between). The result is proved twice before anything is replaced: parsed, it must be exactly
the old document with that command and those inputs added (``expected``), and the real reader
(``manifest.read_manifest``) must accept it, read from a temporary file beside the manifest,
which is then renamed over it (``write``).
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from samebits.errors import InputError, SamebitsError
from samebits_app.paper.manifest import ManifestError, read_manifest
from samebits_app.paper.noise import Decision

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HEADER = ("# The paper's manifest (docs/reference/paper-manifest.md). Each [[commands]] block\n"
          "# `samebits paper init` wrote holds tolerances it measured; the comments say how.\n")
MARK = "# paper init:"
_TABLE = re.compile(r"^\s*(\[\[?)\s*([^\[\]#]*?)\s*\]\]?\s*(?:#.*)?$")


class ManifestTextError(SamebitsError):
    """The existing manifest's text cannot take the command where it belongs."""

    kind = "manifest"


@dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    """What the command block says: the command and each output's decision."""

    name: str
    argv: tuple[str, ...]
    perturbation: str                     # "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1"
    env: tuple[tuple[str, str], ...] = ()  # --env: the command's own variables
    timeout: float | None = None          # --timeout
    margin: float
    decisions: tuple[Decision, ...]


def _kv(key: str, value: Any) -> str:
    return tomli_w.dumps({key: value}).rstrip("\n")


def _key(name: str) -> str:
    return _kv(name, 0)[: -len(" = 0")]


def _comment(text: str) -> str:
    return re.sub(r"[\x00-\x08\x0a-\x1f\x7f]", " ", text)


def command_block(m: Measured) -> str:
    """The ``[[commands]]`` block of one measured command."""
    lines = [f"{MARK} `{_comment(shlex.join(m.argv))}` ran three times here: twice as attest "
             "runs it,",
             f"#   once with {m.perturbation}. A tolerance is the largest |Δ| of that run "
             f"x{m.margin:g},",
             "#   rounded up to one significant digit; 0 or none: the three runs gave the same "
             "bits.",
             "[[commands]]", _kv("name", m.name), _kv("run", shlex.join(m.argv))]
    if m.timeout is not None:
        lines.append(_kv("timeout", m.timeout))
    if m.env:
        lines.append("env = { " + ", ".join(_kv(k, v) for k, v in m.env) + " }")
    for d in m.decisions:
        if d.spec is None:
            continue
        s = d.spec
        comments = dict(d.comments)
        tol = s.tolerance.atol
        head = f"{s.kind}: {d.kinded.what}"
        if not tol and not s.metrics and "" in comments:
            head += f"; {comments['']}"
        lines += ["", f"[[commands.outputs]]  # {_comment(head)}"]
        lines += [f"# {_comment(n)}" for n in d.notes]
        lines += [f"# left out: {_comment(f'{x.first} ({x.cause})')}" for x in d.noisy
                  if not x.accepted]
        lines.append(_kv("path", s.path) if s.path is not None else _kv("stream", s.stream))
        lines.append(_kv("kind", s.kind))
        if s.kind in ("metrics", "curve"):
            lines.append(_kv("format", s.fmt))
        if s.kind == "curve":
            if s.regex is not None:
                lines.append(_kv("regex", s.regex))
            lines.append(_kv("step", s.step))
            if s.series and s.fmt != "regex" or s.series != d.kinded.spec.series:
                lines.append(_kv("series", list(s.series)))
        if tol:
            lines.append(f"{_kv('atol', tol)}  # {_comment(comments.get('', ''))}")
        if s.metrics:
            lines += ["", "[commands.outputs.metrics]"]
            lines += [f"{_key(n)} = {{ {_kv('atol', t.atol)} }}  # {_comment(comments[n])}"
                      for n, t in s.metrics]
    gone = [d for d in m.decisions if d.spec is None]
    if gone:
        lines += ["", "# left out: not declared (paper init's report says why):"]
        lines += [f"#   {_comment(d.label)}: " + _comment(
            "; ".join(f"{x.first} ({x.cause})" for x in d.noisy) or "; ".join(d.notes))
            for d in gone]
    return "\n".join(lines) + "\n"


def inputs_block(inputs: Sequence[tuple[str, str, str]]) -> str:
    """``[[inputs]]`` tables: (path, sha256, comment) each."""
    out = []
    for path, sha, why in inputs:
        out += ["", f"[[inputs]]  # {_comment(why)}", _kv("path", path), _kv("sha256", sha)]
    return "\n".join(out[1:]) + "\n" if out else ""


def _spans(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) of every command block: its header, its [commands.*] tables, and the
    comment lines directly above each header."""
    heads = [(i, m.group(1), re.sub(r"\s", "", m.group(2)))
             for i, line in enumerate(lines) if (m := _TABLE.match(line))]

    def above(i: int) -> int:
        while i > 0 and lines[i - 1].lstrip().startswith("#"):
            i -= 1
        return i

    spans = []
    for k, (i, brackets, name) in enumerate(heads):
        if brackets != "[[" or name != "commands":
            continue
        nxt = next((j for j, b, n in heads[k + 1:] if not n.startswith("commands.")
                    or (b == "[[" and n == "commands")), len(lines))
        end = above(nxt) if nxt < len(lines) else nxt
        while end > i and not lines[end - 1].strip():
            end -= 1
        spans.append((above(i), end))
    return spans


def compose(old: str | None, *, lockfile: str, name: str, block: str, inputs: str) -> str:
    """The manifest's new text: ``block`` (the command ``name``'s) in place of that command's
    block or after the last one, ``inputs`` at the end; a new manifest without ``old``."""
    if old is None:
        text = HEADER + "format = 1\n" + _kv("lockfile", lockfile) + "\n\n" + block
        return text + ("\n" + inputs if inputs else "")
    lines = old.splitlines()
    spans = _spans(lines)
    named = []
    for start, end in spans:
        try:
            doc = tomllib.loads("\n".join(lines[start:end]))
        except tomllib.TOMLDecodeError:
            doc = {}
        named.append((doc.get("commands") or [{}])[0].get("name"))
    new = block.rstrip("\n").split("\n")
    if name in named:
        start, end = spans[named.index(name)]
        lines[start:end] = new
    elif spans:
        end = spans[-1][1]
        lines[end:end] = ["", *new]
    else:
        lines += ["", *new]
    text = "\n".join(lines).rstrip("\n") + "\n"
    return text + ("\n" + inputs if inputs else "")


def expected(old: Mapping[str, Any] | None, *, lockfile: str, block: str,
             inputs: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
    """The document the new text must parse to."""
    cmd = tomllib.loads(block)["commands"][0]
    data: dict[str, Any] = (copy.deepcopy(dict(old)) if old is not None else
                            {"format": 1, "lockfile": lockfile, "commands": []})
    commands: list[Any] = data.setdefault("commands", [])
    names = [c.get("name") if isinstance(c, Mapping) else None for c in commands]
    if cmd["name"] in names:
        commands[names.index(cmd["name"])] = cmd
    else:
        commands.append(cmd)
    if inputs:
        data["inputs"] = [*data.get("inputs", []), *({"path": p, "sha256": s}
                                                     for p, s, _ in inputs)]
    return data


def check_text(text: str, want: Mapping[str, Any], *, where: Path) -> None:
    """The composed text parses to ``want`` exactly (else a hand-written layout fooled
    ``compose``: refused, nothing written)."""
    try:
        got = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        got = {"error": str(exc)}
    if got != want:
        raise ManifestTextError(
            f"{where}: its text is laid out so that paper init cannot add the command as a "
            "[[commands]] table after the others (commands written inline, or tables "
            "between them)", hint="write the commands as [[commands]] tables, or move the "
            "manifest aside and run paper init for each command")


def write(path: Path, text: str) -> None:
    """Write ``text`` over ``path`` once the real reader accepts it (module doc)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        try:
            read_manifest(Path(tmp))
        except ManifestError as exc:
            raise InputError(f"{path}: paper init composed a manifest its own reader refuses "
                             f"(nothing written): {exc.message}",
                             hint="report this: it is a bug in samebits paper init") from None
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
