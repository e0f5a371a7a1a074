"""``python -m tests.bench verify-env``: ``verify env`` on a real venv with torch, beside baselines.

Builds (or reuses) ``build/bench/torch-venv`` (``python -m venv`` + ``pip install torch==2.13.0``)
and times, in interleaved rounds after one warm-up round (page cache hot for everyone):

    ours      verify env's work in a fresh process: walk, records, parallel hashing, drift and
              both digests (``--no-linkage``); the linkage check is timed on its own
    xargs     ``find P -type f -print0 | xargs -0 -P<jobs> sha256sum``
    loop      one process: walk, then ``hashlib.file_digest`` on each file
    cli       ``python -m verify env --prefix P --no-linkage --json`` end to end (interpreter
              start and the samebits CLI's imports included), for reference
    full      the full default check (``check_env``: hashing, records, the venv's base
              interpreter and its stdlib, every .pyc against its source, linkage), once with
              an empty bytecode cache (first run: every pyc compiled by the venv's
              interpreter) and then repeated with the cache it filled; goal for the repeated
              run: under 2x "ours" (hashing alone)

"ours" and "loop" are timed inside their process after imports; xargs from outside (its
processes start in milliseconds). Each figure is the best of the rounds. Peak RSS: the
verifying process, and the largest hashing worker.

    --venv=DIR    the venv to use (default build/bench/torch-venv)
    --rounds=N    timed rounds (default 3)
    --jobs=N      hashing processes and xargs -P (default: available cores)

    limit     the 2-core SHA-256 limit: the same number of bytes "ours" hashed, hashed from
              memory (one buffer, hashed over and over) by ``--jobs`` processes at once, timed
              from when all of them are ready; also the one-file bound (the largest file
              hashed at one core's rate: no split makes a single file faster)
    floor     the system calls alone of a verifier that reads every file: the walk with a
              stat per entry, then every file opened, read whole and closed by ``--jobs``
              processes, no hashing; with the limit it gives the bound: the hashing's CPU and
              the floor's CPU shared on the cores (no verifier that reads every file does
              better on this machine), printed as a share of the limit

Each figure has the load average (``os.getloadavg()``, 1 minute) beside it: a figure taken
while the load is above the core count is not one, and the summary says so. Goal (issue 44):
"ours" at >= 85 % of the limit (limit seconds / ours seconds); issue 26 asked 60 %, up from
37 % before it.

(``python -m tests.bench`` passes on only the arguments that start with a dash: write
``--rounds=5``, not ``--rounds 5``.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench import stat_walk

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = ROOT / "build" / "bench" / "torch-venv"
TORCH = "torch==2.13.0"
GOAL_XARGS, GOAL_LOOP, GOAL_RSS_MB, GOAL_FULL, GOAL_LIMIT = 2.5, 1.7, 150, 2.0, 0.85
LIMIT_BUFFER = 8 << 20     # bytes hashed over and over by each process of the limit


def ensure_venv(venv: Path) -> None:
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    if any(site.glob("torch-2.13.0*.dist-info")):
        return
    print(f"building {venv} ({TORCH}) ...", flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", TORCH],
                   check=True)


# ------------------------------------------------------------------ children (fresh processes)

def child_ours(prefix: str, jobs: int) -> dict:
    from verify.env.digest import digests
    from verify.env.drift import file_findings
    from verify.env.linkage import check_linkage, host_library_dirs
    from verify.env.manifest import build_manifest

    c0 = _cpu()
    t0 = time.perf_counter()
    m = build_manifest(Path(prefix), jobs=jobs, elf=False)
    findings = file_findings(m)
    d = digests(m)
    seconds = time.perf_counter() - t0
    cpu = _cpu() - c0
    t1 = time.perf_counter()
    m2 = build_manifest(Path(prefix), jobs=jobs, elf=True)
    report = check_linkage(m2, host_dirs=host_library_dirs())
    with_linkage = time.perf_counter() - t1
    hashed = [e.size for e in m.entries if e.type == "file"]
    return {"seconds": seconds, "cpu": cpu, "with_linkage": with_linkage, "files": len(m.entries),
            "bytes": sum(e.size for e in m.entries), "findings": len(findings),
            "hashed_bytes": sum(hashed), "largest": max(hashed, default=0),
            "environment": d["environment"], "elf_files": report.elf_files,
            "unresolved": len(report.unresolved),
            "workers_rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}


def child_full(prefix: str, jobs: int, cache: str) -> dict:
    from verify.env.check import check_env

    c0 = _cpu()
    t0 = time.perf_counter()
    r = check_env(Path(prefix), jobs=jobs, cache=Path(cache))
    seconds = time.perf_counter() - t0
    bc = r.bytecode
    return {"seconds": seconds, "cpu": _cpu() - c0, "ok": r.ok, "identical": r.identical,
            "findings": len(r.findings),
            "pycs": bc.checked if bc else 0, "compiled": bc.compiled if bc else 0,
            "stdlib_files": (r.interpreter or {}).get("stdlib", {}).get("files", 0)}


def child_loop(prefix: str) -> dict:
    import hashlib
    import stat

    c0 = _cpu()
    t0 = time.perf_counter()
    files = []
    for d, _, names in os.walk(prefix):
        for n in names:
            p = os.path.join(d, n)
            if stat.S_ISREG(os.lstat(p).st_mode):
                files.append(p)
    for p in files:
        with open(p, "rb") as f:
            hashlib.file_digest(f, "sha256").hexdigest()
    return {"seconds": time.perf_counter() - t0, "cpu": _cpu() - c0, "files": len(files)}


def _floor_worker(paths: list[str], done) -> None:  # noqa: ANN001
    buf = bytearray(1 << 20)
    flags = os.O_RDONLY | os.O_CLOEXEC
    for path in paths:
        fd = os.open(path, flags)
        try:
            while os.readv(fd, (buf,)):
                pass
        finally:
            os.close(fd)
    done.put(len(paths))


def child_floor(prefix: str, jobs: int) -> dict:
    """The system calls any verifier that reads every file must make, and nothing else: the
    walk (a scandir and a stat per entry, in this process), then each file opened, read
    whole through one buffer and closed, on ``jobs`` processes (the files dealt largest
    first to the least loaded), no hashing. Timed from before the walk to the last read."""
    import multiprocessing
    import stat

    ctx = multiprocessing.get_context("fork")
    c0 = _cpu()
    t0 = time.perf_counter()
    files = [(st.st_size, path) for path, st in stat_walk(prefix) if stat.S_ISREG(st.st_mode)]
    shares: list[list[str]] = [[] for _ in range(jobs)]
    loads = [0] * jobs
    for size, path in sorted(files, reverse=True):
        i = loads.index(min(loads))
        shares[i].append(path)
        loads[i] += size + 4096
    done = ctx.Queue()
    procs = [ctx.Process(target=_floor_worker, args=(share, done)) for share in shares]
    for proc in procs:
        proc.start()
    for _ in procs:
        done.get(timeout=600)
    seconds = time.perf_counter() - t0
    for proc in procs:
        proc.join(timeout=60)  # joined before the CPU is read: RUSAGE_CHILDREN counts them then
    return {"seconds": seconds, "cpu": _cpu() - c0, "files": len(files)}


def _limit_worker(nbytes: int, ready, go, done) -> None:  # noqa: ANN001
    import hashlib

    buf = os.urandom(LIMIT_BUFFER)
    h = hashlib.sha256()
    ready.release()
    go.wait()
    left = nbytes
    while left > 0:
        h.update(memoryview(buf)[:min(left, LIMIT_BUFFER)])
        left -= LIMIT_BUFFER
    done.put(h.hexdigest())


def child_limit(nbytes: int, jobs: int, largest: int) -> dict:
    """Seconds for ``jobs`` processes to hash ``nbytes`` from memory between them, and for
    one process to hash ``largest`` bytes (the bound no split can beat)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    ready, go, done = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    share = -(-nbytes // jobs)
    procs = [ctx.Process(target=_limit_worker, args=(share, ready, go, done))
             for _ in range(jobs)]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.acquire(timeout=60)
    t0 = time.perf_counter()
    go.set()
    for _ in procs:
        done.get(timeout=600)
    seconds = time.perf_counter() - t0
    for proc in procs:
        proc.join(timeout=60)
    import hashlib

    buf = os.urandom(LIMIT_BUFFER)
    h = hashlib.sha256()
    t1 = time.perf_counter()
    left = largest
    while left > 0:
        h.update(memoryview(buf)[:min(left, LIMIT_BUFFER)])
        left -= LIMIT_BUFFER
    return {"seconds": seconds, "one_file": time.perf_counter() - t1}


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the hashing workers)."""
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_child(kind: str, prefix: Path, jobs: int, cache: str = "", *extra: str
              ) -> tuple[dict, int]:
    """(what the child printed, its own peak RSS in kB)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.bench.verify_env", "--child", kind,
                             str(prefix), "--jobs", str(jobs), "--cache", cache, *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"bench child {kind} failed ({proc.returncode})")
    return json.loads(out), usage.ru_maxrss


def timed(cmd: list[str] | str, *, shell: bool = False) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, shell=shell, cwd=ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"bench command failed: {cmd}")
    return seconds, usage.ru_maxrss


# ------------------------------------------------------------------------------------ main

def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench verify-env")
    p.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--child", nargs=2, metavar=("KIND", "PREFIX"), help=argparse.SUPPRESS)
    p.add_argument("--cache", default="", help=argparse.SUPPRESS)
    p.add_argument("--bytes", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--largest", type=int, default=0, help=argparse.SUPPRESS)
    args, _ = p.parse_known_args(argv)
    if args.child:
        kind, prefix = args.child
        doc = child_ours(prefix, args.jobs) if kind == "ours" else \
            child_full(prefix, args.jobs, args.cache) if kind == "full" else \
            child_limit(args.bytes, args.jobs, args.largest) if kind == "limit" else \
            child_floor(prefix, args.jobs) if kind == "floor" else \
            child_loop(prefix)
        print(json.dumps(doc))
        return 0

    venv = args.venv.resolve()
    ensure_venv(venv)
    xargs = f"find {venv} -type f -print0 | xargs -0 -P{args.jobs} sha256sum"
    cli = [sys.executable, "-m", "verify", "env", "--prefix", str(venv), "--no-linkage",
           "--json", "--jobs", str(args.jobs)]
    best: dict[str, float] = {}
    loads: dict[str, float] = {}   # the load average beside each best figure
    rss = {"ours": 0, "workers": 0}
    facts: dict = {}
    with tempfile.TemporaryDirectory(prefix="samebits-bench-cache.") as cache:
        cold, _ = run_child("full", venv, args.jobs, cache)  # first run: an empty cache
        print(f"  first full run {cold['seconds']:.3f} s", flush=True)
        for r in range(args.rounds + 1):  # round 0 warms the page cache and is not counted
            at: dict[str, float] = {}
            at["ours"] = at["linkage"] = at["ours_cpu"] = os.getloadavg()[0]
            ours, ours_rss = run_child("ours", venv, args.jobs)
            at["full"] = at["full_cpu"] = os.getloadavg()[0]
            warm, _ = run_child("full", venv, args.jobs, cache)
            at["loop"] = at["loop_cpu"] = os.getloadavg()[0]
            loop, _ = run_child("loop", venv, args.jobs)
            at["xargs"] = os.getloadavg()[0]
            x_s, _ = timed(xargs, shell=True)
            at["cli"] = os.getloadavg()[0]
            c_s, _ = timed(cli)
            at["limit"] = at["one_file"] = os.getloadavg()[0]
            lim, _ = run_child("limit", venv, args.jobs, "", "--bytes",
                               str(ours["hashed_bytes"]), "--largest", str(ours["largest"]))
            at["floor"] = at["floor_cpu"] = os.getloadavg()[0]
            floor, _ = run_child("floor", venv, args.jobs)
            if r == 0:
                facts = ours
                continue
            for k, v in (("ours", ours["seconds"]), ("linkage", ours["with_linkage"]),
                         ("loop", loop["seconds"]), ("xargs", x_s), ("cli", c_s),
                         ("ours_cpu", ours["cpu"]), ("loop_cpu", loop["cpu"]),
                         ("full", warm["seconds"]), ("full_cpu", warm["cpu"]),
                         ("limit", lim["seconds"]), ("one_file", lim["one_file"]),
                         ("floor", floor["seconds"]), ("floor_cpu", floor["cpu"])):
                if v < best.get(k, float("inf")):
                    best[k], loads[k] = v, max(at[k], os.getloadavg()[0])
            rss["ours"] = max(rss["ours"], ours_rss)
            rss["workers"] = max(rss["workers"], ours["workers_rss_kb"])
            print(f"  round {r}: ours {ours['seconds']:.3f} s, full repeated "
                  f"{warm['seconds']:.3f} s, with linkage {ours['with_linkage']:.3f} s, "
                  f"loop {loop['seconds']:.3f} s, xargs {x_s:.3f} s, cli {c_s:.3f} s, "
                  f"SHA-256 limit {lim['seconds']:.3f} s, floor {floor['seconds']:.3f} s "
                  f"(load {os.getloadavg()[0]:.1f})",
                  flush=True)
    gb = facts["bytes"] / 1e9
    r_x, r_l = best["xargs"] / best["ours"], best["loop"] / best["ours"]
    mb, wmb = rss["ours"] / 1024, rss["workers"] / 1024
    print(f"verify-env on {venv}: {facts['files']:,} entries, {gb:.2f} GB, {args.jobs} jobs, "
          f"best of {args.rounds}")
    print(f"  ours   {best['ours']:.3f} s ({gb / best['ours']:.2f} GB/s, load "
          f"{loads['ours']:.1f})   with linkage {best['linkage']:.3f} s ({facts['elf_files']} "
          f"ELF files, {facts['unresolved']} unresolved)")
    print(f"  limit  {best['limit']:.3f} s (load {loads['limit']:.1f})   the 2-core SHA-256 "
          f"limit: {facts['hashed_bytes'] / 1e9:.2f} GB hashed from memory by {args.jobs} "
          f"processes; one-file bound {best['one_file']:.3f} s (the largest file, "
          f"{facts['largest'] / 1e6:.0f} MB, on one core)")
    # the best any verifier that reads every file could do here: the hashing (the limit's
    # CPU) and the floor's system calls (its CPU) shared on the cores, and never less than
    # one core hashing the largest file
    bound = max(best["one_file"], best["floor"],
                (best["limit"] * args.jobs + best["floor_cpu"]) / args.jobs)
    print(f"  floor  {best['floor']:.3f} s, {best['floor_cpu']:.3f} CPU-s (load "
          f"{loads['floor']:.1f})   the system calls alone: the walk, then every file opened, "
          f"read whole and closed by {args.jobs} processes, no hashing")
    print(f"  bound  {bound:.3f} s   the hashing and those system calls shared on "
          f"{args.jobs} cores: no verifier reading every file does better here, "
          f"{best['limit'] / bound:.0%} of the limit")
    print(f"  xargs  {best['xargs']:.3f} s (load {loads['xargs']:.1f})   ({xargs})")
    print(f"  loop   {best['loop']:.3f} s (load {loads['loop']:.1f})   (one process, "
          "hashlib.file_digest)")
    print(f"  cli    {best['cli']:.3f} s (load {loads['cli']:.1f})   (python -m verify env "
          "--no-linkage --json, end to end)")
    share = best["limit"] / best["ours"]
    print(f"  ratio  limit/ours {share:.0%} of the SHA-256 limit (goal >= {GOAL_LIMIT:.0%}; "
          f"{max(best['limit'], best['one_file']) / best['ours']:.0%} of the bound that "
          f"counts the largest file; ours is {bound / best['ours']:.0%} of the bound above)")
    print(f"  ratio  xargs/ours {r_x:.2f}x (goal >= {GOAL_XARGS}x)   "
          f"loop/ours {r_l:.2f}x (goal >= {GOAL_LOOP}x)")
    print(f"  CPU    ours {best['ours_cpu']:.3f} s in all processes, loop {best['loop_cpu']:.3f} s "
          f"(load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"  peak RSS  verifying process {mb:.0f} MB, largest hashing worker {wmb:.0f} MB "
          f"(goal < {GOAL_RSS_MB} MB)")
    r_full = best["full"] / best["ours"]
    print(f"  full   first run {cold['seconds']:.3f} s ({cold['compiled']:,} pycs compiled by "
          f"the venv's interpreter, {cold['stdlib_files']:,} stdlib files hashed; "
          f"ok: {cold['ok']}); repeated {best['full']:.3f} s, CPU {best['full_cpu']:.3f} s "
          f"({warm['pycs']:,} pycs checked from the cache, {warm['compiled']} compiled; "
          "linkage included)")
    print(f"  ratio  full repeated / ours (hashing alone): {r_full:.2f}x wall, "
          f"{best['full_cpu'] / best['ours_cpu']:.2f}x CPU (goal < {GOAL_FULL}x)")
    ok = r_x >= GOAL_XARGS and r_l >= GOAL_LOOP and max(mb, wmb) < GOAL_RSS_MB \
        and r_full < GOAL_FULL and share >= GOAL_LIMIT
    print(f"  goals {'met' if ok else 'NOT met'}")
    cores = len(os.sched_getaffinity(0))
    if max(loads.values(), default=0) > cores:
        print(f"  note: the load average reached {max(loads.values()):.1f} on {cores} cores: "
              "these are not figures (the goals are for an idle machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
