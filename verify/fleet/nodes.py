"""Node statements in the fleet report: ``verify fleet --node-statements DIR``.

``samebits verify node`` (a Slurm prolog, a health check) writes one in-toto Statement per
node, predicate type ``https://samebits.dev/node/v1``::

    {"host": str, "healthy": bool, "reasons": [{"code": str, "detail": str}],
     "env": {"files": int, "proven_by_identity": int, "proven_by_hash": int, "drift": int},
     "gpus": [...], "canary": [{"device": str, "class": str, "digest": str,
                                "expected": str | null, "ok": bool | null}],
     "settings": {...}, "seconds": float}

bare or in a DSSE envelope (``samebits.dsse``). ``read_statements`` is the edge (files,
signatures); ``analyse_nodes`` is pure. The rules:

* **Signatures.** With ``--trust KEY.pub`` every statement must be an envelope whose every
  signature holds for that key; one that is bare, by another key or altered is *rejected*
  (named with its file and why) and not counted. Without ``--trust`` envelopes are read and
  their key ids named, unchecked (``verify attestation`` checks them).
* **Shape.** A statement that is not JSON, not node/v1, or lacks a key or holds a wrong type is
  rejected, naming the file, the key and the value. A second statement for a host already read
  (files sorted by path) is rejected too: one node, one vote.
* **Suspects ("lemon nodes").** Canary runs are grouped by their ``class`` (same GPU model,
  driver, torch build...: the same bits are expected). Within a class the digest held by a
  strict majority of the runs is the reference; a node whose digest differs is a suspect,
  named with its device and the number of peers that agree with each other, whether or not
  its own committed ``expected`` digest was known. A class of two that disagrees, or one with no
  strict majority, is *undecided*. A class of one is compared with nothing. The class is the
  hardware and software (``verify.node.canary``); a canary *setting* the statement records
  (``canary[].settings``: the ATen CPU capability in use, ``ATEN_CPU_CAPABILITY``, threads...)
  is not in it, so a suspect whose settings differ from those all its agreeing peers share is
  still named, with those settings as ``explained_by`` and its ``reason`` naming them ("a
  different setting"), not called a lemon for a difference its own statement explains.
* **Unhealthy.** ``healthy: false`` nodes are listed with their reason codes and details.

Verdict of the nodes (folded into the fleet's by ``with_nodes``): suspects, else untrusted
(a rejected statement), else unhealthy, else undecided, else consistent.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits._io import read_json
from samebits.dsse import PublicKey, is_envelope, parse_envelope, statement_of, verify
from samebits.errors import InputError, UsageError, clip, plural, quote
from verify.node.statement import PREDICATE_TYPE

NODE_PREDICATE = PREDICATE_TYPE  # what ``samebits verify node`` writes (verify.node.statement)
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
# the fleet's verdicts, worst first: the combined verdict is the worst of ranks' and nodes'
VERDICT_ORDER = ("refused", "suspects", "untrusted", "incomplete", "unhealthy", "undecided",
                 "explained", "consistent")


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    source: str
    host: str
    healthy: bool
    reasons: tuple[Mapping[str, str], ...]
    env: Mapping[str, Any]
    canary: tuple[Mapping[str, Any], ...]
    signed_by: tuple[str, ...]  # key ids: verified with --trust, as written without


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected:
    source: str
    reason: str


def statement_files(paths: Sequence[Path]) -> list[Path]:
    """The files ``--node-statements`` names: a folder's ``*.json`` (sorted) or a file."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(q for q in p.glob("*.json") if q.is_file())
            if not found:
                raise UsageError(f"--node-statements {p}: no *.json file in this folder",
                                 hint="samebits verify node --out DIR/$(hostname).json on "
                                 "each node writes them")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise UsageError(f"--node-statements {p}: no such file or folder")
    return out


def _need(pred: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = pred.get(key)
    if key not in pred or not isinstance(value, kind):
        raise ValueError(f"predicate.{key} = {clip(quote(value), 60)}: expected {what}")
    return value


def _drift_count(drift: Any) -> int:
    """``env.drift``: ``verify node`` writes the count (the first findings under ``drifted``);
    a list of findings counts its items."""
    if isinstance(drift, bool):
        return int(drift)
    if isinstance(drift, int):
        return drift
    return len(drift) if isinstance(drift, (list, tuple)) else 0


def parse_node(statement: Any, *, source: str, signed_by: tuple[str, ...] = ()) -> Node:
    """A node/v1 Statement as a ``Node``; ValueError naming the key and value."""
    if not isinstance(statement, Mapping) or statement.get("_type") != STATEMENT_TYPE:
        kind = statement.get("_type") if isinstance(statement, Mapping) else None
        raise ValueError(f"_type = {clip(quote(kind), 60)}: not an in-toto Statement v1")
    if statement.get("predicateType") != NODE_PREDICATE:
        raise ValueError(f"predicateType = {clip(quote(statement.get('predicateType')), 80)}: "
                         f"expected {NODE_PREDICATE} (samebits verify node)")
    pred = statement.get("predicate")
    if not isinstance(pred, Mapping):
        raise ValueError("predicate: expected an object")
    host = _need(pred, "host", str, "a string")
    healthy = _need(pred, "healthy", bool, "true or false")
    reasons = _need(pred, "reasons", list, "a list of {code, detail}")
    for i, r in enumerate(reasons):
        if not (isinstance(r, Mapping) and isinstance(r.get("code"), str)):
            raise ValueError(f"predicate.reasons[{i}] = {clip(quote(r), 60)}: expected "
                             "{code, detail}")
    env = _need(pred, "env", Mapping, "an object")
    canary = _need(pred, "canary", list, "a list of {device, class, digest, expected, ok}")
    for i, c in enumerate(canary):
        for key in ("device", "class", "digest"):
            if not (isinstance(c, Mapping) and isinstance(c.get(key), str)):
                value = c.get(key) if isinstance(c, Mapping) else c
                raise ValueError(f"predicate.canary[{i}].{key} = {clip(quote(value), 60)}: "
                                 "expected a string")
    return Node(source=source, host=host, healthy=healthy,
                reasons=tuple({"code": str(r["code"]), "detail": str(r.get("detail", ""))}
                              for r in reasons),
                env=dict(env), canary=tuple(dict(c) for c in canary), signed_by=signed_by)


def read_statement(path: Path, trust: PublicKey | None) -> Node | Rejected:
    """One file: its Node, or why it is rejected (a file that cannot be read at all is one)."""
    source = str(path)
    try:
        doc = read_json(path, what="node statement", unique=True)
        if is_envelope(doc):
            envelope = parse_envelope(doc, source=source)
            if trust is not None:
                verify(envelope, trust, source=source)
            statement = statement_of(envelope, source=source)
            keyids = tuple(sorted({s.keyid for s in envelope.signatures}))
        elif trust is not None:
            return Rejected(source=source, reason=f"not signed: a bare Statement, and --trust "
                            f"{trust.source} asks for a signature by keyid {trust.keyid}")
        else:
            statement, keyids = doc, ()
        return parse_node(statement, source=source, signed_by=keyids)
    except InputError as exc:  # SignatureError and PayloadError are InputErrors
        message = str(exc)
        return Rejected(source=source, reason=message.removeprefix(f"{source}: "))
    except ValueError as exc:
        return Rejected(source=source, reason=str(exc))


def read_statements(paths: Sequence[Path], trust: PublicKey | None
                    ) -> tuple[list[Node], list[Rejected]]:
    nodes: dict[str, Node] = {}
    rejected: list[Rejected] = []
    for path in statement_files(paths):
        got = read_statement(path, trust)
        if isinstance(got, Node) and got.host in nodes:
            got = Rejected(source=str(path), reason=f"host {quote(got.host)} again: already "
                           f"read from {nodes[got.host].source} (one statement per node)")
        if isinstance(got, Rejected):
            rejected.append(got)
        else:
            nodes[got.host] = got
    return list(nodes.values()), rejected


def _majority(votes: Sequence[str]) -> tuple[str | None, int]:
    (value, n), *_ = Counter(votes).most_common(1)
    return (value, n) if n * 2 > len(votes) else (None, n)


def _settings_differ(run: Mapping[str, Any], peers: Sequence[Mapping[str, Any]]
                     ) -> list[dict[str, Any]]:
    """The settings of ``run`` that differ from a value all ``peers`` share (a setting the
    peers disagree on explains nothing), sorted by name."""
    def settings(c: Mapping[str, Any]) -> Mapping[str, Any]:
        s = c.get("settings")
        return s if isinstance(s, Mapping) else {}

    mine, theirs = settings(run), [settings(p) for p in peers]
    out = []
    for key in sorted(set(mine) | {k for t in theirs for k in t}):
        values = {json.dumps(t.get(key), sort_keys=True) for t in theirs}
        if len(values) == 1 and json.dumps(mine.get(key), sort_keys=True) not in values:
            out.append({"setting": key, "value": mine.get(key), "peers": theirs[0].get(key)})
    return out


def _suspect_reason(differ: Sequence[Mapping[str, Any]]) -> str:
    if not differ:
        return "a lemon node"
    named = ", ".join(f"{d['setting']} {_shown(d['value'])} (its peers {_shown(d['peers'])})"
                      for d in differ)
    return f"explained by a different setting: {named}"


def _shown(value: Any) -> str:
    return "unset" if value is None else clip(quote(value), 60)


def analyse_nodes(nodes: Sequence[Node], rejected: Sequence[Rejected] = (), *,
                  trusted_keyid: str | None = None) -> dict[str, Any]:
    """The report's ``nodes`` section (module docstring); byte-stable for the same input."""
    runs: dict[str, list[tuple[str, Mapping[str, Any]]]] = defaultdict(list)
    for node in nodes:
        for c in node.canary:
            runs[str(c["class"])].append((node.host, c))
    classes, suspects, undecided = [], [], []
    for cid in sorted(runs):
        members = sorted(runs[cid], key=lambda hc: (hc[0], str(hc[1]["device"])))
        digests = [str(c["digest"]) for _, c in members]
        ref, agree = _majority(digests)
        classes.append({"class": cid, "runs": len(members),
                        "hosts": sorted({h for h, _ in members}), "digest": ref,
                        "agreeing": agree if ref is not None else None})
        if len(set(digests)) == 1:
            continue
        if ref is None:
            undecided.append({"class": cid, "runs": [
                {"host": h, "device": c["device"], "digest": c["digest"]} for h, c in members]})
            continue
        peers = [c for _, c in members if c["digest"] == ref]
        for h, c in members:
            if c["digest"] == ref:
                continue
            differ = _settings_differ(c, peers)
            suspects.append({"host": h, "device": c["device"], "class": cid,
                             "digest": c["digest"], "majority_digest": ref, "peers": agree,
                             "class_runs": len(members), "expected": c.get("expected"),
                             "ok": c.get("ok"), "explained_by": differ,
                             "reason": _suspect_reason(differ)})
    unhealthy = [{"host": n.host, "reasons": [dict(r) for r in n.reasons], "source": n.source}
                 for n in sorted(nodes, key=lambda n: n.host) if not n.healthy]
    verdict = ("suspects" if suspects else "untrusted" if rejected else "unhealthy"
               if unhealthy else "undecided" if undecided else "consistent")
    return {
        "verdict": verdict,
        "trusted_keyid": trusted_keyid,
        "nodes": [{"host": n.host, "healthy": n.healthy, "source": n.source,
                   "signed_by": list(n.signed_by),
                   "reasons": [r["code"] for r in n.reasons],
                   "env": {k: n.env.get(k) for k in ("files", "proven_by_identity",
                                                     "proven_by_hash")}
                   | {"drift": _drift_count(n.env.get("drift"))},
                   "canary": [{k: c.get(k) for k in ("device", "class", "digest", "expected",
                                                     "ok")} for c in n.canary]}
                  for n in sorted(nodes, key=lambda n: n.host)],
        "classes": classes,
        "suspects": suspects,
        "undecided": undecided,
        "unhealthy": unhealthy,
        "rejected": [{"source": r.source, "reason": r.reason}
                     for r in sorted(rejected, key=lambda r: r.source)],
    }


def with_nodes(report: Mapping[str, Any], nodes: Mapping[str, Any]) -> dict[str, Any]:
    """The fleet report with its ``nodes`` section; the verdict is the worse of the two."""
    verdict = min(report["verdict"], nodes["verdict"], key=VERDICT_ORDER.index)
    return {**report, "verdict": verdict, "nodes": dict(nodes)}


def _short(digest: Any) -> str:
    text = str(digest)
    return text[:12] if len(text) == 64 else text


def node_lines(doc: Mapping[str, Any]) -> list[str]:
    checked = (f"signatures checked with keyid {doc['trusted_keyid']}" if doc["trusted_keyid"]
               else "signatures not checked (pass --trust KEY.pub)")
    lines = [f"nodes: {plural(len(doc['nodes']), 'statement')} read, "
             f"{plural(len(doc['rejected']), 'rejected', 'rejected')}, "
             f"{plural(len(doc['classes']), 'canary class', 'canary classes')}, {checked}, "
             f"verdict: {doc['verdict'].upper()}"]
    for s in doc["suspects"]:
        expected = ("unknown" if s["expected"] is None else
                    f"{_short(s['expected'])}{' (matches)' if s['ok'] else ''}")
        lines.append(f"SUSPECT node {s['host']} ({s['device']}, canary class {s['class']}): "
                     f"digest {_short(s['digest'])} differs from the {s['peers']} of "
                     f"{s['class_runs']} peers that agree on {_short(s['majority_digest'])} "
                     f"(its committed expected digest: {expected}): {s['reason']}")
    for u in doc["undecided"]:
        lines.append(f"UNDECIDED canary class {u['class']}: "
                     f"{', '.join(r['host'] for r in u['runs'])} disagree with no majority")
    for u in doc["unhealthy"]:
        why = "; ".join(f"{r['code']}: {r['detail']}" if r["detail"] else r["code"]
                        for r in u["reasons"]) or "no reason given"
        lines.append(f"UNHEALTHY node {u['host']}: {why}")
    lines += [f"REJECTED {r['source']}: {r['reason']}" for r in doc["rejected"]]
    return lines
