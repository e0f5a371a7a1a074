"""The fatbin reader and the coverage verdicts on the real files of the committed locks
(network: the wheels come from PyPI, hash-checked, into one cache per test session).

Downloads, each once per session: triton 3.7.1 (188 MB, for NVIDIA's cuobjdump inside it),
nvidia-curand/cufile/nvshmem (115 MB), torch 2.13.0 (502 MB, every CUDA 13 lock's linux-64
torch), torch 2.7.1 (782 MB, the volta lock's), the CUDA runtime wheels (2 MB each), and two
headers read by HTTP range from the cuDNN and NCCL wheels. SAMEBITS_TEST_CACHE=DIR keeps them
between sessions.
"""

from __future__ import annotations

import json
import os
import platform
import re
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from samebits.install import fetch_all
from samebits.lock.model import LockedPackage, parse_lock
from samebits.spec.gpus import registry
from tests.gpu.cuobjdump_compare import ours, theirs

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "lockfiles"
CUDA13 = ("ampere", "ada", "hopper", "blackwell")

pytestmark = [pytest.mark.network, pytest.mark.slow]


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("SAMEBITS_TEST_CACHE")
    return Path(given) if given else tmp_path_factory.mktemp("samebits-cache")


def locked(env: str, name: str, plat: str = "linux-64") -> LockedPackage:
    lock = parse_lock(LOCKS / f"{env}.conda-lock.yml")
    return next(p for p in lock.packages_for(plat) if p.name == name)


def wheel(cache: Path, env: str, name: str, plat: str = "linux-64") -> Path:
    (got,) = fetch_all([locked(env, name, plat)], cache)
    return got.path


def extract(whl: Path, member: str, dest: Path) -> Path:
    out = dest / member.rsplit("/", 1)[-1]
    if not out.exists():
        with zipfile.ZipFile(whl) as z:
            out.write_bytes(z.read(member))
    return out


@pytest.fixture(scope="session")
def cuobjdump(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NVIDIA's cuobjdump (CUDA 13.1), as the hopper lock's triton wheel ships it."""
    if platform.machine() != "x86_64":
        pytest.skip("the locked triton's cuobjdump is an x86_64 program")
    tool = extract(wheel(cache, "hopper", "triton"), "triton/backends/nvidia/bin/cuobjdump",
                   tmp_path_factory.mktemp("cuobjdump"))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


@pytest.mark.parametrize(("package", "member"), [
    ("nvidia-curand", "nvidia/cu13/lib/libcurand.so.10"),
    ("nvidia-cufile", "nvidia/cu13/lib/libcufile.so.0"),
    ("nvidia-nvshmem-cu13", "nvidia/nvshmem/lib/libnvshmem_host.so.3"),
    ("torch", "torch/lib/libtorch_cuda.so"),
])
def test_reader_agrees_with_cuobjdump(cache: Path, cuobjdump: Path, tmp_path: Path,
                                      package: str, member: str) -> None:
    """Every SASS and PTX entry cuobjdump lists, in its order, is the reader's: stored as is,
    LZ4, zstd; 64- to 112-byte headers; arch-specific and family-specific code."""
    lib = extract(wheel(cache, "hopper", package), member, tmp_path)
    for kind in ("elf", "ptx"):
        assert ours(lib, kind) == theirs(cuobjdump, lib, kind), (member, kind)


def check(cache: Path, *args: str) -> tuple[int, dict]:
    res = subprocess.run([sys.executable, "-m", "samebits", "check", *args, "--json",
                          "--cache-dir", str(cache)], cwd=ROOT, capture_output=True, text=True,
                         timeout=1800)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    return res.returncode, json.loads(res.stdout)


def test_volta_lock_has_sm70_sass_in_libtorch_cuda(cache: Path) -> None:
    """The volta lock's torch (2.7.1, CUDA 12.6) carries SASS for the V100 in every fatbin."""
    rc, doc = check(cache, "volta", "--gpu", "V100", "--package", "torch")
    (d,) = doc["environments"]["volta"]["platforms"]["linux-64"]["decisions"]
    assert rc == 0 and doc["runs"] is True
    assert d["native"]["torch/lib/libtorch_cuda.so"] == ["sm_70"]
    assert d["failing"] == [] and d["partial"] == []


@pytest.mark.parametrize("env", CUDA13)
def test_cuda13_locks_have_no_sm70(cache: Path, env: str) -> None:
    """The CUDA 13 locks' torch has no SASS and no PTX a V100 could use: check says so, exit 1."""
    rc, doc = check(cache, env, "--gpu", "V100", "--package", "torch", "--platform",
                    "linux-64")
    (d,) = doc["environments"][env]["platforms"]["linux-64"]["decisions"]
    assert rc == 1 and doc["runs"] is False
    failing = {f["path"]: f["carries"] for f in d["failing"]}
    carries = failing["torch/lib/libtorch_cuda.so"]
    assert "sm_70" not in carries and carries[0] == "sm_75"
    assert not any(c.startswith("compute_") for c in carries)
    assert d["reason"].startswith("no sm_70 in libtorch_cuda.so")


def _every_fatbin_archs(cache: Path, env: str) -> list[str]:
    """The plain SASS architectures present in every fatbin of libtorch_cuda.so: what the
    torch build was compiled for (TORCH_CUDA_ARCH_LIST)."""
    from samebits.lock.read import load_lock
    from samebits_app.lockcoverage import lock_coverage

    envobj = load_lock(LOCKS / f"{env}.conda-lock.yml", name=env, root=ROOT)
    cov, _ = lock_coverage(envobj, "linux-64", cache, packages=["torch"])
    lib = next(x for x in cov.libraries if x.name == "libtorch_cuda.so")
    sets = [{t.arch for t in ts if t.kind == "sass" and not t.variant} for ts, _ in lib.groups]
    common = set.intersection(*sets)
    return [f"{a // 10}.{a % 10}" for a in sorted(common)]


def _define(text: str, *names: str) -> str:
    return ".".join(re.search(rf"#define\s+{n}\s+(\d+)", text).group(1) for n in names)


@pytest.mark.parametrize("line", [ln for ln in registry().pypi_torch if ln.checked],
                         ids=lambda ln: ln.checked)
def test_registry_facts_match_the_wheels(cache: Path, line) -> None:
    """Each registry line marked `checked` matches the locked wheels of that torch release:
    SASS list (libtorch_cuda's fatbins), CUDA runtime (cuda_runtime_api.h), torch's CUDA
    (torch/version.py), cuDNN (cudnn_version.h), NCCL (nccl.h), aarch64 CUDA."""
    from tests.fixtures.remotezip import read_member

    env = next(e for e in ("volta", "hopper")
               if locked(e, "torch").version == line.checked)
    assert _every_fatbin_archs(cache, env) == list(line.sm)
    torch_whl = wheel(cache, env, "torch")
    with zipfile.ZipFile(torch_whl) as z:
        version_py = z.read("torch/version.py").decode()
    assert re.search(r"^cuda.*=\s*'([\d.]+)'", version_py, re.M).group(1) == line.cuda
    lock = parse_lock(LOCKS / f"{env}.conda-lock.yml")
    pkgs = {p.name: p for p in lock.packages_for("linux-64")}
    runtime = next(p for n, p in pkgs.items() if n.startswith("nvidia-cuda-runtime"))
    with zipfile.ZipFile(fetch_all([runtime], cache)[0].path) as z:
        header = next(n for n in z.namelist() if n.endswith("include/cuda_runtime_api.h"))
        cudart = int(_define(z.read(header).decode(), "CUDART_VERSION"))
    assert f"{cudart // 1000}.{cudart % 1000 // 10}" == line.cuda
    cudnn = next(p for n, p in pkgs.items() if n.startswith("nvidia-cudnn"))
    text = read_member(cudnn.url, "nvidia/cudnn/include/cudnn_version.h").decode()
    assert _define(text, "CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL").startswith(line.cudnn)
    nccl = next(p for n, p in pkgs.items() if n.startswith("nvidia-nccl"))
    text = read_member(nccl.url, "nvidia/nccl/include/nccl.h").decode()
    assert _define(text, "NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH").startswith(line.nccl)
    if "linux-aarch64" in lock.platforms:
        arm = locked(env, "torch", "linux-aarch64")
        import io

        from tests.fixtures.remotezip import RangeFile
        with zipfile.ZipFile(io.BufferedReader(RangeFile(arm.url), 1 << 16)) as z:
            has_cuda = "torch/lib/libtorch_cuda.so" in z.namelist()
        assert has_cuda is line.aarch64_cuda


def test_torch_still_says_so(cache: Path, tmp_path: Path) -> None:
    """The refusal text the attention workload recognises (tests/unit/test_gpu_workloads.py) is in
    the locked torch's libtorch_cuda.so, and the workload's matcher takes it as a refusal."""
    from tests.fixtures.samples import CUDNN_REFUSAL
    from verify.gpu.workloads._common import Refused
    from verify.gpu.workloads.attention import no_kernel

    lib = extract(wheel(cache, "hopper", "torch"), "torch/lib/libtorch_cuda.so", tmp_path)
    assert CUDNN_REFUSAL.encode() + b"\0" in lib.read_bytes()
    assert isinstance(no_kernel("CUDNN_ATTENTION", [CUDNN_REFUSAL], deterministic=True), Refused)
