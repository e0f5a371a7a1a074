"""The authors' run of each paper command against the reviewer's: pure, records in, verdicts out.

Per output (``judge_output``), in the authors' declaration (the attested one, never the
reviewer's manifest, so a tolerance cannot be loosened after the fact):

    bit-identical      the same sha256
    within-tolerance   bits differ; every compared value is within ``atol + rtol * |a|``
                       (a non-finite value only of the same value; NaN of nothing)
    beyond-tolerance   some value is not (the metric, the step, the tensor and index named),
                       or the tolerance cannot be checked (the authors' file was not shipped)
    missing            the reviewer's run did not write it; ``unreadable``: it is not what
                       its kind says (not JSON, no curve points, not a tensor file)

Per command (``judge_command``): ``failed`` (it failed or timed out: the last lines say why;
or an output is missing or unreadable),
``bit-identical``, ``within-tolerance``, ``explained`` (beyond tolerance where recorded facts
differ: the suite's equivalence-class facts, or a numerics variable the command inherited;
the numbers are in the note), or ``diverged`` (beyond tolerance with no such fact: a reason).
A command whose declaration differs from the attested one (its argv, cwd, the variables the
manifest sets, the settings, an output's tolerance) is a reason whatever its outputs say
(``CommandVerdict.changes``: causes, which the verdict lists the command's divergences under).
A command that failed is quoted short (its last line) in its reason, its last lines whole in
``CommandVerdict.tail``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from samebits_app.paper.manifest import Tolerance

SPEC_KEYS = ("run", "cwd", "python_hash_seed", "threads", "deterministic", "settings")
DECL_KEYS = ("kind", "path", "stream", "rtol", "atol", "format", "metrics", "regex", "step",
             "series")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputVerdict:
    output: str
    kind: str
    level: str
    summary: str
    rows: tuple[Mapping[str, Any], ...] = ()
    curves: Mapping[str, Any] = field(default_factory=dict)  # series -> steps/authors/reviewer

    def to_json(self) -> dict[str, Any]:
        return {"output": self.output, "kind": self.kind, "level": self.level,
                "summary": self.summary, "rows": [dict(r) for r in self.rows],
                "curves": dict(self.curves)}


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandVerdict:
    name: str
    level: str
    run: str
    reasons: tuple[str, ...] = ()   # divergences: what about its results differs
    notes: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    outputs: tuple[OutputVerdict, ...] = ()
    changes: tuple[str, ...] = ()   # causes: how the command differs from the attested one
    alone: tuple[str, ...] = ()     # ``reasons`` as worded when no cause explains them
    tail: tuple[str, ...] = ()      # a failed command's last lines, whole

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "level": self.level, "run": self.run,
                "changes": list(self.changes), "reasons": list(self.reasons),
                "notes": list(self.notes), "facts": list(self.facts),
                "outputs": [o.to_json() for o in self.outputs], "tail": list(self.tail)}


def num(x: Any) -> float | None:
    """A recorded value as a float ("nan"/"inf" strings included), None when absent."""
    if x is None:
        return None
    if isinstance(x, str):
        return float(x)
    return float(x)


def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.6g}"


def _tol_text(rtol: float, atol: float) -> str:
    return f"rtol {fmt(rtol)}, atol {fmt(atol)}"


# --------------------------------------------------------------------------------- metrics

def _metrics(a: Mapping[str, Any], b: Mapping[str, Any], decl: Mapping[str, Any]
             ) -> tuple[str, str, list[dict[str, Any]]]:
    va, vb = a.get("values") or {}, b.get("values") or {}
    default = Tolerance(rtol=float(decl.get("rtol", 0.0)), atol=float(decl.get("atol", 0.0)))
    per = {k: Tolerance(**t) for k, t in (decl.get("metrics") or {}).items()}
    names = list(per) if per else sorted({*va, *vb})
    rows, beyond = [], []
    for name in names:
        tol = per.get(name, default)
        x, y = num(va.get(name)), num(vb.get(name))
        row: dict[str, Any] = {"name": name, "authors": va.get(name), "reviewer": vb.get(name),
                               "rtol": tol.rtol, "atol": tol.atol}
        if x is None or y is None:
            row.update(within=False, missing="authors" if x is None else "reviewer")
            whose = "authors'" if x is None else "reviewer's"
            beyond.append(f"{name} is missing from the {whose} file")
        else:
            d = abs(x - y) if x != y else 0.0
            rel = d / abs(x) if x else (0.0 if d == 0 else float("inf"))
            row.update(abs=d, rel=rel, within=tol.allows(x, y), same=x == y)
            if not row["within"]:
                beyond.append(f"{name} = {fmt(y)}, the authors' {fmt(x)} (|Δ| {fmt(d)}, "
                              f"rel {fmt(rel)}; {_tol_text(tol.rtol, tol.atol)})")
        rows.append(row)
    if beyond:
        return "beyond-tolerance", "; ".join(beyond), rows
    close = [r for r in rows if not r.get("same")]
    # the closest call: the largest share of its own allowance (atol + rtol * |a|) used up
    worst = max(close, key=lambda r: r["abs"] / max(r["atol"] + r["rtol"] * abs(
        num(r["authors"]) or 0.0), 1e-300), default=None)
    text = (f"{len(rows)} metric(s) within tolerance"
            + (f"; closest call {worst['name']}: {fmt(num(worst['reviewer']))} vs "
               f"{fmt(num(worst['authors']))} (|Δ| {fmt(worst['abs'])}, rel {fmt(worst['rel'])};"
               f" {_tol_text(worst['rtol'], worst['atol'])})" if worst else ""))
    return "within-tolerance", text, rows


# ---------------------------------------------------------------------------------- curves

def series_stats(steps_a: Sequence[Any], ya: Sequence[Any], steps_b: Sequence[Any],
                 yb: Sequence[Any], tol: Tolerance) -> dict[str, Any]:
    """First differing step, first step beyond tolerance, max and final deviation."""
    pa = {s: float(v) for s, v in zip(steps_a, ya, strict=True) if v is not None}
    pb = {s: float(v) for s, v in zip(steps_b, yb, strict=True) if v is not None}
    common = sorted(set(pa) & set(pb))
    out: dict[str, Any] = {"points": len(common), "only_authors": len(set(pa) - set(pb)),
                           "only_reviewer": len(set(pb) - set(pa)), "first_diff": None,
                           "first_beyond": None, "max_dev": 0.0, "max_dev_step": None,
                           "final_dev": None, "final_step": common[-1] if common else None}
    for s in common:
        x, y = pa[s], pb[s]
        same = x == y  # NaN is the same as nothing (``Tolerance.allows``)
        d = 0.0 if same else abs(x - y)
        d = float("inf") if d != d else d
        if not same and out["first_diff"] is None:
            out["first_diff"] = s
        if not tol.allows(x, y) and out["first_beyond"] is None:
            out["first_beyond"] = s
        if d > out["max_dev"]:
            out["max_dev"], out["max_dev_step"] = d, s
        out["final_dev"] = d
    out["within"] = out["first_beyond"] is None and not out["only_authors"] and not (
        out["only_reviewer"]) and bool(common)
    return out


def _curve(a: Mapping[str, Any], b: Mapping[str, Any], decl: Mapping[str, Any]
           ) -> tuple[str, str, list[dict[str, Any]], dict[str, Any]]:
    ca, cb = a.get("curve") or {}, b.get("curve") or {}
    tol = Tolerance(rtol=float(decl.get("rtol", 0.0)), atol=float(decl.get("atol", 0.0)))
    sa, sb = ca.get("series") or {}, cb.get("series") or {}
    rows, curves, beyond, parts = [], {}, [], []
    for name in sorted({*sa, *sb}):
        if name not in sa or name not in sb:
            rows.append({"series": name, "within": False,
                         "missing": "authors" if name not in sa else "reviewer"})
            beyond.append(f"series {name} is missing from the "
                          f"{'authors' if name not in sa else 'reviewer'}'s run".replace(
                              "authors's", "authors'"))
            continue
        st = series_stats(ca["steps"], sa[name], cb["steps"], sb[name], tol)
        rows.append({"series": name, **st, "rtol": tol.rtol, "atol": tol.atol})
        curves[name] = {"authors": {"steps": ca["steps"], "values": sa[name]},
                        "reviewer": {"steps": cb["steps"], "values": sb[name]},
                        "first_diff": st["first_diff"], "first_beyond": st["first_beyond"]}
        if st["first_diff"] is None and not st["only_authors"] and not st["only_reviewer"]:
            parts.append(f"{name}: the same at all {st['points']} steps")
            continue
        text = (f"{name}: first differs at step {st['first_diff']}, max |Δ| "
                f"{fmt(st['max_dev'])} at step {st['max_dev_step']}, final |Δ| "
                f"{fmt(st['final_dev'])} at step {st['final_step']}")
        if st["only_authors"] or st["only_reviewer"]:
            text += (f"; {st['only_authors']} step(s) only in the authors' run, "
                     f"{st['only_reviewer']} only in the reviewer's")
        if st["first_beyond"] is not None:
            text += f"; beyond tolerance from step {st['first_beyond']}"
        if st["within"]:
            parts.append(text + f" (within {_tol_text(tol.rtol, tol.atol)})")
        else:
            beyond.append(text + f" ({_tol_text(tol.rtol, tol.atol)})")
    if beyond:
        return "beyond-tolerance", "; ".join(beyond), rows, curves
    return "within-tolerance", "; ".join(parts), rows, curves


# --------------------------------------------------------------------------------- tensors

def _tensors(a: Mapping[str, Any], b: Mapping[str, Any], decl: Mapping[str, Any],
             compared: Mapping[str, Any] | None) -> tuple[str, str, list[dict[str, Any]]]:
    tol = _tol_text(float(decl.get("rtol", 0.0)), float(decl.get("atol", 0.0)))
    if compared is not None and "error" not in compared:
        rows = [dict(r) for r in compared["tensors"]]
        diff = [r for r in rows if not r.get("same")]
        lacking = [*(f"{n} (only the authors')" for n in compared.get("only_authors", ())),
                   *(f"{n} (only the reviewer's)" for n in compared.get("only_reviewer", ()))]
        bad = [r for r in rows if not r.get("within")]
        head = f"{len(rows)} tensor(s), {len(diff)} differ"
        if lacking:
            head += "; " + ", ".join(lacking)
        worst = max(diff, key=lambda r: num(r.get("max_abs")) or 0.0, default=None)
        if worst is not None and "mismatch" not in worst:
            head += (f"; largest |Δ| in {worst['name'] or '(the array)'} at index "
                     f"{worst['index']}: {fmt(num(worst['authors']))} -> "
                     f"{fmt(num(worst['reviewer']))} (|Δ| {fmt(num(worst['max_abs']))}; the "
                     f"tensor's largest: rel {fmt(num(worst['max_rel']))}, "
                     f"{worst['max_ulp']} ulp)")
        if bad or lacking:
            names = ", ".join(f"{r['name'] or '(the array)'}"
                              + (f" ({r['mismatch']})" if "mismatch" in r else
                                 f" ({r['beyond']} of {r['total']} beyond)") for r in bad)
            return ("beyond-tolerance", head + (f"; beyond {tol}: {names}" if names else ""),
                    rows)
        return "within-tolerance", head + f"; all within {tol}", rows
    # Without the authors' file: names from the digests, lower bounds from fingerprints.
    ta, tb = a.get("tensors") or {}, b.get("tensors") or {}
    rows = []
    for name in [*ta, *(n for n in tb if n not in ta)]:
        x, y = ta.get(name), tb.get(name)
        row: dict[str, Any] = {"name": name, "same": bool(x and y and x["sha256"] == y["sha256"])}
        if x and y and not row["same"]:
            row["max_abs_at_least"] = fingerprint_bound(x.get("fingerprint"), y.get("fingerprint"))
        rows.append(row)
    diff = [r for r in rows if not r["same"]]
    why = ("the authors' file is not among the shipped outputs"
           if compared is None else compared["error"])
    return ("beyond-tolerance",
            f"{len(diff)} of {len(rows)} tensor(s) differ: "
            + ", ".join(f"{r['name'] or '(the array)'} (|Δ| >= {fmt(r.get('max_abs_at_least'))})"
                        for r in diff[:8])
            + f"; the tolerance cannot be checked: {why}", rows)


def fingerprint_bound(fa: Mapping[str, Any] | None, fb: Mapping[str, Any] | None
                      ) -> float | None:
    """A lower bound on max |a-b| from two fingerprints: the largest of the sampled elements'
    differences, |sum a - sum b| / n (no element can differ by less on average) and
    |max|a| - max|b|| (the largest magnitudes cannot move further apart than the elements)."""
    if not fa or not fb or fa.get("n") != fb.get("n") or not fa.get("n"):
        return None
    sb = {i: float(v) for i, v in fb.get("samples", ())}
    ds = [abs(float(v) - sb[i]) for i, v in fa.get("samples", ()) if i in sb]
    n = float(fa["n"])
    for key, scale in (("sum", n), ("abs_max", 1.0)):
        x, y = num(fa.get(key)), num(fb.get(key))
        if x is not None and y is not None:
            ds.append(abs(x - y) / scale)
    ds = [d for d in ds if d == d]  # NaN says nothing
    return max(ds, default=None)


# ---------------------------------------------------------------------------------- judge

def judge_output(a: Mapping[str, Any], b: Mapping[str, Any] | None,
                 compared: Mapping[str, Any] | None = None) -> OutputVerdict:
    label, kind = str(a.get("output")), str(a.get("kind"))
    if b is None or b.get("missing"):
        return OutputVerdict(output=label, kind=kind, level="missing",
                             summary=f"{label} was not written by the reviewer's run")
    if b.get("error"):
        return OutputVerdict(output=label, kind=kind, level="unreadable",
                             summary=f"{label}: {b['error']}")
    if a.get("sha256") == b.get("sha256"):
        return OutputVerdict(output=label, kind=kind, level="bit-identical",
                             summary=f"{label}: the same bytes (sha256 {str(a['sha256'])[:12]})")
    curves: dict[str, Any] = {}
    if kind == "metrics":
        level, text, rows = _metrics(a, b, a)
    elif kind == "curve":
        level, text, rows, curves = _curve(a, b, a)
    elif kind == "tensors":
        level, text, rows = _tensors(a, b, a, compared)
    else:
        level, text, rows = ("beyond-tolerance", f"sha256 {str(b.get('sha256'))[:12]}, the "
                             f"authors' {str(a.get('sha256'))[:12]} (a file compares by bytes)",
                             [])
    return OutputVerdict(output=label, kind=kind, level=level, summary=f"{label}: {text}",
                         rows=tuple(rows), curves=curves)


def declaration_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What the reviewer's command declares differently from the attested one."""
    out = [f"{k} = {b.get(k)!r} (attested: {a.get(k)!r})" for k in SPEC_KEYS
           if a.get(k) != b.get(k)]
    inh = set(a.get("inherited") or ()) | set(b.get("inherited") or ())
    ea, eb = a.get("env") or {}, b.get("env") or {}
    out += [f"env {k} = {eb.get(k)!r} (attested: {ea.get(k)!r})"
            for k in sorted({*ea, *eb} - inh) if ea.get(k) != eb.get(k)]
    da = {o.get("output"): {k: o.get(k) for k in DECL_KEYS} for o in a.get("outputs") or ()}
    db = {o.get("output"): {k: o.get(k) for k in DECL_KEYS} for o in b.get("outputs") or ()}
    for label in sorted({*da, *db}, key=str):
        x, y = da.get(label), db.get(label)
        if x is None or y is None:
            out.append(f"output {label}: " + ("not declared in the attestation" if x is None
                                               else "no longer declared"))
        elif x != y:
            out += [f"output {label}: {k} = {_toml(y.get(k))} (attested: {_toml(x.get(k))})"
                    for k in DECL_KEYS if x.get(k) != y.get(k)]
    return out


def _toml(value: Any) -> str:
    """A manifest value as the manifest writes it: ``0.001``, ``"tensors"``, unset."""
    if value is None:
        return "unset"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value).lower() if isinstance(value, bool) else str(value)


def inherited_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Variables taken from the callers' environments that differ: env.NAME, as facts."""
    inh = set(a.get("inherited") or ()) | set(b.get("inherited") or ())
    ea, eb = a.get("env") or {}, b.get("env") or {}
    return [f"env.{k}" for k in sorted(inh) if ea.get(k) != eb.get(k)]


def judge_command(name: str, a: Mapping[str, Any], b: Mapping[str, Any], *,
                  class_facts: Sequence[str],
                  compared: Mapping[str, Mapping[str, Any]] | None = None,
                  why: Mapping[str, str] | None = None,
                  facts_known: bool = True) -> CommandVerdict:
    """``a`` the authors' record, ``b`` the reviewer's; ``class_facts`` the suite's differing
    equivalence-class facts (``why``: why each is plausible; ``facts_known``: False when the
    suite did not run, so no machine fact was compared); ``compared`` the worker's tensor
    comparisons by output label."""
    run = " ".join(a.get("run") or ())
    changes = tuple(f"{name}: the command is not the one the authors ran: {c}"
                    for c in declaration_changes(a, b))
    if b.get("status") != "ok":
        what = {"timed-out": f"ran past its timeout of {fmt(num(b.get('timeout')))} s",
                "not-started": "did not start",
                "failed": f"failed (exit {b.get('exit_code')})"}.get(str(b.get("status")),
                                                                      str(b.get("status")))
        tail = tuple(str(t) for t in b.get("tail") or ())
        last = next((t.strip() for t in reversed(tail) if t.strip()), "no output")
        more = (f" ({len(tail)} lines of its output in audit.json)" if len(tail) > 1 else "")
        ran = " ".join(b.get("run") or ()) or run  # what this run started, maybe not attested
        text = f"{name}: `{ran}` {what}: {last}{more}"
        return CommandVerdict(name=name, level="failed", run=run, reasons=(text,),
                              alone=(text,), changes=changes, tail=tail)
    facts = tuple(dict.fromkeys([*class_facts, *inherited_changes(a, b)]))
    told = "; ".join((why or {}).get(f, f) for f in facts)
    mine = {o.get("output"): o for o in b.get("outputs") or ()}
    verdicts = tuple(judge_output(o, mine.get(o.get("output")),
                                  (compared or {}).get(str(o.get("output"))))
                     for o in a.get("outputs") or ())
    notes: list[str] = []
    reasons: list[str] = []
    alone: list[str] = []
    broken = [v for v in verdicts if v.level in ("missing", "unreadable")]
    beyond = [v for v in verdicts if v.level == "beyond-tolerance"]
    within = [v for v in verdicts if v.level == "within-tolerance"]
    for v in broken:
        reasons.append(f"{name}: {v.summary}")
        alone.append(f"{name}: {v.summary}")
    if broken:
        level = "failed"
    elif beyond and facts:
        level = "explained"
        notes += [f"{name}: beyond the stated tolerance where recorded facts differ "
                  f"({told}): {v.summary}" for v in beyond]
    elif beyond:
        level = "diverged"
        for v in beyond:
            reasons.append(f"{name} diverged: {v.summary}")
            alone.append(f"{name} diverged with no recorded fact to explain it (same "
                         f"equivalence class as the authors' run): {v.summary}" if facts_known
                         else f"{name} diverged, and no machine fact was compared (the suite "
                         f"did not run): {v.summary}")
    elif within:
        level = "within-tolerance"
        notes += [f"{name}: {v.summary}" for v in within]
        if not facts and not changes:
            notes.append(f"{name}: bits differ in the same equivalence class as the authors' "
                         "run: the command is not deterministic under these settings (its "
                         "results stay within the stated tolerance)")
    else:
        level = "bit-identical"
    return CommandVerdict(name=name, level=level, run=run, reasons=tuple(reasons),
                          alone=tuple(alone), notes=tuple(notes), facts=facts,
                          outputs=verdicts, changes=changes)
