"""``verify fleet`` (one process per rank, under a launcher) and ``verify fleet-report``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

from samebits._io import atomic_write, canonical_json, read_json
from samebits.cli import options
from samebits.dsse import load_signing_key, open_document, signed_bytes
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, InputError, UsageError, quote
from samebits.ui import Output
from verify.fleet.html import render_html
from verify.fleet.nodes import with_nodes
from verify.fleet.report import FAILING, analyse, format_report, refused_report
from verify.gpu.attest import STATEMENT_TYPE

DEFAULT_OUT = Path("build/fleet.json")
FLEET_PREDICATE = "https://samebits.dev/verify-fleet/v1"


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "fleet", parents=parents,
        help="every rank: facts, environment digest, workloads, collectives; rank 0 reports",
        description="Run under torchrun or a Kubernetes job (RANK, WORLD_SIZE, LOCAL_RANK, "
        "MASTER_ADDR, MASTER_PORT), srun alone (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; rank "
        "0's host is the step's first node, the port derived from the job and step ids), "
        "mpirun (OMPI_COMM_WORLD_*) or mpiexec/PALS (PMI_RANK, PMI_SIZE), with MASTER_ADDR "
        "given. Each rank runs the preflight, "
        "then the verify-gpu suite on its own device (cuda:LOCAL_RANK, or the CPU) and an "
        "all_reduce/reduce_scatter "
        "workload (NCCL or gloo); rank 0 collects the results rank by rank with a deadline and "
        "writes the report.",
        epilog="exit codes: 0 consistent or explained; 1 a suspect rank, an undecided class, a "
        "rank missing after --rank-timeout (a partial report), or refused before running (a "
        "rank's preflight failed, two ranks on one GPU); 2 bad input or not under a launcher. "
        "Under torchrun the verdict is also rank 0's error message, shown in torchrun's "
        "summary. Example: torchrun --nnodes 4 --nproc-per-node 8 -m verify fleet --out "
        "fleet.json",
    )
    options.add_lock(p, what="each rank's preflight also checks its driver and GPU against "
                     "this lock", optional=True, once=True)
    options.deprecated_lockfile(p)
    options.add_out_file(p, what="the report", default=f"default: {DEFAULT_OUT}",
                         value=DEFAULT_OUT)
    p.add_argument("--html", type=Path, metavar="FILE", help="also write the HTML table here")
    p.add_argument("--only", action="append", metavar="NAMES",
                   help="comma-separated workloads (default: the whole suite)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="auto: cuda:LOCAL_RANK when torch sees GPUs, else the CPU")
    p.add_argument("--no-env-digest", action="store_true",
                   help="skip hashing the environment (the host name stands in)")
    p.add_argument("--rank-timeout", type=float, default=600, metavar="S",
                   help="how long rank 0 waits for a rank's check-in, record or collectives "
                   "before naming it missing in a partial report (default 600)")
    options.add_sign(p, what="the report (rank 0 writes it as an in-toto Statement, the report "
                     "its predicate)", torchrun=True)
    _node_options(p)
    options.add_project(p)
    p.set_defaults(func=run_fleet)

    r = sub.add_parser(
        "fleet-report", parents=parents, help="summarise a fleet report; write its HTML table",
        description="Read a report written by `verify fleet` and print its verdict, classes and "
        "suspects; --html writes a self-contained page (ranks x workloads, coloured).",
        epilog="exit codes: 0 consistent or explained; 1 suspects or undecided; 2 bad input")
    r.add_argument("report", type=Path, metavar="FILE", help="a `verify fleet` report")
    r.add_argument("--html", type=Path, metavar="FILE", help="write the HTML table here")
    _node_options(r)
    r.set_defaults(func=run_fleet_report)


def _node_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node-statements", action="append", type=Path, metavar="PATH",
                   help="also judge the nodes: `samebits verify node` statements (a folder of "
                   "*.json, or a file; repeatable), bare or signed. Canary runs are grouped by "
                   "class; a node whose digest leaves its class's majority is a suspect, "
                   "unhealthy nodes are listed with their reasons")
    options.add_trust(p, what="with --node-statements: every statement must be a DSSE "
                      "envelope signed by this key; others are rejected and named")


def _read_nodes(args: argparse.Namespace) -> dict | None:
    """The nodes section, or None without --node-statements (bad paths: exit 2)."""
    from samebits.dsse import load_public_key
    from verify.fleet.nodes import analyse_nodes, read_statements

    if not args.node_statements:
        if args.trust is not None:
            raise UsageError("--trust goes with --node-statements (the statements it checks)")
        return None
    trust = load_public_key(args.trust) if args.trust else None
    nodes, rejected = read_statements(args.node_statements, trust)
    return analyse_nodes(nodes, rejected, trusted_keyid=trust.keyid if trust else None)


def _finish(report: dict, out: Output, html: Path | None, extra: dict) -> int:
    if html is not None:
        atomic_write(html, render_html(report))
    out.emit({**report, **extra}, format_report(report))
    return EXIT_DIFFERENT if report["verdict"] in FAILING else EXIT_OK


def run_fleet(args: argparse.Namespace, out: Output) -> int:
    from verify.fleet.run import run_rank
    from verify.gpu.workloads import select

    only = list(select(args.only)) if args.only else None
    from verify.fleet.run import RankEnv

    me = RankEnv.from_environ()  # which launcher, which rank: a bad environment fails here
    lockfile = options.lock_file(args.lock, options.project_of(args)) if args.lock else None
    rank0 = me.rank == 0
    key = load_signing_key(args.sign) if args.sign and rank0 else None  # before the run
    nodes = _read_nodes(args) if rank0 else None  # before the run too: bad paths fail fast
    with out.phase("running the workloads on every rank") if rank0 else contextlib.nullcontext():
        outcome = run_rank(device_request=args.device, only=only,
                           skip_env_digest=args.no_env_digest, rank_timeout=args.rank_timeout,
                           lockfile=lockfile)
    if outcome is None:  # not rank 0: rank 0 reports for everyone
        return EXIT_OK
    if outcome.refused is not None:
        report = refused_report(outcome.checkins, outcome.refused,
                                world_size=me.world_size,
                                backend=outcome.backend)
    else:
        report = analyse(outcome.records, missing=outcome.missing)
    if nodes is not None:
        report = with_nodes(report, nodes)
    data = (canonical_json(report) if key is None
            else signed_bytes(canonical_json(fleet_statement(report)), key))
    atomic_write(args.out, data)
    code = _finish(report, out, args.html, {"path": str(args.out),
                                            "signed_by": key.keyid if key else None})
    if code != EXIT_OK:
        _tell_launcher(report)
    return code


def fleet_statement(report: dict) -> dict:
    """The report as an in-toto Statement: its subjects are the environments the ranks ran."""
    subjects = sorted({(n, d) for r in report["ranks"] for n, d in r["environment"].items()})
    return {"_type": STATEMENT_TYPE, "predicateType": FLEET_PREDICATE, "predicate": report,
            "subject": [{"name": n, "digest": {"sha256": d}} for n, d in subjects]}


def _tell_launcher(report: dict) -> None:
    """Under torchrun, rank 0's non-zero exit makes torchrun print a Python traceback and a
    failure summary; written to TORCHELASTIC_ERROR_FILE, the verdict is that summary's
    message instead of "To enable traceback see ...". Also the last line on stderr."""
    verdict = format_report(report).splitlines()
    summary = "samebits verify fleet: " + " | ".join(verdict)
    sys.stderr.write(f"{summary}\n")
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if path:
        with contextlib.suppress(OSError):
            Path(path).write_text(json.dumps({"message": summary,
                                              "timestamp": int(time.time())}))


def run_fleet_report(args: argparse.Namespace, out: Output) -> int:
    doc = read_json(args.report, what="fleet report",
                    hint="write one with `torchrun ... -m verify fleet --out FILE`")
    statement, envelope = open_document(doc, source=str(args.report))
    if envelope is not None:  # verify fleet --sign; `verify attestation` checks the signature
        doc = statement.get("predicate") if isinstance(statement, dict) and statement.get(
            "predicateType") == FLEET_PREDICATE else None
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or fmt != 1 or "ranks" not in doc:
        raise InputError(f"{args.report}: format = {quote(fmt)}: not a samebits fleet report "
                         "(format 1)",
                         hint="write one with `torchrun ... -m verify fleet --out FILE`")
    nodes = _read_nodes(args)
    if nodes is not None:
        doc = with_nodes(doc, nodes)
    return _finish(doc, out, args.html,
                   {"signed_by": list(envelope.keyids) if envelope else None})
