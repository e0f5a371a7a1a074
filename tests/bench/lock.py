"""Benchmark: `samebits lock` over the full matrix against a >= 20,000-record channel + PyPI.

The six curated specs are copied into a scratch project; each gets a [conda] part solved
against a synthetic file:// channel (the CUDA-stack packages of tests/fakechannel.py plus
filler records, >= 20,000 per subdir) and keeps its real PyPI part (uv, metadata only).
Printed: cold and warm seconds for the whole matrix, the conda part alone, and the PyPI part
beside the same `uv pip compile` commands run alone with the same concurrency (the ratio).
Goal: the warm matrix under 5 s.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from samebits.lockfile import parse_lock
from tests.fakechannel import build_cuda_channel

ROOT = Path(__file__).resolve().parents[2]
RECORDS_PER_SUBDIR = 20_000
FILLERS = [f"filler-{i}" for i in range(0, 50, 5)]


def synthetic_channel(root: Path) -> Path:
    """The CUDA stack, indexed by py-rattler, plus filler records written into repodata.json."""
    build_cuda_channel(root)
    rng = random.Random(0)
    for subdir in ("noarch", "linux-64", "linux-aarch64"):
        path = root / subdir / "repodata.json"
        data = json.loads(path.read_text())
        packages = data.setdefault("packages", {})
        n = 0
        while len(packages) < RECORDS_PER_SUBDIR:
            i, v = divmod(n, 10)
            name = f"filler-{i}"
            # chains of five: an environment of realistic size (tens of packages) chosen
            # from a channel of realistic breadth (every record is read and considered)
            deps = [f"filler-{i + 1} >=1.{rng.randrange(5)}"] if i % 5 != 4 else []
            if subdir != "noarch":
                deps.append("__glibc >=2.17")
            fn = f"{name}-1.{v}.0-h{subdir[:5].replace('-', '')}_0.tar.bz2"
            packages[fn] = {
                "name": name, "version": f"1.{v}.0", "build": "h0_0", "build_number": 0,
                "depends": deps, "subdir": subdir, "md5": f"{n:032x}", "sha256": f"{n:064x}",
                "size": 1000 + n, "timestamp": 1_700_000_000_000, "license": "MIT",
            }
            n += 1
        path.write_text(json.dumps(data))
    return root


def make_project(tmp: Path, channel: Path) -> Path:
    proj = tmp / "project"
    shutil.copytree(ROOT / "environments", proj / "environments",
                    ignore=shutil.ignore_patterns("conda-forge"))
    deps = ", ".join(f'"{d}"' for d in ["python 3.12.*", "numpy", *FILLERS])
    for spec in (proj / "environments").glob("*.toml"):
        if spec.name != "base.toml":
            spec.write_text(spec.read_text() + f'\n[conda]\nchannels = ["{channel.as_uri()}"]\n'
                            f"dependencies = [{deps}]\n")
    return proj


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"bench lock: {' '.join(cmd)} failed:\n{res.stderr}")
    return time.perf_counter() - start


async def _pypi_parts(proj: Path, *, ours: bool) -> float:
    """Every (environment, platform) PyPI solve at once: ours, or bare `uv pip compile`."""
    from samebits.project import Project
    from samebits.solve.pypi import solve_pypi, uv_command
    from samebits.specio import read_spec

    project = Project.at(proj)
    specs = [read_spec(project.spec_path(i), root=proj) for i in project.default_ids()]
    start = time.perf_counter()
    if ours:
        await asyncio.gather(*(solve_pypi(s, t, timeout=20) for s in specs for t in s.platforms))
    else:
        with tempfile.TemporaryDirectory() as out:
            procs = []
            pairs = [(s, t) for s in specs for t in s.platforms]
            for k, (s, t) in enumerate(pairs):
                cmd = uv_command(s, t, fmt="pylock", out=Path(out) / f"pylock.{k}.toml")
                p = await asyncio.create_subprocess_exec(
                    *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL)
                procs.append(p.communicate("\n".join(s.pypi_requirements).encode()))
            await asyncio.gather(*procs)
    return time.perf_counter() - start


async def _conda_parts(proj: Path) -> float:
    from samebits.project import Project
    from samebits.solve.conda import solve_conda
    from samebits.specio import read_spec

    project = Project.at(proj)
    specs = [read_spec(project.spec_path(i), root=proj) for i in project.default_ids()]
    start = time.perf_counter()
    await asyncio.gather(*(solve_conda(s, t, exclude_newer=None, timeout=20)
                           for s in specs for t in s.platforms))
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="samebits-bench-lock-") as tmp:
        channel = synthetic_channel(Path(tmp) / "channel")
        counts = {sd: len(json.loads((channel / sd / "repodata.json").read_text())["packages"])
                  for sd in ("linux-64", "linux-aarch64", "noarch")}
        proj = make_project(Path(tmp), channel)
        cmd = [sys.executable, "-m", "samebits", "lock", "-q"]
        cold = timed(cmd, proj)
        warm = min(timed(cmd, proj) for _ in range(3))
        offline = min(timed([*cmd, "--offline"], proj) for _ in range(3))
        conda = min(asyncio.run(_conda_parts(proj)) for _ in range(3))
        ours = min(asyncio.run(_pypi_parts(proj, ours=True)) for _ in range(3))
        bare = min(asyncio.run(_pypi_parts(proj, ours=False)) for _ in range(3))
        locks = sorted((proj / "lockfiles").glob("*.yml"))
        solves = sum(len(parse_lock(p).platforms) for p in locks)
    print(f"channel records per subdir: {counts}")
    print(f"matrix: {len(locks)} environments, {solves} platform solves "
          "(volta is linux-64 only: PyPI has no CUDA torch 2.7 for aarch64)")
    print(f"samebits lock, whole matrix:  cold {cold:6.2f} s   warm {warm:6.2f} s   "
          f"warm --offline {offline:6.2f} s   (goal < 5 s warm: "
          f"{'met' if min(warm, offline) < 5 else 'MISSED'})")
    print("  (warm = caches filled, uv still revalidates stale PyPI pages over the network;"
          " --offline answers from the caches alone)")
    print(f"conda part alone (py-rattler): {conda:6.2f} s")
    print(f"PyPI part: samebits {ours:6.2f} s   bare `uv pip compile` {bare:6.2f} s   "
          f"ratio {ours / bare:4.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
