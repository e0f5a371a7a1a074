"""What samebits' own process does with what the ranks gathered: the preflight, the statements,
the report.

A rank carries no more of samebits than runs on the standard library and torch
(``verify.fleet.run``): its check-in holds its machine's facts, its record the parts of its
attestation. The rest needs samebits' own dependencies (the lock's needs are read with yaml,
the GPU registry with packaging) and runs here, in-process for ``torchrun -m verify fleet``
(each rank is samebits) and in the launcher for ``samebits verify fleet --prefix ENV --
LAUNCHER`` (the ranks are the environment's interpreter, ``verify.fleet.handoff``):

    preflight_judge(needs)   rank 0's judge: ``verify.gpu.preflight.check`` on each check-in's
                             facts, device and prefix, against the lock's needs
    with_statements(recs)    each record's in-toto Statement (``verify.gpu.attest``), made from
                             its parts: the records ``verify.fleet.report.analyse`` reads
    fleet_report(outcome)    the report: ``analyse``, or ``refused_report`` for a refused group

All three are pure but for what ``check`` and ``build_statement`` are: the same facts give the
same bytes, whichever side ran them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from verify.fleet.report import analyse, refused_report
from verify.fleet.run import Outcome
from verify.gpu.attest import build_statement
from verify.gpu.facts import Facts
from verify.gpu.preflight import LockNeeds, check

if TYPE_CHECKING:
    from verify.fleet.run import Judge

# the parts of a record its statement is made of (verify.fleet.run.run_rank)
PARTS = ("facts", "settings", "workloads", "suite_version", "environment")


def preflight_judge(needs: LockNeeds | None) -> Judge:
    """The preflight of every checked-in rank, against ``needs`` (the lock's, or None)."""
    def judge(checkins: Sequence[Mapping[str, Any]]) -> dict[int, list[dict[str, str]]]:
        out = {}
        for c in checkins:
            rank = int(c["rank"])
            facts = Facts.from_dict(c["facts"], where=f"rank {rank}'s check-in: facts")
            problems = check(facts, device=str(c["device"]), requested=str(c["requested"]),
                             lock=needs, prefix=str(c["prefix"]))
            out[rank] = [p.to_json() for p in problems]
        return out

    return judge


def with_statements(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each record with its ``statement`` in place of the parts it is made of."""
    out = []
    for rec in records:
        where = f"rank {rec.get('rank')}'s record"
        statement = build_statement(
            facts=Facts.from_dict(rec["facts"], where=f"{where}: facts"), device=rec["device"],
            settings=rec["settings"], workloads=rec["workloads"],
            suite_version=int(rec["suite_version"]), environment=rec["environment"])
        out.append({**{k: v for k, v in rec.items() if k not in PARTS}, "statement": statement})
    return out


def fleet_report(outcome: Outcome) -> dict[str, Any]:
    """The fleet report (format 1) of what rank 0 returned."""
    if outcome.refused is not None:
        return refused_report(outcome.checkins, outcome.refused,
                              world_size=outcome.world_size, backend=outcome.backend)
    return analyse(with_statements(outcome.records), missing=outcome.missing)
