"""The fleet report: which ranks agree, which differ and why, which device to distrust.

``analyse(records)`` is pure: it takes the per-rank records gathered by ``verify.fleet.run``
(each holding an attestation Statement, its host, device, GPU UUID and collective digests) and
returns the versioned report document (format 1), canonical and byte-stable for the same
results. The rules:

* Ranks are grouped into equivalence classes by ``verify.gpu.compare.class_id``: the same torch
  build, CUDA/cuDNN/cuBLAS, GPU model and SM count (or CPU ISA and thread count), the same
  settings and numerics environment variables.
* Within a class, each workload's digest held by a strict majority of the class is the
  reference; a rank that differs is a **suspect**: "suspect a hardware fault (silent data
  corruption) or undeclared drift", named with its host, device and GPU UUID. A class of two
  that disagrees has no majority: both ranks are listed as undecided.
* Across classes, each class is compared with the largest one (``verify.gpu.compare.compare``) and
  each differing workload is attributed to the facts that differ: explained, not faulty.
* Environments: ranks grouped by environment digest; a group that differs from the largest is
  listed with the facts in which its representative differs.
* Collectives: every rank must hold the same all_reduce bytes, and each rank's two repetitions
  must agree; a rank that breaks either is a suspect too.
* Missing ranks (no record within the per-rank timeout) are named; the others' results stand
  in a partial report (verdict ``incomplete`` unless there are suspects).

``refused_report`` is the document when the group did not run at all (``verify.fleet.checkin``:
a rank's preflight, two ranks on one GPU, a rank that never checked in).

Verdicts and exit codes: consistent, explained (0); suspects, incomplete, undecided, refused (1);
with node statements (``verify.fleet.nodes``) also untrusted and unhealthy (1).

``hosts`` (``verify.fleet.hosts``): which ranks ran on each host and which host is the odd one.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from samebits.errors import InputError, plural
from verify.fleet.checkin import refusal_lines
from verify.fleet.hosts import STAND_IN, host_docs, host_lines
from verify.fleet.nodes import node_lines
from verify.gpu.attest import Attestation, parse_attestation
from verify.gpu.compare import class_id, class_label, compare, flat_facts

FLEET_FORMAT = 1
SUSPECT = "suspect a hardware fault (silent data corruption) or undeclared drift"


def _majority(votes: Mapping[int, str]) -> str | None:
    if not votes:
        return None
    (value, n), *rest = Counter(votes.values()).most_common()
    return value if n * 2 > len(votes) else None


def _rank_attestations(records: Sequence[Mapping[str, Any]]) -> dict[int, Attestation]:
    out = {}
    for rec in records:
        try:
            source = f"rank {rec['rank']}"
            out[int(rec["rank"])] = parse_attestation(rec["statement"], source=source)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"fleet record: {exc}") from None
    return out


def _env_key(att: Attestation) -> str:
    return ",".join(f"{n}={d}" for n, d in sorted(att.subjects))


def _classes(class_of: Mapping[int, str]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for rank, cid in sorted(class_of.items()):
        groups[cid].append(rank)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0])))


def _workload_digest(att: Attestation, name: str) -> str:
    rec = att.workloads.get(name) or {}
    return rec.get("sha256") or str(rec.get("status", "absent"))


def _in_class(ranks: list[int],
              atts: Mapping[int, Attestation]) -> tuple[dict[int, set[str]], list[dict]]:
    """Per rank, the workloads where it leaves its class's majority; and undecided workloads."""
    deviating: dict[int, set[str]] = defaultdict(set)
    undecided = []
    names = sorted({n for r in ranks for n in atts[r].workloads})
    for name in names:
        votes = {r: _workload_digest(atts[r], name) for r in ranks}
        if len(set(votes.values())) == 1:
            continue
        ref = _majority(votes)
        if ref is None:
            undecided.append({"workload": name, "ranks": ranks,
                              "digests": {str(r): v for r, v in votes.items()}})
            continue
        for r, v in votes.items():
            if v != ref:
                deviating[r].add(name)
    return deviating, undecided


def _collectives(records: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[int, set]]:
    """Per "op/size": do the ranks agree (all_reduce: every rank holds the same sum) and does
    each rank's second repetition repeat its first? A rank that breaks either is returned."""
    bad: dict[int, set[str]] = defaultdict(set)
    ops = sorted({k.rsplit("/", 1)[0] for rec in records for k in rec.get("collectives", {})})
    doc: dict[str, Any] = {}
    for op in ops:
        entry: dict[str, Any] = {}
        for rec in records:
            coll, rank = rec.get("collectives", {}), int(rec["rank"])
            if coll.get(f"{op}/1") != coll.get(f"{op}/2"):
                bad[rank].add(f"{op}: repetitions differ")
        entry["repetitions_agree"] = not any(f"{op}: repetitions differ" in b
                                             for b in bad.values())
        if op.startswith("all_reduce"):
            votes = {int(rec["rank"]): rec.get("collectives", {}).get(f"{op}/1", "absent")
                     for rec in records}
            entry["ranks_agree"] = len(set(votes.values())) == 1
            ref = _majority(votes)
            for r, v in votes.items():
                if ref is not None and v != ref:
                    bad[r].add(f"{op}: result differs from the other ranks")
        doc[op] = entry
    return doc, bad


FAILING = ("suspects", "incomplete", "undecided", "refused", "untrusted", "unhealthy")


def refused_report(checkins: Sequence[Mapping[str, Any]], why: Mapping[str, Any],
                   world_size: int, backend: str) -> dict[str, Any]:
    """The report of a fleet that was refused before anything ran."""
    ranks: list[dict[str, Any]] = [
        {"rank": int(c["rank"]), "host": c.get("host"), "local_rank": c.get("local_rank"),
         "device": c.get("device"), "gpu_uuid": c.get("gpu_uuid"), "class": None,
         "collective_env": {}, "environment": {}, "workloads": {}}
        for c in sorted(checkins, key=lambda c: int(c["rank"]))]
    return {
        "format": FLEET_FORMAT, "verdict": "refused", "world_size": world_size,
        "backend": backend, "workloads": [], "ranks": ranks, "hosts": host_docs(ranks),
        "classes": [], "environments": [], "collectives": {}, "suspects": [], "undecided": [],
        "preflight": list(why.get("preflight", ())),
        "shared_devices": list(why.get("shared_devices", ())),
        "missing": list(why.get("missing", ())),
    }


def analyse(records: Sequence[Mapping[str, Any]],
            missing: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The fleet report document for ``records`` (one per rank that reported) and the ranks
    that did not (``missing``: rank, host, device, reason)."""
    if not records:
        raise InputError("fleet: no rank records")
    by_rank = {int(r["rank"]): r for r in records}
    atts = _rank_attestations(records)
    # class_id reads every fact of a rank: once per rank, the report's main cost at scale
    class_of = {r: class_id(att) for r, att in atts.items()}
    classes = _classes(class_of)
    main_class = next(iter(classes))

    suspects: dict[int, dict[str, Any]] = {}
    undecided: list[dict[str, Any]] = []
    class_docs = []
    for cid, ranks in classes.items():
        rep = atts[ranks[0]]
        deviating, und = _in_class(ranks, atts)
        undecided += [{**u, "class": cid} for u in und]
        for r, names in deviating.items():
            suspects.setdefault(r, {"workloads": set(), "collectives": set()})["workloads"] |= names
        doc: dict[str, Any] = {"id": cid, "label": class_label(rep), "ranks": ranks}
        if cid != main_class:
            rep_main = atts[classes[main_class][0]]
            rep_ranks = [r for r in ranks if r not in deviating] or ranks
            report = compare(rep_main, atts[rep_ranks[0]])
            doc["versus"] = main_class
            doc["differing_facts"] = [{"key": d.key, "reference": d.a, "this": d.b}
                                      for d in report.class_differences]
            doc["differing_workloads"] = [
                {"workload": w.name, "attributed_to": list(w.attributed_to),
                 "expected": w.expected} for w in report.different]
        class_docs.append(doc)

    coll, bad_coll = _collectives(records)
    for r, keys in bad_coll.items():
        suspects.setdefault(r, {"workloads": set(), "collectives": set()})["collectives"] |= keys

    env_groups: dict[str, list[int]] = defaultdict(list)
    for rank, att in sorted(atts.items()):
        env_groups[_env_key(att)].append(rank)
    envs = sorted(env_groups.values(), key=lambda rs: (-len(rs), rs[0]))
    main_env = atts[envs[0][0]]
    env_docs = []
    for ranks in envs:
        att = atts[ranks[0]]
        fa, fb = flat_facts(main_env), flat_facts(att)
        diff = sorted(k for k in {*fa, *fb} if fa.get(k) != fb.get(k)
                      and not k.startswith(("gpu.uuid", "device_name", "gpus")))
        env_docs.append({"ranks": ranks, "subjects": dict(att.subjects),
                         "differs_from_largest_in": [] if ranks is envs[0] else diff})

    suspect_docs = [
        {"rank": r, "host": by_rank[r].get("host"), "device": by_rank[r].get("device"),
         "gpu_uuid": by_rank[r].get("gpu_uuid"), "class": class_of[r],
         "workloads": sorted(s["workloads"]), "collectives": sorted(s["collectives"]),
         "verdict": SUSPECT}
        for r, s in sorted(suspects.items())]
    explained = any("differing_workloads" in c and c["differing_workloads"] for c in class_docs)
    verdict = ("suspects" if suspect_docs else "incomplete" if missing
               else "undecided" if undecided else "explained" if explained else "consistent")
    order = sorted({n for att in atts.values() for n in att.workloads})
    rank_docs = [
        {"rank": r, "host": rec.get("host"), "local_rank": rec.get("local_rank"),
         "device": rec.get("device"), "gpu_uuid": rec.get("gpu_uuid"),
         "class": class_of[r], "collective_env": rec.get("collective_env", {}),
         "environment": dict(atts[r].subjects),
         "workloads": {n: _workload_digest(atts[r], n) for n in order}}
        for r, rec in sorted(by_rank.items())]
    return {
        "format": FLEET_FORMAT,
        "verdict": verdict,
        "world_size": len(records),
        "backend": sorted({str(r.get("backend")) for r in records})[0],
        "workloads": order,
        "ranks": rank_docs,
        "hosts": host_docs(rank_docs),
        "classes": class_docs,
        "environments": env_docs,
        "collectives": coll,
        "suspects": suspect_docs,
        "undecided": undecided,
        "preflight": [],
        "shared_devices": [],
        "missing": sorted((dict(m) for m in missing), key=lambda m: int(m["rank"])),
    }


class CellStates:
    """How each (rank, workload) cell reads: ok, suspect, explained, undecided or not-run.
    Indexed once, so a page of N ranks x W workloads costs O(N x W), not O(N^2 x W)."""

    def __init__(self, report: Mapping[str, Any]) -> None:
        self.suspect = {(s["rank"], w) for s in report["suspects"] for w in s["workloads"]}
        self.undecided = {(r, u["workload"]) for u in report["undecided"] for r in u["ranks"]}
        self.rows = {r["rank"]: r for r in report["ranks"]}
        self.explained = {(r, d["workload"]) for c in report["classes"] for r in c["ranks"]
                          for d in c.get("differing_workloads", ())}

    def __call__(self, rank: int, workload: str) -> str:
        if (rank, workload) in self.suspect:
            return "suspect"
        if (rank, workload) in self.undecided:
            return "undecided"
        if len(self.rows[rank]["workloads"].get(workload, "absent")) != 64:
            return "not-run"
        return "explained" if (rank, workload) in self.explained else "ok"


def cell_state(report: Mapping[str, Any], rank: int, workload: str) -> str:
    """How one (rank, workload) cell reads (``CellStates`` for a whole page)."""
    return CellStates(report)(rank, workload)


def format_report(report: Mapping[str, Any]) -> str:
    hosts = report.get("hosts")  # reports written before hosts were summarised have none
    on = f" on {plural(len(hosts), 'host')}" if hosts else ""
    lines = [f"fleet: {plural(report['world_size'], 'rank')}{on}, backend {report['backend']}, "
             f"{plural(len(report['classes']), 'class', 'classes')}, "
             f"verdict: {report['verdict'].upper()}"]
    for c in report["classes"]:
        lines.append(f"class {c['id']}: ranks {_ranks(c['ranks'])}: {c['label']}")
        for d in c.get("differing_workloads", ()):
            why = ", ".join(d["attributed_to"]) or "no recorded fact"
            lines.append(f"  {d['workload']}: differs from class {c['versus']}; "
                         f"explained by {why}")
    host_of = {r["rank"]: str(r["host"]) for r in report["ranks"]}
    for e in report["environments"][1:]:
        if set(e["subjects"]) == {STAND_IN}:  # --no-env-digest: each host's name stands in
            continue
        where = ", ".join(sorted({host_of.get(r, "?") for r in e["ranks"]}))
        lines.append(f"environment of ranks {_ranks(e['ranks'])} ({where}) differs from the "
                     "largest group in: "
                     f"{', '.join(e['differs_from_largest_in']) or 'its digest only'}")
    lines += host_lines(hosts or ())
    for s in report["suspects"]:
        what = ", ".join([*s["workloads"], *s["collectives"]])
        lines.append(f"SUSPECT rank {s['rank']} on {s['host']} ({s['device']}"
                     f"{', GPU ' + s['gpu_uuid'] if s['gpu_uuid'] else ''}): {what}: "
                     f"UNEXPLAINED, {SUSPECT}")
    for u in report["undecided"]:
        lines.append(f"UNDECIDED {u['workload']}: ranks {_ranks(u['ranks'])} of class "
                     f"{u['class']} disagree with no majority; add ranks or a reference")
    lines += refusal_lines(report)
    if report.get("nodes") is not None:
        lines += node_lines(report["nodes"])
    if report["verdict"] == "incomplete":
        lines.append("a partial report: the ranks above that reported are compared; the "
                     "missing ones are not")
    return "\n".join(lines)


def _ranks(ranks: Sequence[int]) -> str:
    return ",".join(str(r) for r in ranks)
