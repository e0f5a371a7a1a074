"""``samebits check``: a lock read from its wheels without installing, an installed prefix,
the committed coverage files, and bad input. Offline: the wheels are local file:// archives
holding ELF files with fatbins laid out as NVIDIA's (tests/fixtures/fatbin.py); the same
commands on the real locks: tests/integration/test_coverage_network.py."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.lock.model import Lock, LockedPackage, render_lock
from tests.fixtures.fakewheels import Wheel, wheel_bytes_to
from tests.fixtures.fatbin import Sec, elf, fatbin, ptx, sass
from verify.kernels.coverage import Coverage
from verify.kernels.report import markdown, platform_doc

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = "linux-64"
CUDART = b"#define CUDART_VERSION 12060\n"


def libfake(*entries) -> bytes:  # type: ignore[no-untyped-def]
    return elf([Sec(".nv_fatbin", fatbin(list(entries)))])


def make_project(root: Path, files: dict[str, bytes]) -> Path:
    """root/lockfiles/gpu.conda-lock.yml locking one file:// wheel with ``files``."""
    (root / "wheels").mkdir(parents=True)
    whl = wheel_bytes_to(root / "wheels", Wheel(
        name="fakecuda", version="1.0", tag="py3-none-manylinux_2_28_x86_64", files=files))
    pkg = LockedPackage(name="fakecuda", version="1.0", manager="pip", platform=PLATFORM,
                        url=whl.as_uri(), sha256=hashlib.sha256(whl.read_bytes()).hexdigest())
    lock = Lock(platforms=(PLATFORM,), channels=(), sources=("test",),
                content_hash={PLATFORM: "0" * 64}, custom={"samebits.environment": "gpu"},
                packages=(pkg,))
    (root / "lockfiles").mkdir()
    (root / "lockfiles" / "gpu.conda-lock.yml").write_text(render_lock(lock))
    return root


def samebits(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samebits", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


FILES = {"fakecuda/lib/libfake.so": libfake(sass(80), sass(90), ptx(90, (8, 5))),
         "fakecuda/include/cuda_runtime_api.h": CUDART,
         "fakecuda/lib/libcudart.so.12": b"\x7fELF" + b"\0" * 60}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "p", FILES)


@pytest.mark.parametrize(("gpu", "rc", "verdict"), [
    ("A100", 0, "A100 on lockfiles/gpu.conda-lock.yml linux-64: RUNS"),
    ("B200", 0, "B200 on lockfiles/gpu.conda-lock.yml linux-64: RUNS"),   # compute_90 PTX JIT
    ("V100", 1, "V100 on lockfiles/gpu.conda-lock.yml linux-64: DOES NOT RUN"),
])
def test_lock_read_from_its_wheels(project: Path, tmp_path: Path, gpu: str, rc: int,
                                   verdict: str) -> None:
    """The wheel is fetched into the cache by hash and read from inside; the verdict and exit
    code follow the GPU."""
    cache = tmp_path / "cache"
    res = samebits("check", "gpu", "--gpu", gpu, "--cache-dir", str(cache), cwd=project)
    assert res.returncode == rc, res.stderr
    assert res.stdout.splitlines()[0] == verdict
    assert list((cache / "archives").glob("*/fakecuda-1.0-*.whl"))
    assert not list(project.rglob("libfake.so"))  # nothing installed


def test_lock_json_names_the_library_and_the_driver(project: Path, tmp_path: Path) -> None:
    """--json: the failing library with what it carries; the CUDA 12.6 runtime under a 535
    driver runs by minor version compatibility."""
    res = samebits("check", "gpu", "--gpu", "sm_70", "--driver", "535.104.05", "--json",
                   "--cache-dir", str(tmp_path / "c"), cwd=project)
    doc = json.loads(res.stdout)["environments"]["gpu"]["platforms"][PLATFORM]
    (d,) = doc["decisions"]
    assert d["failing"] == [{"path": "fakecuda/lib/libfake.so", "package": "fakecuda 1.0",
                             "status": "none", "carries": ["sm_80", "sm_90", "compute_90/8.5"],
                             "uncovered_fatbins": 1, "of": 1,
                             "uncovered_targets": ["sm_80", "compute_90", "sm_90"]}]
    assert doc["driver"]["status"] == "minor-compat"
    assert doc["stack"]["cuda_runtime"] == "12.6"


def test_write_is_byte_stable_and_check_sees_staleness(project: Path, tmp_path: Path) -> None:
    """--all --write twice (second time from the per-archive cache) gives the same bytes;
    --all --check is fresh, then stale once the lock changes."""
    cache = str(tmp_path / "cache")
    assert samebits("check", "--all", "--write", "--cache-dir", cache, cwd=project).returncode == 0
    out = project / "lockfiles"
    first = {p.name: p.read_bytes() for p in out.glob("gpu.coverage.*")}
    assert sorted(first) == ["gpu.coverage.json", "gpu.coverage.md"]
    assert samebits("check", "--all", "--write", "--cache-dir", cache, cwd=project).returncode == 0
    assert {p.name: p.read_bytes() for p in out.glob("gpu.coverage.*")} == first
    res = samebits("check", "--all", "--check", cwd=project)
    assert res.returncode == 0 and "lockfiles/gpu.coverage.json: fresh" in res.stdout
    lock = out / "gpu.conda-lock.yml"
    lock.write_text(lock.read_text() + "\n")
    res = samebits("check", "--all", "--check", cwd=project)
    assert res.returncode == 1
    assert "lockfiles/gpu.coverage.json: stale" in res.stdout


def test_write_leaves_unchanged_locks_alone(project: Path, tmp_path: Path) -> None:
    """--write refreshes only the locks whose sha256 changed (what `nox -s lock` runs on a
    fresh clone): with an empty cache, a fresh coverage file is kept and nothing is fetched;
    a changed lock, or a hand-edited table, is read again."""
    cache = tmp_path / "cache"
    assert samebits("check", "--all", "--write", "--cache-dir", str(tmp_path / "warm"),
                    cwd=project).returncode == 0
    out = project / "lockfiles"
    res = samebits("check", "--all", "--write", "--cache-dir", str(cache), cwd=project)
    assert res.returncode == 0 and "lockfiles/gpu.coverage.json: unchanged" in res.stdout
    assert not cache.exists() or not any(cache.rglob("*.whl")), "a fresh lock fetched archives"
    md = out / "gpu.coverage.md"
    md.write_text(md.read_text() + "edited\n")
    res = samebits("check", "--all", "--write", "--cache-dir", str(cache), cwd=project)
    assert res.returncode == 0 and "unchanged" not in res.stdout
    assert any(cache.rglob("*.whl")) and "edited" not in md.read_text()


def test_installed_prefix(tmp_path: Path) -> None:
    """--prefix reads the ELF files of an installed venv in place, owners from RECORD."""
    from installer import install
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    whl = wheel_bytes_to(tmp_path, Wheel(name="fakecuda", version="1.0",
                                         tag="py3-none-manylinux_2_28_x86_64", files=FILES))
    prefix = tmp_path / "env"
    site = prefix / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12\n")
    dest = SchemeDictionaryDestination({k: str(site) for k in ("purelib", "platlib")} | {
        "scripts": str(prefix / "bin"), "headers": str(prefix / "include"), "data": str(prefix)},
        interpreter="/usr/bin/python3", script_kind="posix")
    with WheelFile.open(whl) as source:
        install(source, dest, additional_metadata={})
    res = samebits("check", "--prefix", str(prefix), "--gpu", "H100", "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 0 and doc["runs"] is True
    (d,) = doc["decisions"]
    assert d["native"] == {"lib/python3.12/site-packages/fakecuda/lib/libfake.so": ["sm_90"]}
    assert doc["stack"]["cuda_runtime"] == "12.6"


@pytest.mark.parametrize(("args", "message"), [
    (["hopper", "--gpu", "Z80"],
     'error: --gpu "Z80": not a compute capability (9.0, sm_90), a GPU model or a generation'),
    (["hopper", "--driver", "latest"],
     'error: --driver "latest": expected a driver version like 535.104.05'),
    (["hopper", "--write", "--gpu", "H100"],
     "error: --write records whole locks: no --package, --gpu, --driver or --platform with it"),
    (["--all", "--write", "--package", "torch"],
     "error: --write records whole locks: no --package, --gpu, --driver or --platform with it"),
    (["nosuch"], "error: unknown environment 'nosuch'"),
    (["--prefix", "/nonexistent/env"], "error: /nonexistent/env: no such directory"),
    ([], "error: name an environment or a lockfile, or pass --all or --prefix"),
])
def test_bad_input(args: list[str], message: str) -> None:
    """Bad arguments: the message names the value, exit 2, no traceback."""
    res = samebits("check", *args)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(message) and "Traceback" not in res.stderr


# ------------------------------------------------------------------ the committed tables

LOCKS = sorted((ROOT / "lockfiles").glob("*.conda-lock.yml"))


def test_committed_coverage_files_are_fresh() -> None:
    """Every committed lock has its coverage table, made from these very lock bytes."""
    res = samebits("check", "--all", "--check")
    assert res.returncode == 0, res.stdout


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name.split(".")[0])
def test_committed_tables_follow_from_their_libraries(lock: Path) -> None:
    """The decisions and the Markdown in each committed table are what today's rules make of
    the libraries it records: a rule change without `samebits check --all --write` fails here."""
    from verify.kernels.report import _lean

    json_path = lock.with_name(lock.name.replace(".conda-lock.yml", ".coverage.json"))
    doc = json.loads(json_path.read_text())
    for plat, recorded in doc["platforms"].items():
        cov = Coverage.from_dict({**recorded, "format": 1})
        assert _lean(platform_doc(cov)) == recorded, plat
    assert json_path.with_suffix(".md").read_text() == markdown(doc)


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name.split(".")[0])
def test_committed_tables_on_volta(lock: Path) -> None:
    """sm_70 SASS in the volta lock's libtorch_cuda, on every platform; none in the others."""
    doc = json.loads(lock.with_name(lock.name.replace(".conda-lock.yml", ".coverage.json"))
                     .read_text())
    for plat, p in doc["platforms"].items():
        torch = next(x for x in p["libraries"] if x["path"] == "torch/lib/libtorch_cuda.so")
        (volta,) = p["generations"]["volta"]
        if doc["environment"] == "volta":
            assert "sm_70" in torch["sass"] and volta["status"] == "partial", plat
            assert [f["path"] for f in volta["failing"]] == [
                "cusparselt/lib/libcusparseLt.so.0"]
        else:
            assert "sm_70" not in torch["sass"] and volta["status"] == "none", plat
            assert volta["reason"].startswith("no sm_70 in libtorch_cuda.so")


def _installed(tmp_path: Path) -> Path:
    from installer import install
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    whl = wheel_bytes_to(tmp_path, Wheel(name="fakecuda", version="1.0",
                                         tag="py3-none-manylinux_2_28_x86_64", files=FILES))
    prefix = tmp_path / "env"
    site = prefix / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12\n")
    dest = SchemeDictionaryDestination({k: str(site) for k in ("purelib", "platlib")} | {
        "scripts": str(prefix / "bin"), "headers": str(prefix / "include"), "data": str(prefix)},
        interpreter="/usr/bin/python3", script_kind="posix")
    with WheelFile.open(whl) as source:
        install(source, dest, additional_metadata={})
    return prefix


@pytest.mark.parametrize("linkage", [True, False])
def test_verify_env_reports_the_kernels(tmp_path: Path, linkage: bool) -> None:
    """`verify env --json` carries the coverage (with and without --no-linkage), its text a
    "runs on" line; --no-coverage leaves it out."""
    prefix = _installed(tmp_path)
    extra = [] if linkage else ["--no-linkage"]
    res = samebits("verify", "env", "--prefix", str(prefix), "--json", *extra)
    doc = json.loads(res.stdout)
    libs = doc["coverage"]["libraries"]
    assert [(x["path"], x["package"], x["sass"]) for x in libs] == [
        ("lib/python3.12/site-packages/fakecuda/lib/libfake.so", "fakecuda 1.0",
         ["sm_80", "sm_90"])]
    assert doc["coverage"]["runs_on"].startswith("Ampere ✔ (sm_80, sm_86) Ada ✔ Hopper ✔")
    text = samebits("verify", "env", "--prefix", str(prefix), *extra).stdout
    assert "  kernels    1 libraries with CUDA device code; runs on: Ampere ✔" in text
    bare = json.loads(samebits("verify", "env", "--prefix", str(prefix), "--json",
                               "--no-coverage", *extra).stdout)
    assert "coverage" not in bare


def test_audit_preflight_names_what_the_lock_runs_on(tmp_path: Path) -> None:
    """The audit's preflight carries "this lock runs on: ..." from the environment's kernels,
    and fails when the GPU in use is not among them."""
    from samebits_app.audit.pipeline import with_kernel_coverage
    from samebits_app.audit.verdict import Step
    from tests.fixtures.samples import H200, sample_facts

    prefix = _installed(tmp_path)
    step = with_kernel_coverage(Step(name="preflight", status="ok", summary="s"), prefix, None,
                                None)
    assert step.status == "ok"
    assert step.summary.startswith("s; this lock runs on: Ampere ✔ (sm_80, sm_86) Ada ✔ Hopper ✔")

    class Runtime:  # the audit's Runtime, reporting a V100 (its facts come from the worker)
        def facts(self):  # noqa: ANN202
            import dataclasses

            return sample_facts(gpu=True, gpus=(dataclasses.replace(
                H200, name="Tesla V100", compute_capability="7.0"),))

    step = with_kernel_coverage(Step(name="preflight", status="ok", summary="s"), prefix,
                                Runtime(), "cuda:0")
    assert step.status == "failed"
    assert step.reasons == ("preflight: this GPU (sm_70): no sm_70 in libfake.so",)


def test_a_fresh_table_answers_without_downloading(project: Path, tmp_path: Path) -> None:
    """With its coverage table fresh beside the lock, check answers from it (issue 45: the
    admin's first command downloaded 2.7 GB per platform the table already answered), and
    the answer is the one the archives give; a stale table is not used."""
    from tests.fixtures.programs import no_network

    cache = str(tmp_path / "cache")
    read = samebits("check", "gpu", "--gpu", "V100", "--json", "--cache-dir", cache,
                    cwd=project)
    assert samebits("check", "gpu", "--write", "--cache-dir", cache, cwd=project).returncode == 0
    offline = subprocess.run([*no_network(), sys.executable, "-m", "samebits", "check", "gpu",
                              "--gpu", "V100", "--json", "--cache-dir", str(tmp_path / "empty")],
                             cwd=project, capture_output=True, text=True, timeout=300)
    assert (offline.returncode, read.returncode) == (1, 1), offline.stderr
    assert json.loads(offline.stdout) == json.loads(read.stdout)
    assert not (tmp_path / "empty" / "archives").exists()
    lock = project / "lockfiles" / "gpu.conda-lock.yml"
    lock.write_text(lock.read_text() + "\n")  # the table now names another lock: read again
    stale = subprocess.run([*no_network(), sys.executable, "-m", "samebits", "check", "gpu",
                            "--gpu", "V100", "--cache-dir", str(tmp_path / "empty2")],
                           cwd=project, capture_output=True, text=True, timeout=300)
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "fetching 1 archive of gpu (linux-64)" in stale.stderr  # (the wheel is a file://)
    assert list((tmp_path / "empty2" / "archives").glob("*/fakecuda-1.0-*.whl"))


@pytest.mark.parametrize(("driver", "rc", "line"), [
    ("580.65.06", 0, "  driver 580.65.06 provides CUDA 13.0; the runtime is 13.0"),
    ("535.104", 1, "  driver 535.104 provides CUDA 12.2; the CUDA 13.0 runtime needs >= "
                   "580.65.06"),
])
def test_the_admin_tutorials_check(tmp_path: Path, driver: str, rc: int, line: str) -> None:
    """The cluster-admin tutorial's first command, on the committed hopper lock with no network
    and an empty cache: a driver that runs it and one that does not, each said."""
    from tests.fixtures.programs import no_network

    res = subprocess.run([*no_network(), sys.executable, "-m", "samebits", "check", "hopper",
                          "--gpu", "H100", "--driver", driver, "--platform", "linux-64",
                          "--cache-dir", str(tmp_path / "cache")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == rc, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("lockfiles/hopper.coverage.json: the coverage read for this "
                               "lock (sha256 ")
    assert lines[1] == ("H100 on lockfiles/hopper.conda-lock.yml linux-64: "
                        + ("RUNS" if rc == 0 else "DOES NOT RUN"))
    assert lines[2] == line
