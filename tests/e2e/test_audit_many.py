"""``samebits audit --many PAPERS.toml --out DIR``: four papers (the example paper's repository
at the commit its authors published and at a later one, the same paper as a deposited
.tar.gz, and a commit the repository does not have), here with --jobs 1 and --jobs 2 and under
the real three-node Slurm of the tests; and two processes fetching one commit into one cache.

Each paper's audit installs its lock into DIR/NAME/env (``--target``, the test channel's
archives by ``--find-links``) and checks it, ``--no-workloads``: the scheduling is what is
under test here (tests/e2e/test_audit_url.py reruns the paper itself)."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.audit import environ
from tests.fixtures.paper_repo import (  # noqa: F401  (fixtures)
    PaperRepo,
    elves,
    paper_repo,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)
from tests.fixtures.slurm_cluster import SlurmCluster, require_slurm

pytestmark = pytest.mark.slow  # four installs per run, several runs: minutes

MISSING = "0123456789abcdef0123456789abcdef01234567"
SUMMARY = ("summary.json", "summary.md", "summary.html")


def write_list(repo: PaperRepo, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "papers.toml"
    path.write_text(f"""\
# the committee's list
[defaults]
timeout = 600

[[paper]]
name = "published"
url = "{repo.url}"
commit = "{repo.published}"
path = "paper"
require = "environment-identical"

[[paper]]
name = "changed"
url = "{repo.url}"
commit = "{repo.changed}"
path = "paper"

[[paper]]
name = "deposit"
url = "{repo.archive.as_uri()}"
sha256 = "{repo.archive_sha256}"
path = "paper"

[[paper]]
name = "missing"
url = "{repo.url}"
commit = "{MISSING}"
""")
    return path


def warm(repo: PaperRepo, cache: Path) -> list[str]:
    """``--cache-dir CACHE`` with the lock's packages already unpacked in it, by one install.
    The papers' installs then read the entries and write none: the install cache's first
    fill of one entry by several processes at once is not what these tests are about (its
    unpack step evicts whatever entry is there before it publishes its own, so a process
    still reading the entry another one published can lose it: samebits/install/unpack.py)."""
    done = subprocess.run(
        [sys.executable, "-m", "samebits", "install", str(repo.lockfile), "--target",
         str(cache.parent / "warm-env"), "--platform", "linux-64", "--cache-dir", str(cache),
         "--find-links", repo.find_links, "-q"], env=environ(), capture_output=True,
        text=True, timeout=600, cwd=cache.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    return ["--cache-dir", str(cache)]


def many(repo: PaperRepo, listed: Path, out: Path, *args: str, cwd: Path,
         env: dict[str, str] | None = None, timeout: float = 900
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samebits", "audit", "--many", str(listed), "--out", str(out),
         "--workload-python", sys.executable, "--no-workloads", "--find-links",
         repo.find_links, *args], cwd=cwd, env=env or environ(), capture_output=True,
        text=True, timeout=timeout)


def check_summary(repo: PaperRepo, out: Path) -> dict:
    """Three verdicts and one named failure, in the list's order; every environment removed."""
    doc = json.loads((out / "summary.json").read_text())
    rows = {r["name"]: r for r in doc["papers"]}
    assert [r["name"] for r in doc["papers"]] == ["published", "changed", "deposit", "missing"]
    assert (rows["published"]["status"], rows["published"]["level"]) == (
        "verdict", "environment-identical")
    assert rows["published"]["accepted"] is True
    assert rows["changed"]["level"] == "not-reproduced"
    assert rows["changed"]["reason"].startswith("code differs: train.py")
    assert rows["deposit"]["level"] == "environment-identical"
    assert rows["missing"]["status"] == "failed" and rows["missing"]["exit_code"] == 2
    assert rows["missing"]["reason"].startswith(f"{repo.url}: no commit {MISSING} there")
    assert doc["counts"] == {"environment-identical": 2, "not-reproduced": 1, "failed": 1}
    assert doc["accepted"] == 2
    for name in ("published", "changed", "deposit"):
        assert (out / name / "report" / "audit.html").is_file()
        assert not (out / name / "env").exists()  # removed after its audit (no --keep)
        assert json.loads((out / name / "times.json").read_text())["seconds"] > 0
    md = (out / "summary.md").read_text()
    assert "| missing | `failed` | no |" in md and "[report](published/report/audit.html)" in md
    return doc


def test_jobs_1_and_2_give_the_same_summary_and_a_rerun_skips(paper_repo: PaperRepo,
                                                              tmp_path: Path) -> None:
    """--jobs 1 and --jobs 2 of the same list: the same summary bytes (times apart in
    times.json); exit 1 (a paper not reproduced, one failed). A second run skips the three
    with a verdict and tries the missing commit again; its summary is the same bytes;
    --force audits all four again."""
    listed = write_list(paper_repo, tmp_path / "list")
    cache = warm(paper_repo, tmp_path / "cache")
    one = many(paper_repo, listed, tmp_path / "one", "--jobs", "1", *cache, cwd=tmp_path)
    assert one.returncode == 1, one.stdout[-3000:] + one.stderr[-3000:]
    two = many(paper_repo, listed, tmp_path / "two", "--jobs", "2", *cache, cwd=tmp_path)
    assert two.returncode == 1, two.stderr[-3000:]
    check_summary(paper_repo, tmp_path / "one")
    for name in SUMMARY:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert "summary: 4 papers: 2 environment-identical, 1 not-reproduced, 1 failed; 2 of 4 " \
        "accepted" in one.stdout
    times = json.loads((tmp_path / "one" / "times.json").read_text())["papers"]
    assert set(times) == {"published", "changed", "deposit", "missing"}

    again = many(paper_repo, listed, tmp_path / "two", "--jobs", "2", *cache, cwd=tmp_path)
    assert again.returncode == 1
    skipped = [ln for ln in again.stderr.splitlines() if "skipped, the result" in ln]
    assert len(skipped) == 3 and not any("missing" in ln for ln in skipped), again.stderr
    assert "missing: failed" in again.stderr
    for name in SUMMARY:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()

    forced = many(paper_repo, listed, tmp_path / "two", "--jobs", "2", "--force", "--json",
                  *cache, cwd=tmp_path)
    assert "skipped" not in forced.stderr
    assert json.loads(forced.stdout)["counts"]["environment-identical"] == 2


def test_an_interrupted_run_resumes(paper_repo: PaperRepo, tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) once the first paper's result is written: the running audit is stopped
    (no process of it left), exit 130; the next run skips the first paper and audits the
    others, and its summary is the uninterrupted run's."""
    listed = write_list(paper_repo, tmp_path / "list")
    out = tmp_path / "out"
    cache = warm(paper_repo, tmp_path / "cache")
    proc = subprocess.Popen(
        [sys.executable, "-m", "samebits", "audit", "--many", str(listed), "--out", str(out),
         "--workload-python", sys.executable, "--no-workloads", "--find-links",
         paper_repo.find_links, *cache], cwd=tmp_path, env=environ(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (out / "published" / "task.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    while not (out / "changed" / "log.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert not (out / "summary.json").exists()
    left = subprocess.run(["pgrep", "-f", str(out / "changed")], capture_output=True,
                          text=True, timeout=30).stdout.split()
    assert left == [], left
    again = many(paper_repo, listed, out, *cache, cwd=tmp_path)
    assert again.returncode == 1, again.stderr[-2000:]
    skipped = [ln for ln in again.stderr.splitlines() if "skipped, the result" in ln]
    assert len(skipped) == 1 and "published" in skipped[0], again.stderr
    check_summary(paper_repo, out)


@contextmanager
def slow_server(folder: Path, delay: float) -> Iterator[str]:
    """An HTTP server on loopback serving ``folder``, each answer ``delay`` seconds late (a
    slow host: two downloads of one archive overlap unless something makes one wait)."""
    class Slow(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)

        def do_GET(self) -> None:
            time.sleep(delay)
            super().do_GET()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def slow_git(folder: Path, delay: float) -> str:
    """A PATH folder whose git is the real git, each fetch started ``delay`` seconds late."""
    folder.mkdir()
    real = shutil.which("git")
    (folder / "git").write_text(f"""#!/bin/sh
for a in "$@"; do [ "$a" = fetch ] && sleep {delay} && break; done
exec {real} "$@"
""")
    (folder / "git").chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def test_two_processes_fetch_one_commit_once(paper_repo: PaperRepo, tmp_path: Path) -> None:
    """Two audits of one commit started at once into one empty cache, each fetch slowed by
    5 s so that they overlap: the entry's flock makes one fetch while the other waits and
    then finds it in the cache; both reach the same verdict. The same for the deposit, from
    an HTTP server that answers 5 s late."""
    cache = tmp_path / "cache"
    shutil.copyfile(paper_repo.archive, tmp_path / paper_repo.archive.name)
    with slow_server(tmp_path, 5.0) as base:
        sources = {"git": [paper_repo.url, "--commit", paper_repo.published],
                   "archive": [f"{base}/{paper_repo.archive.name}", "--sha256",
                               paper_repo.archive_sha256]}
        env = environ(PATH=slow_git(tmp_path / "bin", 5.0))
        for kind, words in sources.items():
            procs = [subprocess.Popen(
                [sys.executable, "-m", "samebits", "audit", *words, "--path", "paper",
                 "--prefix", str(paper_repo.prefix), "--workload-python", sys.executable,
                 "--no-workloads", "--cache-dir", str(cache), "--out", f"out-{kind}-{i}"],
                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True) for i in range(2)]
            said = [p.communicate(timeout=300) for p in procs]
            assert [p.returncode for p in procs] == [0, 0], said
            hows = sorted(out.splitlines()[0].rsplit("(", 1)[1] for out, _ in said)
            assert hows == ["fetched)", "in the cache)"], said
    assert [p.name for p in (cache / "sources" / "git").iterdir()] == [paper_repo.published]
    assert [p.name for p in (cache / "sources" / "unpacked").iterdir()] == [
        paper_repo.archive_sha256]


# ------------------------------------------------------------------------------ Slurm

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    require_slurm()
    got = SlurmCluster.start(tmp_path_factory.mktemp("slurm-many") / "slurm", cpus=2,
                             nodes=("n1", "n2", "n3"))
    yield got
    got.stop()


def test_slurm_array_and_gather(cluster: SlurmCluster, paper_repo: PaperRepo,
                                tmp_path: Path) -> None:
    """--slurm --wait on the three-node cluster: one array job of four tasks (at most three at
    once, the caller's sbatch options passed through) and a gather job after it: three
    verdicts and one named failure, the same summary bytes as --jobs 2 would give. A second
    run submits only the failed paper."""
    listed = write_list(paper_repo, tmp_path / "list")
    env = {**environ(), "SLURM_CONF": cluster.env["SLURM_CONF"]}
    out = tmp_path / "out"
    cache = warm(paper_repo, tmp_path / "cache")
    start = time.monotonic()
    res = many(paper_repo, listed, out, "--slurm", "--wait", "--max-running", "3", *cache,
               "--", "--time=15", cwd=tmp_path, env=env)
    took = time.monotonic() - start
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:] + "\n".join(
        p.read_text()[-1500:] for p in (out / "slurm").glob("*.out"))
    check_summary(paper_repo, out)
    assert "submitting 4 of 4 papers as one Slurm array" in res.stderr
    task = (out / "slurm" / "task.sh").read_text()
    assert '--task "$SLURM_ARRAY_TASK_ID"' in task
    assert len(list((out / "slurm").glob("task-*_*.out"))) == 4
    jobs = {json.loads((out / n / "times.json").read_text())["slurm_job"]
            for n in ("published", "changed", "deposit", "missing")}
    assert len(jobs) == 4 and all("_" in j for j in jobs), jobs
    print(f"slurm: 4 papers in {took:.1f} s")

    again = many(paper_repo, listed, out, "--slurm", "--wait", *cache, "--", "--time=15",
                 cwd=tmp_path, env=env)
    assert again.returncode == 1, again.stderr[-3000:]
    assert "submitting 1 of 4 papers as one Slurm array (3 skipped" in again.stderr
    check_summary(paper_repo, out)
