"""``python -m tests.bench fleet [--ranks=32 | --ranks=8,16,32] [--hosts=N]``: verify fleet at
scale, and what rank 0's aggregation costs per rank.

Each row is one real fleet: ``torchrun --standalone --nproc-per-node R -m tests.bench.fleet
--child DIR`` on this host (loopback), or with ``--hosts=N`` R ranks spread over N network
namespace hosts (``tests/fixtures/netns.py``; root only) talking gloo over their veths. Every
rank runs the lightest mode the fleet has: ``--only randn --no-env-digest`` (one small
workload, no prefix hashing; the check-in, preflight, record exchange and both collectives as
always). Printed per row:

    ranks       R
    wall s      launch to the last rank's exit (torch imports included: the bulk at scale)
    agg s       rank 0's aggregation work: ``analyse`` + the report's canonical JSON + the HTML
                page + the text (timed inside rank 0 by wrapping those functions in this
                process, as tests/fixtures/fleet_fault.py wraps a workload: no switch in
                production code); and per 100 ranks
    report      the report's bytes, and per rank
    RSS MB      the mean peak RSS of a rank (what one rank costs in memory)
    load        the 1-minute load average when the row started (a figure taken above the
                core count is not one)

Then the same aggregation on R x 4, x 16 and x 64 copies of the records rank 0 gathered
(in this process), to show the cost per rank stays flat where no machine here can start that
many processes. Goal (issue 27): linear, under 1 s of rank-0 aggregation per 100 ranks.

(``python -m tests.bench`` passes on only the arguments that start with a dash: ``--ranks=8``.)
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--only", "randn", "--no-env-digest", "--rank-timeout", "600"]
GOAL_PER_100 = 1.0
SCALE = (4, 16, 64)


# ------------------------------------------------------------------ inside each rank (--child)

def child(folder: Path, fleet_args: list[str]) -> int:
    """One rank of the fleet, timed: rank 0 records its aggregation and the gathered
    records; every rank its peak RSS."""
    import verify.fleet.cmd_fleet as cmd
    import verify.fleet.judge as judge
    import verify.fleet.run as run
    from verify.cli import main as verify_main

    spent: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
        return wrapper

    for module, name in ((judge, "analyse"), (cmd, "render_html"), (cmd, "format_report"),
                         (cmd, "canonical_json")):
        setattr(module, name, timed(name, getattr(module, name)))
    real_run_rank = run.run_rank

    def run_rank(**kwargs: Any) -> Any:
        outcome = real_run_rank(**kwargs)
        if outcome is not None:
            (folder / "records.json").write_text(json.dumps(judge.with_statements(
                outcome.records)))
        return outcome

    run.run_rank = run_rank
    code = verify_main(["fleet", *fleet_args])
    rank = os.environ.get("RANK", "0")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (folder / f"rank{rank}.json").write_text(json.dumps({"rss_mb": rss_mb, "spent": spent}))
    return code


# ------------------------------------------------------------------ the bench

def aggregate(records: list[dict[str, Any]]) -> float:
    """Seconds for rank 0's aggregation of these records, in this process."""
    from samebits._io import canonical_json
    from verify.fleet.html import render_html
    from verify.fleet.report import analyse, format_report

    t = time.perf_counter()
    report = analyse(records)
    canonical_json(report)
    render_html(report)
    format_report(report)
    return time.perf_counter() - t


def scaled(records: list[dict[str, Any]], factor: int) -> list[dict[str, Any]]:
    n = len(records)
    out = []
    for k in range(factor):
        for rec in records:
            new = copy.deepcopy(rec)
            new["rank"] = k * n + int(rec["rank"])
            new["host"] = f"{rec['host']}-{k}"
            out.append(new)
    return out


def one_fleet(ranks: int, hosts: int, folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True)
    out = folder / "fleet.json"
    args = [*ARGS, "--out", str(out), "--html", str(folder / "fleet.html")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    load = os.getloadavg()[0]
    t = time.perf_counter()
    if hosts <= 1:
        proc = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone",
             f"--nproc-per-node={ranks}", "-m", "tests.bench.fleet", "--child", str(folder),
             *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
        codes = [proc.returncode]
        errors = proc.stderr
    else:
        codes, errors = _on_netns(ranks, hosts, folder, args, env)
    wall = time.perf_counter() - t
    if any(codes) or not out.exists():
        raise SystemExit(f"fleet of {ranks} ranks failed ({codes}): {errors[-3000:]}")
    per_rank = [json.loads(p.read_text()) for p in folder.glob("rank*.json")]
    rank0 = json.loads((folder / "rank0.json").read_text())
    return {"ranks": ranks, "wall": wall, "agg": sum(rank0["spent"].values()),
            "bytes": out.stat().st_size, "load": load,
            "rss": statistics.mean(r["rss_mb"] for r in per_rank),
            "records": json.loads((folder / "records.json").read_text())}


def _on_netns(ranks: int, hosts: int, folder: Path, args: list[str],
              env: dict[str, str]) -> tuple[list[int], str]:
    from tests.fixtures.netns import Hosts

    with Hosts.make(hosts) as net:
        procs = []
        for rank in range(ranks):
            h = net[rank % hosts]
            e = {**env, "RANK": str(rank), "LOCAL_RANK": str(rank // hosts),
                 "WORLD_SIZE": str(ranks), "MASTER_ADDR": net[0].address,
                 "MASTER_PORT": "29400", "GLOO_SOCKET_IFNAME": Hosts.IFNAME}
            procs.append(net.popen(h, [sys.executable, "-m", "tests.bench.fleet", "--child",
                                       str(folder), *args], env=e, cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        errs = [p.communicate(timeout=3600)[1] for p in procs]
        return [p.returncode for p in procs], "".join(errs)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench fleet")
    parser.add_argument("--ranks", default="32", help="ranks per fleet, comma-separated")
    parser.add_argument("--hosts", type=int, default=1,
                        help="network namespace hosts to spread the ranks over (root; "
                        "default 1: loopback)")
    opts = parser.parse_args(argv)
    sizes = [int(r) for r in opts.ranks.split(",")]
    cores = os.cpu_count() or 1
    print(f"verify fleet {' '.join(ARGS[:3])}: {opts.hosts} host(s)"
          f"{' (loopback)' if opts.hosts <= 1 else ' (network namespaces)'}, {cores} cores")
    print(f"{'ranks':>5} {'wall s':>8} {'agg s':>7} {'agg s/100 ranks':>15} "
          f"{'report B':>10} {'B/rank':>7} {'RSS MB/rank':>11} {'load':>5}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            row = one_fleet(n, opts.hosts, Path(tmp) / f"r{n}")
            rows.append(row)
            print(f"{n:>5} {row['wall']:>8.1f} {row['agg']:>7.3f} "
                  f"{row['agg'] * 100 / n:>15.3f} {row['bytes']:>10,} {row['bytes'] // n:>7,} "
                  f"{row['rss']:>11.0f} {row['load']:>5.1f}"
                  f"{'  (load above the core count)' if row['load'] > cores else ''}",
                  flush=True)
    base = rows[-1]["records"]
    print(f"aggregation alone, in one process, on copies of the {len(base)} records "
          "rank 0 gathered:")
    per_100 = []
    for factor in (1, *SCALE):
        n = len(base) * factor
        load = os.getloadavg()[0]
        seconds = aggregate(scaled(base, factor))
        per_100.append(seconds * 100 / n)
        print(f"{n:>6} ranks {seconds:>8.3f} s  {per_100[-1]:.3f} s/100 ranks  load {load:.1f}")
    flat = max(per_100[1:]) <= 2 * min(per_100[1:])
    worst = max(per_100)
    print(f"goal: linear, < {GOAL_PER_100:g} s of rank-0 aggregation per 100 ranks: "
          f"worst {worst:.3f} s/100 ranks, {'linear' if flat else 'NOT linear'} "
          f"(per-rank cost within 2x from {len(base) * SCALE[0]} to {len(base) * SCALE[-1]} "
          "ranks)")
    return 0 if flat and worst < GOAL_PER_100 else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        sys.exit(child(Path(sys.argv[2]), sys.argv[3:]))
    sys.exit(main(sys.argv[1:]))
