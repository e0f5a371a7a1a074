"""``verify fleet`` (the ranks under a launcher, one report) and ``verify fleet-report``.

``verify fleet`` is two things, told apart by a ``--`` on its command line:

    samebits verify fleet [LOCK] --prefix ENV [options] -- LAUNCHER ARGS...
        samebits' own process starts the launcher (torchrun, srun, mpiexec, mpirun) with the
        ranks running ENV's Python and nothing installed there (``verify.fleet.start``), answers
        rank 0's check-ins with the preflight, and writes the report from rank 0's outcome
    torchrun ... -m verify fleet [LOCK] [options]      (srun ... python -m verify fleet ...)
        each rank is samebits itself, in an environment that holds samebits beside torch

Either way the ranks do ``verify.fleet.run.run_rank`` and the report is
``verify.fleet.judge.fleet_report``'s, so both judge the same bits the same way; only the
environment digest differs (``verify env``'s where a rank is samebits, ``verify.fleet.tree``'s
in the environment under test). The rank options are ``verify.fleet.rankopts``' (the rank
program ``python -m verify.fleet`` reads the same ones).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from samebits._io import atomic_write, canonical_json, read_json
from samebits.cli import options
from samebits.dsse import load_signing_key, open_document, signed_bytes
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, InputError, UsageError, quote
from samebits.ui import Output
from verify.fleet.html import render_html
from verify.fleet.nodes import with_nodes
from verify.fleet.rankopts import add_rank_options, no_torch
from verify.fleet.report import FAILING, format_report
from verify.gpu.attest import STATEMENT_TYPE

DEFAULT_OUT = Path("build/fleet.json")
FLEET_PREDICATE = "https://samebits.dev/verify-fleet/v1"
USAGE = "%(prog)s [LOCK] [options] [-- LAUNCHER ARGS...]"


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = options.add_tail_parser(
        sub, "fleet", "launch", parents=parents, usage=USAGE,
        help="every rank: facts, environment digest, workloads, collectives; one report",
        description="With -- LAUNCHER ARGS: start the launcher (torchrun, srun, mpiexec, "
        "mpirun) with one rank per process running the environment's own Python "
        "(--prefix ENV: ENV/bin/python; --workload-python another) and nothing installed "
        "there; samebits appends the rank program to the launcher's command line, judges "
        "every rank's preflight and writes the report. Without --: this process is a rank, "
        "under torchrun or a Kubernetes job (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, "
        "MASTER_PORT), srun alone (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; rank 0's "
        "host is the step's first node, the port derived from the job and step ids), "
        "mpirun (OMPI_COMM_WORLD_*) or mpiexec/PALS (PMI_RANK, PMI_SIZE), with MASTER_ADDR "
        "given, in an environment that holds samebits beside torch. Each rank runs the "
        "preflight, then the verify-gpu suite on its own device (cuda:LOCAL_RANK, or the "
        "CPU) and an all_reduce/reduce_scatter workload (NCCL or gloo); rank 0 collects "
        "the results rank by rank with a deadline.",
        epilog="exit codes: 0 consistent or explained; 1 a suspect rank, an undecided "
        "class, a rank missing after --rank-timeout (a partial report), or refused before "
        "running (a rank's preflight failed, two ranks on one GPU); 2 bad input, no torch "
        "for the ranks, or not under a launcher; 5 the launcher ended and rank 0 wrote no "
        "outcome. Under torchrun as a rank the verdict is also rank 0's error message, "
        "shown in torchrun's summary. Examples: samebits verify fleet --prefix /opt/env "
        "--out fleet.json -- torchrun --nnodes 4 --nproc-per-node 8; samebits verify "
        "fleet --prefix /opt/env --out fleet.json -- srun -N 4 --ntasks-per-node 8",
    )
    options.add_lock(p, what="each rank's preflight also checks its driver and GPU against "
                     "this lock", optional=True, once=True)
    options.deprecated_lockfile(p)
    options.add_prefix(p, what="the ranks run in (with -- LAUNCHER): its bin/python runs "
                       "each rank, nothing is installed into it", default="default: the "
                       "running one, this Python")
    options.add_workload_python(p)
    options.add_out_file(p, what="the report", default=f"default: {DEFAULT_OUT}",
                         value=DEFAULT_OUT)
    p.add_argument("--html", type=Path, metavar="FILE", help="also write the HTML table here")
    add_rank_options(p)
    options.add_sign(p, what="the report (rank 0 writes it as an in-toto Statement, the report "
                     "its predicate)", torchrun=True)
    _node_options(p)
    options.add_project(p)
    p.set_defaults(func=run_fleet, launch=None)

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
    from verify.gpu.workloads import select

    if args.launch is None and (args.prefix is not None or args.workload_python is not None):
        flag = "--prefix" if args.prefix is not None else "--workload-python"
        raise UsageError(f"{flag} names the environment the ranks run in: give the launcher "
                         "after --", hint="samebits verify fleet --prefix ENV --out fleet.json "
                         "-- torchrun --nproc-per-node 2 (or -- srun -n 2)")
    only = list(select(args.only)) if args.only else None  # unknown names fail here
    lockfile = options.lock_file(args.lock, options.project_of(args)) if args.lock else None
    if args.launch is not None:
        return _launch(args, out, lockfile)
    return _rank(args, out, lockfile, only)


def _launch(args: argparse.Namespace, out: Output, lockfile: Path | None) -> int:
    """``samebits verify fleet ... -- LAUNCHER``: start the ranks, then report."""
    from verify.fleet.judge import fleet_report, preflight_judge
    from verify.fleet.rankopts import rank_argv
    from verify.fleet.start import check_launcher, launcher_word, ranks_python, start
    from verify.gpu.preflight import LockNeeds

    check_launcher(args.launch)
    python = ranks_python(args.prefix, args.workload_python, launcher_word(args.launch))
    needs = LockNeeds.read(lockfile) if lockfile else None
    key = load_signing_key(args.sign) if args.sign else None  # before the run
    nodes = _read_nodes(args)  # before the run too: bad paths fail fast
    # no progress display: the ranks write to the same terminal while it would redraw
    started = start(args.launch, python=python, rank_args=rank_argv(args), out=args.out,
                    judge=preflight_judge(needs),
                    announce=lambda cmd: out.info(f"running: {shlex.join(cmd)}"))
    if started.returncode != 0:
        out.info(f"{launcher_word(args.launch)} exited {started.returncode}")
    if started.outcome is None:
        out.info(f"no report here: rank 0 ran on {started.elsewhere}, under another node's "
                 "torchrun; that node's `samebits verify fleet` writes it")
        return started.returncode
    return _publish(fleet_report(started.outcome), args, out, key, nodes, tell=False)


def _rank(args: argparse.Namespace, out: Output, lockfile: Path | None,
          only: list[str] | None) -> int:
    """``torchrun -m verify fleet``: this process is one rank; rank 0 reports."""
    from verify.fleet.launcher import launcher_name

    missing = no_torch(launcher_name(os.environ))
    if missing is not None:
        raise UsageError(missing)
    from verify.env.digest import prefix_digests
    from verify.fleet.judge import fleet_report, preflight_judge
    from verify.fleet.run import RankEnv, run_rank
    from verify.gpu.preflight import LockNeeds

    me = RankEnv.from_environ()  # which launcher, which rank: a bad environment fails here
    rank0 = me.rank == 0
    key = load_signing_key(args.sign) if args.sign and rank0 else None  # before the run
    nodes = _read_nodes(args) if rank0 else None  # before the run too: bad paths fail fast
    needs = LockNeeds.read(lockfile) if lockfile and rank0 else None
    with out.phase("running the workloads on every rank") if rank0 else contextlib.nullcontext():
        outcome = run_rank(judge=preflight_judge(needs),
                           env_digest=None if args.no_env_digest else (
                               lambda prefix: prefix_digests(Path(prefix))),
                           device_request=args.device, only=only,
                           rank_timeout=args.rank_timeout, me=me)
    if outcome is None:  # not rank 0: rank 0 reports for everyone
        return EXIT_OK
    return _publish(fleet_report(outcome), args, out, key, nodes, tell=True)


def _publish(report: dict[str, Any], args: argparse.Namespace, out: Output, key: Any,
             nodes: dict | None, *, tell: bool) -> int:
    """Fold in the nodes, sign, write the report and its page, print the verdict."""
    if nodes is not None:
        report = with_nodes(report, nodes)
    data = (canonical_json(report) if key is None
            else signed_bytes(canonical_json(fleet_statement(report)), key))
    atomic_write(args.out, data)
    code = _finish(report, out, args.html, {"path": str(args.out),
                                            "signed_by": key.keyid if key else None})
    if code != EXIT_OK and tell:
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
                    hint="write one with `samebits verify fleet --prefix ENV --out FILE -- "
                    "torchrun ...`")
    statement, envelope = open_document(doc, source=str(args.report))
    if envelope is not None:  # verify fleet --sign; `verify attestation` checks the signature
        doc = statement.get("predicate") if isinstance(statement, dict) and statement.get(
            "predicateType") == FLEET_PREDICATE else None
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or fmt != 1 or "ranks" not in doc:
        raise InputError(f"{args.report}: format = {quote(fmt)}: not a samebits fleet report "
                         "(format 1)",
                         hint="write one with `samebits verify fleet --prefix ENV --out FILE -- "
                         "torchrun ...`")
    nodes = _read_nodes(args)
    if nodes is not None:
        doc = with_nodes(doc, nodes)
    return _finish(doc, out, args.html,
                   {"signed_by": list(envelope.keyids) if envelope else None})
