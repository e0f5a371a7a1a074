"""``samebits attest`` (authors): an environment, its workloads' bits and a paper's commands
into an in-toto attestation to ship with the paper.

    samebits attest paper/conda-lock.yml [--prefix ENV] \\
        --out paper/reference.attestation.json [--save-outputs paper/outputs] [--only NAMES]
    samebits attest paper/ --prefix ENV     # with paper/samebits-paper.toml: its commands too

The first argument is a paper folder (or its samebits-paper.toml) or a LOCK
(``samebits.cli.options.paper_or_lock``). The pipeline is ``samebits_app.audit.attesting``'s;
this module reads the arguments, writes the attestation atomically and turns the result into
text or --json. The reviewer's side is ``samebits_app.cmd_audit``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samebits._io import atomic_write, sha256_hex
from samebits.cli import options
from samebits.dsse import load_signing_key, signed_bytes
from samebits.errors import EXIT_OK
from samebits.ui import Output
from samebits_app.cmd_audit import env_args

DEFAULT_ATTESTATION = Path("reference.attestation.json")


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    from verify.gpu.workloads.catalog import NAMES
    from verify.gpu.workloads.settings import PRECISIONS, PROFILES

    a = sub.add_parser(
        "attest", parents=parents,
        help="authors: attest an environment and its workloads' bits, to ship with a paper",
        description="Check the environment against its lock (verify env), check this machine "
        "can run it (preflight), run the deterministic workloads with the environment's own "
        "interpreter, and write an in-toto attestation (the same Statement `verify gpu` "
        "writes) for reviewers to audit against. With a paper folder (samebits-paper.toml), "
        "also run the paper's commands in the environment and record each output's digest "
        "and comparable values; their outputs are saved to the manifest's outputs folder.",
        epilog="exit codes: 0 written; 1 preflight failed, the environment is not its "
        "lock's, or a paper command failed or did not write an output it declares (nothing "
        "written); 2 bad input (a manifest's problems all listed); 5 the interpreter could "
        "not run the workloads. See README \"The paper manifest\".")
    options.add_paper_or_lock(a, what="what to attest: the environment must be the lock's "
                              "files, and the attestation names the lock")
    env_args(a)
    options.add_out_file(a, what="the attestation", default="default: the manifest's "
                         f"attestation, else {DEFAULT_ATTESTATION}")
    a.add_argument("--save-outputs", type=Path, metavar="DIR",
                   help="keep every output's raw bytes: reviewers then get max errors")
    options.add_sign(a, what="the attestation")
    options.add_cache_dir(a, what="fetched [[inputs]], under inputs/")
    a.add_argument("--only", action="append", metavar="NAMES",
                   help=f"comma-separated workloads (default: all {len(NAMES)})")
    a.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    a.add_argument("--profile", choices=sorted(PROFILES), default="deterministic")
    a.add_argument("--tf32", action="store_true", help="allow TF32 (CUDA only changes)")
    a.add_argument("--matmul-precision", choices=PRECISIONS)
    a.set_defaults(func=run_attest)


def run_attest(args: argparse.Namespace, out: Output) -> int:
    from samebits_app.audit.attesting import AttestRequest
    from samebits_app.audit.attesting import run_attest as attest
    from samebits_app.paper.manifest import read_manifest
    from verify.gpu.cmd_gpu import device_line
    from verify.gpu.workloads import select
    from verify.gpu.workloads.settings import PROFILES

    folder, lock = options.paper_or_lock(args.paper)
    manifest = read_manifest(folder) if folder is not None else None
    lockfile = (args.lockfile or (options.lock_file(lock, options.project_of(args))
                                  if lock else None)
                or (manifest.lockfile if manifest else None))
    args.out = args.out or (manifest.attestation if manifest else DEFAULT_ATTESTATION)
    args.lockfile = lockfile
    key = load_signing_key(args.sign) if args.sign else None  # before anything runs
    settings = PROFILES[args.profile].with_precision(matmul=args.matmul_precision,
                                                     tf32=True if args.tf32 else None)
    req = AttestRequest(out=args.out, lockfile=lockfile, prefix=args.prefix,
                        python=args.workload_python, platform=args.platform,
                        device=args.device,
                        names=select(args.only), settings=settings,
                        save_outputs=args.save_outputs, paper=manifest,
                        lock_env=args.lock_env, lock_python=args.lock_python,
                        cache=args.cache_dir)
    start = time.perf_counter()
    with out.steps("attest: ") as step:
        result = attest(req, progress=step)
    data = signed_bytes(result.data, key)
    atomic_write(args.out, data)
    seconds = time.perf_counter() - start
    digests = result.env_report["digests"]
    counts: dict[str, int] = {}
    for rec in result.measured.workloads.values():
        counts[rec["status"]] = counts.get(rec["status"], 0) + 1
    payload: dict[str, Any] = {
        "attestation": {"path": str(args.out), "sha256": sha256_hex(data),
                        "signed_by": key.keyid if key else None},
        "device": result.device, "device_line": device_line(result.facts, result.device),
        "python": result.python, "environment": {"prefix": result.env_report["prefix"],
                                                 "digests": dict(digests)},
        "lockfile": str(args.lockfile) if args.lockfile else None,
        "workloads": dict(result.measured.workloads), "seconds": round(seconds, 3)}
    ran = {n: result.measured.workloads[n] for n in select(None)
           if n in result.measured.workloads}  # catalog order
    width = max((len(n) for n in ran), default=8)
    lines = [device_line(result.facts, result.device),
             f"environment {result.env_report['prefix']}: "
             + (f"identical to {args.lockfile}" if args.lockfile else "as its installers "
                "recorded it"),
             f"  environment sha256:{digests['environment']}",
             f"  packages    sha256:{digests['packages']}",
             *(f"  {n:<{width}}  {r['status']:<11}  {_what(r)}" for n, r in ran.items()),
             f"workloads: {', '.join(f'{v} {k}' for k, v in sorted(counts.items()))} in "
             f"{seconds:.1f} s (run by {result.python})",
             f"attestation: {args.out} (sha256 {sha256_hex(data)})"
             + (f", signed by keyid {key.keyid}" if key else "")]
    if result.paper is not None:
        commands = result.paper["commands"]
        payload["paper"] = {"manifest": str(manifest.file) if manifest else None,
                            "outputs": str(manifest.outputs / "commands") if manifest else None,
                            "commands": {n: {"status": c["status"], "outputs": {
                                o["output"]: o.get("sha256") for o in c["outputs"]}}
                                for n, c in commands.items()}}
        for name, c in commands.items():
            lines.append(f"paper command {name}: `{' '.join(c['run'])}` in {c['cwd']}: "
                         f"{len(c['outputs'])} output(s) recorded")
            lines += [f"  {o['output']:<24} {o['kind']:<8} sha256 {o['sha256'][:16]}"
                      for o in c["outputs"]]
        if manifest is not None:
            lines.append(f"paper outputs: {manifest.outputs / 'commands'} (ship them: "
                         "reviewers compare tensors element by element)")
    if args.save_outputs:
        lines.append(f"outputs: {args.save_outputs} (ship it: reviewers get max errors)")
    out.emit(payload, "\n".join(lines))
    return EXIT_OK


def _what(result: Mapping[str, Any]) -> str:
    """A workload's line end: the first 16 hex digits of its digest, or its whole reason
    (``EFFICIENT_ATTENTION has no CPU kernel``), never a reason cut mid-word."""
    return result["sha256"][:16] if result.get("sha256") else str(result.get("detail", ""))


