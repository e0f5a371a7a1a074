"""``samebits verify gpu``: preflight, facts, workloads -> an in-toto attestation.

The one edge of the machine check: it probes (``verify.gpu.facts.detect``), reads the lockfile,
asks ``verify.env.digest.prefix_digests`` for the environment's digest, writes the attestation and
turns the results into text or JSON. Everything it calls takes data in.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from samebits._io import atomic_write, sha256_hex
from samebits.childenv import child_environ
from samebits.cli import options
from samebits.dsse import load_signing_key, signed_bytes
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, InputError, ToolError, plural
from samebits.lock.model import lock_digest
from samebits.ui import Output
from verify.gpu.attest import LockInfo, build_statement, statement_bytes
from verify.gpu.facts import Facts, detect
from verify.gpu.preflight import LockNeeds, PreflightError, check, resolve_device
from verify.gpu.workloads import NAMES, Suite, run_suite, select
from verify.gpu.workloads.catalog import BY_NAME, SUITE_VERSION
from verify.gpu.workloads.settings import PRECISIONS, PROFILES

DEFAULT_OUT = Path("build/verify-gpu.intoto.json")


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "gpu", parents=parents,
        help="run the deterministic workloads on this machine and write an attestation",
        description="Probe this machine (torch build, CUDA, driver, GPU, CPU, threads, numerics "
        "environment variables), check it can run the lock's build, run every workload under "
        "deterministic settings, hash each output, and write an in-toto Statement. Without a "
        "usable GPU the same suite runs on the CPU and every output says device: cpu.",
        epilog="exit codes: 0 ok; 1 preflight failed, a workload failed, or (--probe) a "
        "workload was unstable under deterministic settings; 2 bad input",
    )
    options.add_lock(p, what="check the driver and GPU against this lock and name it as a "
                     "subject", optional=True, once=True)
    options.deprecated_lockfile(p)
    options.add_out_file(p, what="the attestation", default=f"default: {DEFAULT_OUT}",
                         value=DEFAULT_OUT)
    p.add_argument("--probe", action="store_true",
                   help="also run the suite in fresh processes under deterministic and default "
                   "settings and report which workloads are unstable and what stabilises them")
    p.add_argument("--save-outputs", type=Path, metavar="DIR",
                   help="keep every output's raw bytes for `verify compare --outputs-a/-b`")
    options.add_sign(p, what="the Statement (check it with `verify attestation`)")
    p.add_argument("--only", action="append", metavar="NAMES",
                   help=f"comma-separated workloads (default: all {len(NAMES)}); see --list")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--device", default="auto",
                   help="auto (a GPU when torch can use one), cpu, cuda or cuda:N")
    p.add_argument("--profile", choices=sorted(PROFILES), default="deterministic",
                   help="determinism settings (default: deterministic)")
    p.add_argument("--tf32", action="store_true",
                   help="allow TF32 in fp32 GEMMs and convolutions (changes CUDA bits only)")
    p.add_argument("--matmul-precision", choices=PRECISIONS,
                   help="torch.set_float32_matmul_precision (default highest; medium lets "
                   "oneDNN use bf16 on CPUs that have it)")
    options.add_project(p)
    p.set_defaults(func=run_gpu)


def device_line(facts: Facts, device: str) -> str:
    """"device: cpu (...)" or "device: cuda:0 NVIDIA H200 (...)": the first line of every output."""
    f = facts
    if device == "cpu":
        why = (f"{plural(len(f.gpus), 'GPU')} present, not used" if f.gpus else "no GPU")
        return (f"device: cpu ({why}; {f.cpu.model}, {f.cpu.vendor} {f.cpu_isa}, "
                f"{plural(f.threads.intra_op, 'thread')}, torch {f.torch.version})")
    gpu = f.gpu(int(device.split(":")[1]))
    name = f"{gpu.name} (sm_{gpu.compute_capability.replace('.', '')}, {gpu.sm_count} SMs)" \
        if gpu else "unknown GPU"
    drv = f", driver {f.driver.version} (CUDA {f.driver.cuda})" if f.driver else ""
    return f"device: {device} {name}{drv}, torch {f.torch.version}"


# verify.env.digest.prefix_digests(sys.prefix), run by a fresh interpreter: it reads gigabytes
# (with its own worker processes) while the workloads compute, and it never forks this
# process once torch's threads and the CUDA context exist. It runs in a clean environment
# (samebits.childenv) and imports from this process's sys.path, passed as an argument: the
# same modules as here, and no start-up code of the caller's.
_DIGEST_CHILD = """
import json, sys
sys.path[:] = json.loads(sys.argv[2])
from pathlib import Path
from samebits.errors import SamebitsError
from verify.env.digest import prefix_digests
try:
    print(json.dumps(prefix_digests(Path(sys.argv[1]))))
except SamebitsError as exc:
    print(json.dumps({"error": exc.message, "hint": exc.hint}))
"""


def start_environment_digests(prefix: str = sys.prefix) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _DIGEST_CHILD, prefix, json.dumps(sys.path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env=child_environ(os.environ))


def environment_digests(proc: subprocess.Popen[str], prefix: str = sys.prefix
                        ) -> dict[str, str]:
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        tail = (stderr.strip().splitlines() or ["no message"])[-1]
        raise ToolError(f"hashing the environment {prefix} failed: {tail}")
    doc = json.loads(stdout)
    if "error" in doc:
        raise InputError(f"environment {prefix}: {doc['error']}", hint=doc.get("hint"))
    return {str(k): str(v) for k, v in doc.items()}


def run_gpu(args: argparse.Namespace, out: Output) -> int:
    names = select(args.only)
    if args.list:
        rows = [f"{n:<24} {BY_NAME[n].summary}" for n in names]
        out.emit({"workloads": {n: BY_NAME[n].summary for n in names}}, "\n".join(rows))
        return EXIT_OK
    lockfile = options.lock_file(args.lock, options.project_of(args)) if args.lock else None
    needs = LockNeeds.read(lockfile) if lockfile else None
    key = load_signing_key(args.sign) if args.sign else None  # a bad key fails before the run
    with out.phase("probing this machine (torch, CUDA, driver, GPU, CPU)"):
        facts = detect()
    device = resolve_device(facts, args.device)
    problems = check(facts, device=device, requested=args.device, lock=needs, prefix=sys.prefix)
    if problems:
        raise PreflightError(problems)
    settings = PROFILES[args.profile].with_precision(matmul=args.matmul_precision,
                                                     tf32=True if args.tf32 else None)
    start = time.perf_counter()
    hashing = start_environment_digests()  # another process: changes no bits here
    try:
        with out.progress(f"running {plural(len(names), 'workload')} on {device}",
                          total=len(names)) as advance:
            suite = run_suite(facts, device=device, settings=settings, only=names,
                              save_outputs=args.save_outputs,
                              progress=lambda n: advance(description=n))
    except BaseException:
        hashing.kill()
        hashing.communicate()
        raise
    seconds = time.perf_counter() - start
    env_digests = environment_digests(hashing)
    lock = None
    if needs is not None:
        lock = LockInfo(name=Path(needs.path).name, sha256=lock_digest(Path(needs.path)),
                        environment=needs.environment, generation=needs.generation,
                        cuda=needs.cuda)
    statement = build_statement(
        facts=facts, device=device, settings=suite.settings,
        workloads={n: r.to_dict() for n, r in suite.results.items()},
        suite_version=SUITE_VERSION, environment=env_digests, lock=lock,
        coverage=_coverage(facts, device))
    data = signed_bytes(statement_bytes(statement), key)
    atomic_write(args.out, data)

    report = None
    if args.probe:
        from verify.gpu.probe import format_probe, probe, subprocess_runner

        with out.progress(f"probing {plural(len(names), 'workload')} for stability: fresh "
                          "processes under deterministic and default settings",
                          total=None) as advance:
            report = probe(names, device=device, runner=subprocess_runner(device=device),
                           base=settings, parallel=4 if device == "cpu" else 1,
                           progress=lambda d: advance(description=d))

    failed = [n for n, r in suite.results.items() if r.status == "error"]
    unstable = report.unstable("deterministic") if report else ()
    payload: dict[str, Any] = {
        "device": device, "device_line": device_line(facts, device), "preflight": "ok",
        "settings": dict(suite.settings), "seconds": round(seconds, 3),
        "workloads": {n: {**r.to_dict(), "seconds": round(r.seconds, 4)}
                      for n, r in suite.results.items()},
        "attestation": {"path": str(args.out), "sha256": sha256_hex(data),
                        "signed_by": key.keyid if key else None},
        "probe": report.to_dict() if report else None,
    }
    text = [device_line(facts, device), _preflight_line(needs, device), _settings_line(suite),
            *_workload_lines(suite),
            f"workloads: {_counts(suite)} in {seconds:.1f} s",
            f"attestation: {args.out} (sha256 {sha256_hex(data)})"
            + (f", signed by keyid {key.keyid}" if key else "")]
    if report:
        text.append(format_probe(report))
    if failed:
        text.append(f"failed: {', '.join(failed)} (see the detail above)")
    out.emit(payload, "\n".join(text))
    return EXIT_DIFFERENT if failed or unstable else EXIT_OK


def _coverage(facts: Facts, device: str) -> dict[str, Any]:
    """What this environment's kernels run on, and the decision for the GPU in use."""
    from verify.kernels.codescan import scan_prefix
    from verify.kernels.report import summary

    gpu = facts.gpu(int(device.split(":")[1])) if device.startswith("cuda") else None
    return summary(scan_prefix(Path(sys.prefix)), gpu_cc=gpu.compute_capability if gpu else None)


def _preflight_line(needs: LockNeeds | None, device: str) -> str:
    if needs is None:
        return "preflight: ok (no lockfile given)"
    cuda = f"__cuda {needs.cuda}" if needs.cuda else "no CUDA"
    gen = needs.generation or "unknown generation"
    line = f"preflight: ok against {needs.path} ({gen}, {cuda})"
    if device == "cpu" and needs.cuda:
        line += "; no GPU in use, so the driver and GPU checks did not apply"
    return line


def _settings_line(suite: Suite) -> str:
    s = suite.settings
    det = "on" if s["deterministic_algorithms"] else "off"
    return (f"settings: {s['profile']} (use_deterministic_algorithms {det}, cudnn.benchmark "
            f"{'on' if s['cudnn_benchmark'] else 'off'}, CUBLAS_WORKSPACE_CONFIG="
            f"{s['cublas_workspace_config'] or 'unset'}); float32 matmul precision "
            f"{s['float32_matmul_precision']}, cuDNN TF32 "
            f"{'on' if s['cudnn_allow_tf32'] else 'off'}")


def _workload_lines(suite: Suite) -> list[str]:
    width = max((len(n) for n in suite.results), default=10)
    lines = []
    for n, r in suite.results.items():
        what = r.sha256[:16] if r.sha256 else r.detail
        lines.append(f"  {n:<{width}}  {r.status:<11}  {what}  {r.seconds:.2f} s")
    return lines


def _counts(suite: Suite) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(suite.counts().items()))
