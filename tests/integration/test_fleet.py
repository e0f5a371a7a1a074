"""Fleet verification over torch.distributed (gloo on the CPU), and the report's rules."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.netns import free_port
from verify.fleet.html import render_html
from verify.fleet.report import analyse, cell_state

# torchrun with several ranks: slow, left out of CI's `nox -s tests`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ONLY = "gemm_fp32,sum_fp32,randn"


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def torchrun(tmp: Path, nproc: int, *, fault: str | None = None
             ) -> tuple[subprocess.CompletedProcess, dict]:
    """`torchrun -m verify fleet` on ``nproc`` gloo ranks; with ``fault="WORKLOAD@RANK"`` the
    ranks run `tests.fixtures.fleet_fault`, which flips one output bit on that rank."""
    out = tmp / "fleet.json"
    module = ["-m", "tests.fixtures.fleet_fault", fault] if fault else ["-m", "verify", "fleet"]
    res = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc-per-node={nproc}", *module, "--only", ONLY,
         "--no-env-digest", "--out", str(out), "--html", str(tmp / "fleet.html")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=_env())
    assert out.exists(), res.stderr[-3000:]
    return res, json.loads(out.read_text())


@pytest.mark.slow
def test_two_ranks_agree_and_the_report_is_byte_stable(tmp_path: Path) -> None:
    """Two gloo ranks on one CPU agree; two runs write the same report and HTML bytes."""
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    res, report = torchrun(first_dir, 2)
    assert res.returncode == 0, res.stderr[-2000:]
    assert report["verdict"] == "consistent"
    assert report["backend"] == "gloo" and report["world_size"] == 2
    assert [r["device"] for r in report["ranks"]] == ["cpu", "cpu"]
    assert report["collectives"]["all_reduce/large"] == {"ranks_agree": True,
                                                         "repetitions_agree": True}
    torchrun(second_dir, 2)
    for name in ("fleet.json", "fleet.html"):
        assert (first_dir / name).read_bytes() == (second_dir / name).read_bytes(), name


@pytest.mark.slow
def test_injected_bit_flip_names_exactly_that_rank(tmp_path: Path) -> None:
    """A one-bit fault on rank 2 of 3 makes rank 2, and only rank 2, the suspect."""
    res, report = torchrun(tmp_path, 3, fault="sum_fp32@2")
    assert res.returncode != 0  # rank 0 exits 1: a suspect
    assert report["verdict"] == "suspects"
    assert [(s["rank"], s["workloads"]) for s in report["suspects"]] == [(2, ["sum_fp32"])]
    assert report["suspects"][0]["host"] == socket.gethostname()
    assert "UNEXPLAINED" in res.stdout and "SUSPECT rank 2" in res.stdout
    html = (tmp_path / "fleet.html").read_text()
    assert 'class="suspect"' in html and html.count('class="suspect"') == 1


@pytest.mark.slow
def test_rank_with_other_thread_count_is_explained_not_faulty(tmp_path: Path) -> None:
    """Ranks launched by hand (as on separate nodes): rank 2 runs with OMP_NUM_THREADS=2.

    It lands in a class of its own; whatever it computes differently is attributed to the
    thread facts, and nobody is called faulty."""
    port = str(free_port())
    out = tmp_path / "fleet.json"
    procs = []
    for rank in range(3):
        env = _env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="3",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                   OMP_NUM_THREADS="2" if rank == 2 else "1")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "verify", "fleet", "--only", ONLY, "--no-env-digest",
             "--out", str(out), "--json"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-1500:] for o in outs]
    report = json.loads(out.read_text())
    assert report["suspects"] == [] and report["undecided"] == []
    assert [c["ranks"] for c in report["classes"]] == [[0, 1], [2]]
    other = report["classes"][1]
    keys = {d["key"] for d in other["differing_facts"]}
    assert {"env.OMP_NUM_THREADS", "threads.intra_op"} <= keys
    for d in other["differing_workloads"]:
        assert d["expected"] and set(d["attributed_to"]) & {"threads.intra_op",
                                                            "env.OMP_NUM_THREADS"}


# ---------------------------------------------------------------- the rules, on real statements


@pytest.fixture(scope="module")
def statement(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real attestation from `samebits verify gpu` on this machine's CPU."""
    out = tmp_path_factory.mktemp("stmt") / "a.json"
    res = subprocess.run([sys.executable, "-m", "samebits", "verify", "gpu", "--only", ONLY,
                          "--device", "cpu", "--out", str(out)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env=_env())
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())


def records(statement: dict[str, Any], n: int) -> list[dict[str, Any]]:
    coll = {f"{op}/{size}/{rep}": f"{op}-{size}" for op in ("all_reduce", "reduce_scatter")
            for size in ("small", "large") for rep in (1, 2)}
    return [{"rank": r, "local_rank": r, "host": f"node{r // 2}", "device": "cpu",
             "gpu_uuid": None, "backend": "gloo", "collective_env": {},
             "collectives": dict(coll), "statement": copy.deepcopy(statement)}
            for r in range(n)]


def flip(rec: dict[str, Any], workload: str) -> None:
    w = rec["statement"]["predicate"]["workloads"][workload]
    w["sha256"] = ("0" if w["sha256"][0] != "0" else "1") + w["sha256"][1:]


def test_majority_names_the_deviating_rank(statement: dict[str, Any]) -> None:
    """In a class of four, the one rank whose bits leave the majority is the suspect."""
    recs = records(statement, 4)
    flip(recs[3], "gemm_fp32")
    report = analyse(recs)
    assert [(s["rank"], s["host"], s["workloads"]) for s in report["suspects"]] == [
        (3, "node1", ["gemm_fp32"])]
    assert cell_state(report, 3, "gemm_fp32") == "suspect"
    assert cell_state(report, 0, "gemm_fp32") == "ok"


def test_two_ranks_that_disagree_are_undecided(statement: dict[str, Any]) -> None:
    """With no majority the report refuses to guess which of two ranks is wrong."""
    recs = records(statement, 2)
    flip(recs[1], "randn")
    report = analyse(recs)
    assert report["suspects"] == []
    assert report["verdict"] == "undecided"
    assert report["undecided"][0]["workload"] == "randn"


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("all_reduce/large/1", "x", "all_reduce/large: result differs from the other ranks"),
    ("reduce_scatter/small/2", "x", "reduce_scatter/small: repetitions differ"),
])
def test_collective_faults(statement: dict[str, Any], key: str, value: str, problem: str) -> None:
    """A rank whose all_reduce differs, or whose repetition does not repeat, is a suspect."""
    recs = records(statement, 3)
    recs[1]["collectives"][key] = value
    if key.endswith("/1"):
        recs[1]["collectives"][key[:-1] + "2"] = value
    report = analyse(recs)
    assert [(s["rank"], s["collectives"]) for s in report["suspects"]] == [(1, [problem])]


def test_different_environment_is_reported_with_its_differences(
        statement: dict[str, Any]) -> None:
    """Ranks whose environment digest differs are grouped apart, with the differing facts."""
    recs = records(statement, 3)
    st = recs[2]["statement"]
    st["subject"] = [{"name": "environment", "digest": {"sha256": "e" * 64}}]
    st["predicate"]["facts"]["python"] = "3.11.0-other"
    report = analyse(recs)
    assert [e["ranks"] for e in report["environments"]] == [[0, 1], [2]]
    assert "python" in report["environments"][1]["differs_from_largest_in"]


def test_html_and_json_are_stable_and_self_contained(statement: dict[str, Any]) -> None:
    """The report renders the same bytes twice and the page loads nothing from the network."""
    recs = records(statement, 3)
    flip(recs[0], "sum_fp32")
    a, b = analyse(recs), analyse(copy.deepcopy(recs))
    assert a == b and render_html(a) == render_html(b)
    html = render_html(a)
    assert "http://" not in html and "https://" not in html
    assert 'id="matrix"' in html and "verdict: suspects" in html


@pytest.mark.parametrize(("content", "message"), [
    ("{", "not JSON"),
    ('{"format": 9}', "format = 9: not a samebits fleet report (format 1)"),
])
def test_fleet_report_rejects_bad_input(tmp_path: Path, content: str, message: str) -> None:
    """`verify fleet-report` names the file and the problem, exit 2, no traceback."""
    bad = tmp_path / "r.json"
    bad.write_text(content)
    res = subprocess.run([sys.executable, "-m", "samebits", "verify", "fleet-report", str(bad)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr


def test_fleet_outside_a_launcher_is_a_usage_error() -> None:
    """Without RANK/WORLD_SIZE/MASTER_* the command says how to launch it."""
    env = {k: v for k, v in _env().items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                        "MASTER_PORT")}
    res = subprocess.run([sys.executable, "-m", "verify", "fleet"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert "error: verify fleet runs under a launcher" in res.stderr
    assert "hint: torchrun" in res.stderr


# ---------------------------------------------- refusals, a hung rank, torchrun's summary, numpy


def launch_by_hand(tmp: Path, n: int, *, env_of=lambda rank: {}, args: tuple[str, ...] = (),
                   python: str = sys.executable, cwd: Path = ROOT,
                   base_env: dict[str, str] | None = None) -> tuple[list, dict]:
    """``n`` ranks started one by one (as on separate nodes); the report rank 0 wrote."""
    port = str(free_port())
    out = tmp / "fleet.json"
    procs = []
    for rank in range(n):
        env = {**(base_env or _env()), "RANK": str(rank), "LOCAL_RANK": str(rank),
               "WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
               **env_of(rank)}
        procs.append(subprocess.Popen(
            [python, "-m", "verify", "fleet", "--only", ONLY, "--no-env-digest", "--out",
             str(out), *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=300) for p in procs]
    return [(p.returncode, o, e) for p, (o, e) in zip(procs, outs, strict=True)], (
        json.loads(out.read_text()) if out.exists() else {})


@pytest.mark.slow
def test_preflight_runs_on_every_rank_and_refuses_the_group(tmp_path: Path) -> None:
    """Rank 2 alone has LD_LIBRARY_PATH outside its environment: its preflight fails, the
    group runs nothing, and the report names rank 2 and the problem."""
    results, report = launch_by_hand(
        tmp_path, 3, env_of=lambda r: {"LD_LIBRARY_PATH": "/opt/elsewhere/lib"} if r == 2 else {})
    assert results[0][0] == 1, results[0][2][-2000:]
    assert report["verdict"] == "refused" and report["workloads"] == []
    assert [(p["rank"], p["check"]) for p in report["preflight"]] == [(2, "library-path")]
    assert "REFUSED rank 2 on" in results[0][1]
    assert "LD_LIBRARY_PATH points outside the environment" in results[0][1]


@pytest.mark.slow
def test_hung_rank_is_named_in_a_partial_report_and_torchrun_shows_the_verdict(
        tmp_path: Path) -> None:
    """Rank 2 hangs in sum_fp32: after --rank-timeout rank 0 writes a partial report naming
    rank 2 (the others' bits compared), exits 1, and torchrun's failure summary, printed after
    its own traceback, carries samebits' verdict."""
    out = tmp_path / "fleet.json"
    started = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3",
         "-m", "tests.fixtures.fleet_fault", "hang:sum_fp32@2", "--only", ONLY, "--no-env-digest",
         "--rank-timeout", "20", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=400, env=_env())
    took = time.monotonic() - started
    report = json.loads(out.read_text())
    assert res.returncode != 0
    assert report["verdict"] == "incomplete"
    assert [(m["rank"], m["reason"]) for m in report["missing"]] == [
        (2, "no workload record within 20 s: hung or crashed")]
    assert [r["rank"] for r in report["ranks"]] == [0, 1] and report["suspects"] == []
    assert took < 300
    both = res.stdout + res.stderr
    summary = both.rfind("Root Cause")
    assert summary > both.rfind("Traceback"), both[-3000:]
    assert "samebits verify fleet: fleet: 2 ranks" in both[summary:]
    assert "MISSING rank 2: no workload record within 20 s" in both[summary:]


@pytest.mark.parametrize(("checkins", "expected"), [
    ([{"rank": 0, "host": "a", "device": "cuda:0", "gpu_uuid": "u1"},
      {"rank": 1, "host": "a", "device": "cuda:1", "gpu_uuid": "u2"}], []),
    ([{"rank": 0, "host": "a", "device": "cuda:0", "gpu_uuid": "u1"},
      {"rank": 1, "host": "a", "device": "cuda:0", "gpu_uuid": "u1"},
      {"rank": 2, "host": "a", "device": "cuda:1", "gpu_uuid": "u2"}],
     ["ranks 0, 1 share GPU u1 (a): their results are not independent and their timing and "
      "memory interfere"]),
    ([{"rank": 0, "host": "a", "device": "cuda:0", "gpu_uuid": None},
      {"rank": 3, "host": "a", "device": "cuda:0", "gpu_uuid": None},
      {"rank": 4, "host": "b", "device": "cuda:0", "gpu_uuid": None}],
     ["ranks 0, 3 share cuda:0 on a (a): their results are not independent and their timing "
      "and memory interfere"]),
    ([{"rank": 0, "host": "a", "device": "cpu", "gpu_uuid": None},
      {"rank": 1, "host": "a", "device": "cpu", "gpu_uuid": None}], []),
])
def test_two_ranks_on_one_gpu_are_refused(checkins: list[dict], expected: list[str]) -> None:
    """Ranks on the same GPU (by UUID; by host and cuda:N when the UUID is unknown) refuse the
    group; CPU ranks share the machine by design."""
    from verify.fleet.checkin import refusal, shared_devices

    assert [s["message"] for s in shared_devices(checkins)] == expected
    why = refusal([{**c, "preflight": []} for c in checkins])
    assert (why is None) is (not expected)


def test_refused_report_renders(tmp_path: Path) -> None:
    """A refused group's report is a format-1 report: text, HTML and fleet-report read it."""
    from verify.fleet.report import format_report, refused_report

    checkins = [{"rank": r, "host": "a", "local_rank": r, "device": "cuda:0", "gpu_uuid": "u1",
                 "preflight": []} for r in range(2)]
    from verify.fleet.checkin import refusal

    report = refused_report(checkins, refusal(checkins), world_size=2, backend="nccl")
    assert "verdict: REFUSED" in format_report(report)
    assert 'id="refused"' in render_html(report)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    res = subprocess.run([sys.executable, "-m", "samebits", "verify", "fleet-report", str(path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "REFUSED ranks 0, 1 share GPU u1" in res.stdout


def _closure(*names: str) -> list[Path]:
    """The installed top-level files of these distributions and all they require (no
    extras), as tests/integration/test_layers.py builds torch's."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        key = dist.metadata["Name"].lower()
        if key in seen:
            continue
        seen[key] = dist
        for req in dist.requires or ():
            r = Requirement(req)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    assert "numpy" not in seen, "samebits or torch now requires numpy"
    tops: set[Path] = set()
    for dist in seen.values():
        for f in dist.files or ():
            top = f.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth") or "__editable__" in top:
                continue
            tops.add(Path(dist.locate_file(top)))
    return sorted(tops)


@pytest.mark.slow
def test_fleet_runs_without_numpy(tmp_path: Path) -> None:
    """torchrun with 3 gloo ranks in a venv holding torch and samebits' own dependencies but no
    numpy (torch's all_gather_object would need it): the fleet runs and agrees."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    for top in _closure("torch", "samebits"):
        if top.exists() and not (site / top.name).exists():
            os.symlink(top, site / top.name)
    shim = tmp_path / "path"
    shim.mkdir()
    for pkg in ("samebits", "verify", "tests"):
        os.symlink(ROOT / pkg, shim / pkg)
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(shim), "OMP_NUM_THREADS": "1"}
    python = str(venv / "bin" / "python")
    assert subprocess.run([python, "-c", "import numpy"], env=env, cwd=tmp_path,
                          capture_output=True).returncode != 0
    out = tmp_path / "fleet.json"
    res = subprocess.run([python, "-m", "torch.distributed.run", "--standalone",
                          "--nproc-per-node=3", "-m", "verify", "fleet", "--only", ONLY,
                          "--no-env-digest", "--out", str(out)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["verdict"] == "consistent" and report["world_size"] == 3
    assert report["collectives"]["all_reduce/large"]["ranks_agree"] is True
