"""``samebits verify node`` (and ``python -m verify node``): one host's gate, for a Slurm
prolog, epilog or HealthCheckProgram, or a Kubernetes node check.

    samebits verify node LOCK --prefix /opt/env                # exit 0 healthy, 1 drain
    samebits verify node LOCK --prefix /opt/env --drain        # and tell Slurm
    samebits verify node LOCK --prefix /opt/env --prometheus /var/lib/node_exporter/samebits.prom
    samebits verify node LOCK --prefix /opt/env --record       # this machine's canary entry

What it checks: the environment against its lock (a stat per file the install's seal
vouches for; every byte with --full or every --full-every N runs), the driver and the kernel
coverage for the GPUs present, each GPU's health through NVML, and a known-answer canary per
device. Reason codes: ``verify.node.reasons`` (docs/reference/node-reasons.md).

Budget: under 60 s cold and 10 s warm on the cpu lock's environment. It is met by what is
*not* done: no byte of a sealed file is read (a stat each, ``--trust-seal``'s proof), the
bytecode verdicts come from the cache, shared libraries are not resolved (``verify env``
does that), the kernel scan runs only with GPUs present, and the canary (one interpreter
start with torch, ~2 s, and a few ms of work) runs in its own process while the environment
is checked. This module imports nothing heavy: torch is imported only by the canary worker,
nvidia-ml-py only when the gate runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from samebits.cli import options
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, UsageError
from samebits.ui import Output

EPILOG = ("exit codes: 0 healthy (warnings allowed unless --strict), 1 a reason to drain "
          "(or, with --strict, any reason), 2 bad input or usage; bad input never drains. "
          "Reason codes: docs/reference/node-reasons.md.")


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "node", parents=parents,
        help="gate one host: environment, driver and kernels, GPU health, a canary",
        description="One host's gate, for a Slurm prolog, epilog or HealthCheckProgram: the "
        "environment against its lock (each sealed file proven by a stat; --full hashes "
        "every byte), the driver and kernel coverage for the GPUs present, each GPU's "
        "health through NVML (ECC, retired pages, remapped rows, Xid, throttling, PCIe, "
        "NVLink), and a known-answer canary per device compared with the committed digest "
        "of its equivalence class. Each problem is a stable reason code; --drain tells "
        "Slurm, --prometheus writes a textfile-collector file, --out an in-toto statement.",
        epilog=EPILOG)
    options.add_lock(p, what="check the environment's packages against this lock (its "
                     "digest is part of the canary's class)", optional=True)
    options.add_prefix(p, what="to gate", default="default: the running one, sys.prefix")
    options.add_platform(p, what="the lock platform to compare with",
                         default="the lock's only one, else the prefix's conda subdir, else "
                         "this machine's")
    options.add_read_flags(p, python_default="the prefix's Python")
    options.add_cache_dir(p, what="the install's sealed entries, bytecode verdicts, and "
                          "node/state.json (the --full-every counter)")
    p.add_argument("--full", action="store_true",
                   help="hash every byte of the environment instead of trusting the seal")
    p.add_argument("--full-every", type=int, metavar="N",
                   help="hash every byte on every N-th run of this prefix (a counter in "
                   "CACHE/node/state.json); the output says which proof ran")
    p.add_argument("--strict", action="store_true",
                   help="fail (exit 1, drain) on warnings too: canary-unknown, pcie-gen-low, "
                   "nvml-unavailable, ...")
    p.add_argument("--drain", action="store_true",
                   help='on a failing gate run `scontrol update nodename=NODE state=drain '
                   'reason="samebits: CODE"` (CODE: the first failing reason; bounded, '
                   'a failure is reported as drain-failed)')
    p.add_argument("--node", metavar="NAME",
                   help="the Slurm node name (default: $SLURMD_NODENAME, else hostname -s)")
    p.add_argument("--gpus", type=int, metavar="N",
                   help="the node has N GPUs: fewer is gpu-missing (default: no expectation)")
    p.add_argument("--no-canary", action="store_true", help="skip the known-answer canary")
    options.add_workload_python(p)
    p.add_argument("--canary-threads", type=int, default=1, metavar="N",
                   help="torch threads of the CPU canary (default 1; part of its settings)")
    p.add_argument("--canary-timeout", type=float, default=120.0, metavar="SECONDS",
                   help="how long the canaries may take together (default 120)")
    p.add_argument("--canary-digests", type=Path, metavar="FILE",
                   help="the committed canary digests (default: verify/node/canary.toml)")
    p.add_argument("--record", action="store_true",
                   help="run only the canary and print this machine's canary.toml entry; "
                   "with --canary-digests FILE also add it there")
    p.add_argument("--xid-wait", type=float, default=0.0, metavar="SECONDS",
                   help="listen this long for critical Xid events (default 0: what is "
                   "queued; at most 60)")
    p.add_argument("--prometheus", type=Path, metavar="FILE",
                   help="write a node-exporter textfile-collector file (atomically)")
    options.add_out_file(p, what="the in-toto statement", default="default: none written")
    options.add_sign(p, what="the statement (check it with `verify attestation`)")
    options.add_project(p)
    p.set_defaults(func=run_node)


def _check(args: argparse.Namespace) -> None:
    if args.full_every is not None and args.full_every < 1:
        raise UsageError(f"--full-every {args.full_every}: must be at least 1")
    if args.canary_threads < 1:
        raise UsageError(f"--canary-threads {args.canary_threads}: must be at least 1")
    if args.gpus is not None and args.gpus < 0:
        raise UsageError(f"--gpus {args.gpus}: must be 0 or more")
    if not 0 <= args.xid_wait <= 60:
        raise UsageError(f"--xid-wait {args.xid_wait:g}: must be between 0 and 60 seconds")
    if not 0 < args.canary_timeout <= 3600:
        raise UsageError(f"--canary-timeout {args.canary_timeout:g}: must be between 0 and "
                         "3600 seconds")
    if args.record and args.no_canary:
        raise UsageError("--record runs the canary: drop --no-canary")
    if args.sign and not args.out:
        raise UsageError("--sign signs the statement --out writes", hint="add --out FILE")


def run_node(args: argparse.Namespace, out: Output) -> int:
    from samebits.dsse import load_signing_key
    from verify.node.drain import node_name
    from verify.node.gate import GateRequest

    _check(args)
    lockfile = options.lock_file(args.lock, options.project_of(args)) if args.lock else None
    if lockfile is not None and not lockfile.is_file():
        raise UsageError(f"{lockfile}: no such lockfile")
    prefix = (args.prefix or Path(sys.prefix)).absolute()
    if not prefix.is_dir():
        raise UsageError(f"--prefix {prefix}: no such folder")
    key = load_signing_key(args.sign) if args.sign else None  # a bad key fails before the run
    req = GateRequest(
        prefix=prefix, lockfile=lockfile, platform=args.platform,
        read=options.read_options(args), cache=options.cache_of(args),
        host=node_name(args.node), full=args.full, full_every=args.full_every,
        strict=args.strict, canary=not args.no_canary,
        workload_python=str(Path(args.workload_python).absolute())
        if args.workload_python else None,
        canary_threads=args.canary_threads, canary_timeout=args.canary_timeout,
        canary_digests=args.canary_digests, expect_gpus=args.gpus, xid_wait=args.xid_wait)
    if args.record:
        return _record(req, args, out)
    return _gate(req, args, out, key)


def _record(req: Any, args: argparse.Namespace, out: Output) -> int:
    import socket

    from verify.node import canary
    from verify.node.gate import gpu_part

    with out.phase("running the canary"):
        _state, gpus, driver, _ = gpu_part(_import_nvml(), xid_wait=0, expect=None)
        from samebits.lock.model import lock_digest
        from verify.node.gate import _env_python, _with_facts

        python = req.workload_python or _env_python(req.prefix)
        lock_sha = lock_digest(req.lockfile) if req.lockfile else None
        devices = [f"cuda:{i}" for i in range(len(gpus))] or ["cpu"]
        verdicts = [canary.verdict(_with_facts(canary.run_canary(
            python, d, threads=req.canary_threads, timeout=req.canary_timeout), gpus, driver),
            lock_sha256=lock_sha, table={}) for d in devices]
    failed = [v for v in verdicts if v.get("error")]
    if failed:
        from samebits.errors import ToolError

        raise ToolError(f"the canary did not run on {failed[0]['device']}: {failed[0]['error']}",
                        hint="pass --workload-python PATH: an interpreter with torch")
    entries = [canary.entry_of(v, recorded_on=socket.gethostname().split(".")[0])
               for v in verdicts]
    if args.canary_digests:
        for e in entries:
            canary.record_into(args.canary_digests, e)
    text = "".join(canary.entry_toml(e) for e in entries).rstrip()
    if args.canary_digests:
        text += f"\nrecorded into {args.canary_digests}"
    out.emit({"entries": entries, "canary": verdicts,
              "written": str(args.canary_digests) if args.canary_digests else None}, text)
    return EXIT_OK


def _import_nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def _gate(req: Any, args: argparse.Namespace, out: Output, key: Any) -> int:
    from samebits._io import atomic_write, sha256_hex
    from samebits.dsse import signed_bytes
    from verify.gpu.attest import statement_bytes
    from verify.node import prometheus
    from verify.node.drain import drain
    from verify.node.gate import node_gate
    from verify.node.reasons import Reason
    from verify.node.statement import build_node_statement

    with out.phase(f"gating {req.host}"):
        result = node_gate(req, nvml=_import_nvml())
    reasons = list(result.reasons)
    drained = None
    if args.drain and result.failing:
        ok, what = drain(req.host, result.failing[0].code)
        drained = {"ok": ok, "command": what, "code": result.failing[0].code}
        if not ok:
            reasons.append(Reason(code="drain-failed", detail=what))
    lock = (req.lockfile.name, result.lock_sha256) if req.lockfile and result.lock_sha256 \
        else None
    statement = build_node_statement(
        host=result.host, healthy=result.healthy, reasons=[r.to_dict() for r in reasons],
        env=result.env, gpus=result.gpus, canary=result.canary,
        settings={**result.settings, "drain": args.drain}, seconds=result.seconds, lock=lock)
    written = None
    if args.out:
        data = signed_bytes(statement_bytes(statement), key)
        atomic_write(args.out, data)
        written = {"path": str(args.out), "sha256": sha256_hex(data),
                   "signed_by": key.keyid if key else None}
    if args.prometheus:
        prometheus.write(args.prometheus, statement["predicate"])
    payload = {**statement["predicate"], "drained": drained, "statement": written,
               "exit": EXIT_OK if result.healthy else EXIT_DIFFERENT}
    out.emit(payload, text_of(statement["predicate"], drained, written, args.prometheus))
    return EXIT_OK if result.healthy else EXIT_DIFFERENT


def text_of(pred: dict[str, Any], drained: dict[str, Any] | None,
            written: dict[str, Any] | None, prom: Path | None) -> str:
    from verify.node.reasons import first_few

    failing = [r["code"] for r in pred["reasons"]
               if r["level"] == "drain" or pred["settings"]["strict"]]
    head = "healthy" if pred["healthy"] else f"FAILING ({', '.join(dict.fromkeys(failing))})"
    lines = [f"node {pred['host']}: {head} in {pred['seconds']:.1f} s"]
    env = pred["env"]
    if env:
        drift = "no drift" if not env["drift"] else f"{env['drift']} file(s) differ: " + \
            first_few([d["path"] for d in env["drifted"]])
        lines.append(f"env: {env['prefix']}: {env['files']:,} files, "
                     f"{env['proven_by_identity']:,} proven by a stat, "
                     f"{env['proven_by_hash']:,} hashed ({env['why']}); {drift}")
    state = pred["settings"]["gpu_state"]
    if not pred["gpus"]:
        why = {"no-driver": "no NVIDIA driver", "no-nvml": "nvidia-ml-py missing"}.get(
            state, f"NVML: {state}")
        lines.append(f"gpus: no GPU ({why}): the driver, kernel and GPU health checks did "
                     "not apply")
    for g in pred["gpus"]:
        mine = [r["code"] for r in pred["reasons"] if r.get("gpu") == g["gpu"]]
        unread = f"; not readable: {', '.join(sorted(g['unreadable']))}" \
            if g["unreadable"] else ""
        lines.append(f"gpu {g['gpu']} {g['name']}: {', '.join(mine) or 'ok'}{unread}")
    for c in pred["canary"]:
        if c.get("error"):
            lines.append(f"canary {c['device']}: did not run: {c['error']}")
        else:
            verdict = {True: "ok", False: "MISMATCH", None: "unknown class"}[c["ok"]]
            lines.append(f"canary {c['device']}: {verdict}, digest {c['digest'][:16]} "
                         f"(class {c['class']})")
    for r in pred["reasons"]:
        lines.append(f"  {r['level']:<5} {r['code']}: {r['detail']}")
    if drained:
        lines.append(f"drain: {'done' if drained['ok'] else 'FAILED'}: {drained['command']}")
    if written:
        lines.append(f"statement: {written['path']} (sha256 {written['sha256']})"
                     + (f", signed by keyid {written['signed_by']}" if written["signed_by"]
                        else ""))
    if prom:
        lines.append(f"prometheus: {prom}")
    return "\n".join(lines)
