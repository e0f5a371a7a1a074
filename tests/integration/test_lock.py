"""`samebits lock` against a local conda channel and a local wheel folder, through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from samebits.lock.model import parse_lock
from tests.fixtures.lock import TmpProject, conda_spec


def lock_ok(project: TmpProject, *names: str) -> None:
    res = project.samebits("lock", *names)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize(("generation", "cuda", "platform", "build", "cudart"), [
    ("hopper", "11.8", "linux-64", "cuda118_py312h0_100", "11.8.89"),
    ("hopper", "12.4", "linux-64", "cuda124_py312h0_101", "12.4.127"),
    ("hopper", "12.8", "linux-64", "cuda124_py312h0_101", "12.8.90"),
    ("hopper", "12.4", "linux-aarch64", "cuda124_py312h0_101", "12.4.127"),
    ("cpu", None, "linux-64", "cpu_py312h0_0", None),
    ("cpu", None, "linux-aarch64", "cpu_py312h0_0", None),
])
def test_build_selection_by_cuda(project: TmpProject, generation: str, cuda: str | None,
                                 platform: str, build: str, cudart: str | None) -> None:
    """__cuda from the spec picks pytorch's build and the CUDA runtime, per target platform."""
    project.spec("env", conda_spec(generation=generation, cuda=cuda, platform=platform))
    lock_ok(project)
    lock = parse_lock(project.lockfile("env"))
    pkgs = {p.name: p for p in lock.packages_for(platform)}
    assert pkgs["pytorch"].build == build
    assert (pkgs["cuda-cudart"].version if "cuda-cudart" in pkgs else None) == cudart
    assert all(p.md5 and p.sha256 for p in pkgs.values())
    assert lock.meta("__cuda") == (cuda or "")


def test_cpu_only_build_for_a_gpu_generation_is_refused(project: TmpProject) -> None:
    """No CUDA 11.8 builds for aarch64: the solve falls back to CPU pytorch; lock refuses it."""
    project.spec("env", conda_spec(cuda="11.8", platform="linux-aarch64"))
    res = project.samebits("lock")
    assert res.returncode == 2
    assert ("environments/env.toml: platforms.linux-aarch64 = {'glibc': '2.28'}: torch 2.4.0 "
            "resolved for linux-aarch64 ships no CUDA runtime (a CPU-only build); this generation "
            "needs CUDA") in res.stderr
    assert not project.lockfile("env").exists()


def test_unsatisfiable_names_spec_and_writes_nothing(project: TmpProject) -> None:
    """An impossible pin exits 3 with the solver's explanation and leaves the old lock alone."""
    project.spec("env", conda_spec())
    lock_ok(project)
    before = project.lockfile("env").read_bytes()
    project.spec("env", conda_spec(deps='"python 3.99.*", "pytorch"'))
    res = project.samebits("lock")
    assert res.returncode == 3, res.stderr
    assert "error: environments/env.toml: the conda dependencies cannot be satisfied on " \
           "linux-64 (__cuda=12.4, __glibc=2.28)" in res.stderr
    assert "python 3.99.*" in res.stderr
    assert "Traceback" not in res.stderr
    assert project.lockfile("env").read_bytes() == before
    assert not list(project.lockfile("env").parent.glob(".*.tmp"))


def test_pypi_unsatisfiable(project: TmpProject) -> None:
    """A PyPI pin that no wheel satisfies exits 3 naming the spec, platform and Python."""
    project.spec("env", 'generation = "cpu"\npython = "3.12"\n[platforms.linux-64]\n'
                 'glibc = "2.28"\n[pypi]\nindex = "@WHEELS@"\nrequirements = ["torch==9.9"]\n')
    res = project.samebits("lock")
    assert res.returncode == 3
    assert ("error: environments/env.toml: [pypi] requirements on linux-64 (Python 3.12, "
            "x86_64-manylinux_2_28) cannot be satisfied:") in res.stderr


PYPI_SPEC = """\
generation = "hopper"
python = "3.12"
[platforms.linux-64]
glibc = "2.28"
[platforms.linux-aarch64]
glibc = "2.28"
[cuda]
version = "{cuda}"
[pypi]
index = "@WHEELS@"
requirements = ["torch=={torch}"]
"""


def test_pypi_part_picks_the_wheel_for_each_platform(project: TmpProject) -> None:
    """uv resolves per target platform and the lock records that wheel's url and sha256."""
    project.spec("env", PYPI_SPEC.format(cuda="13.0", torch="2.13.0"))
    lock_ok(project)
    lock = parse_lock(project.lockfile("env"))
    for plat, arch in (("linux-64", "x86_64"), ("linux-aarch64", "aarch64")):
        pkgs = {p.name: p for p in lock.packages_for(plat, "pip")}
        assert set(pkgs) == {"torch", "numpy", "nvidia-cuda-runtime"}
        assert pkgs["torch"].url.endswith(f"torch-2.13.0-py3-none-manylinux_2_28_{arch}.whl")
        wheel = Path(pkgs["torch"].url.removeprefix("file://"))
        import hashlib

        assert pkgs["torch"].sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
        assert dict(pkgs["torch"].dependencies) == {"numpy": "*", "nvidia-cuda-runtime": "*"}


@pytest.mark.parametrize(("cuda", "torch", "message"), [
    ("13.0", "2.9.1", "on linux-64 the solve chose nvidia-cuda-runtime-cu12 12.8.90 (CUDA 12.8); "
                      'pin torch to a release built for CUDA 13.0 or set [cuda] version = "12.8"'),
    ("12.8", "2.9.1", "torch 2.9.1 resolved for linux-aarch64 ships no CUDA runtime (a CPU-only "
                      "build); this generation needs CUDA"),
])
def test_post_solve_cuda_checks(project: TmpProject, cuda: str, torch: str, message: str) -> None:
    """What the solver really chose is checked against the spec's CUDA line and generation."""
    project.spec("env", PYPI_SPEC.format(cuda=cuda, torch=torch))
    res = project.samebits("lock")
    assert res.returncode == 2
    assert message in res.stderr
    assert not project.lockfile("env").exists()


def test_byte_stable(project: TmpProject, tmp_path: Path) -> None:
    """The same input locked twice, into two folders, gives identical bytes and no timestamp."""
    project.spec("env", conda_spec(platform="linux-aarch64"))
    lock_ok(project)
    first = project.lockfile("env").read_bytes()
    other = tmp_path / "other-locks"
    assert project.samebits("lock", "--lockfiles", str(other)).returncode == 0
    assert (other / "env.conda-lock.yml").read_bytes() == first
    res = project.samebits("lock")
    assert "env: unchanged" in res.stdout
    assert b"created_at" not in first and b"time_metadata" not in first


def test_conda_lock_reads_and_renders(project: TmpProject, tmp_path: Path) -> None:
    """conda-lock's own parser accepts the lock and `conda-lock render` turns it into @EXPLICIT."""
    from conda_lock.lockfile import parse_conda_lock_file

    project.spec("env", conda_spec())
    lock_ok(project)
    parsed = parse_conda_lock_file(project.lockfile("env"))
    assert {p.name for p in parsed.package} >= {"python", "pytorch", "cudnn"}
    out = tmp_path / "explicit"
    res = subprocess.run(
        [sys.executable, "-m", "conda_lock", "render", "--kind", "explicit", "-p", "linux-64",
         "--filename-template", str(out) + "-{platform}.txt", str(project.lockfile("env"))],
        capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "explicit-linux-64.txt").read_text()
    assert "@EXPLICIT" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("file://")]
    assert len(lines) == len(parsed.package)
    assert all("#" in ln for ln in lines)


def test_custom_metadata_and_content_hash(project: TmpProject) -> None:
    """custom_metadata records the generation facts; content_hash is per platform."""
    project.spec("env", conda_spec(generation="blackwell", cuda="12.8"))
    lock_ok(project)
    raw = yaml.safe_load(project.lockfile("env").read_text())
    custom = raw["metadata"]["custom_metadata"]
    assert {k: custom[k] for k in ("samebits.generation", "samebits.compute-capabilities",
                                   "samebits.__cuda", "samebits.__glibc.linux-64",
                                   "samebits.python")} == {
        "samebits.generation": "blackwell", "samebits.compute-capabilities": "10.0,12.0",
        "samebits.__cuda": "12.8", "samebits.__glibc.linux-64": "2.28",
        "samebits.python": "3.12"}
    assert len(custom["samebits.spec-digest"]) == 64
    assert list(raw["metadata"]["content_hash"]) == ["linux-64"]
    first_hash = raw["metadata"]["content_hash"]["linux-64"]
    spec = project.spec("env", conda_spec(generation="blackwell", cuda="12.8"))
    spec.write_text(spec.read_text().replace('glibc = "2.28"', 'glibc = "2.17"'))
    lock_ok(project)
    second = yaml.safe_load(project.lockfile("env").read_text())["metadata"]["content_hash"]
    assert second["linux-64"] != first_hash  # __glibc, a virtual package, enters the hash


def test_check_fresh_stale_missing(project: TmpProject) -> None:
    """--check compares spec digests without solving: 0 fresh, 1 stale or missing."""
    path = project.spec("env", conda_spec())
    lock_ok(project)
    assert project.samebits("lock", "--check").returncode == 0
    path.write_text("# a comment changes nothing\n" + path.read_text())
    assert project.samebits("lock", "--check").returncode == 0
    path.write_text(path.read_text().replace('"pytorch"', '"pytorch", "numpy"'))
    res = project.samebits("lock", "--check", "--json")
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    assert doc["fresh"] is False and doc["environments"]["env"]["state"] == "stale"
    project.lockfile("env").unlink()
    res = project.samebits("lock", "--check")
    assert res.returncode == 1 and "env: missing" in res.stdout


def test_diff(project: TmpProject, tmp_path: Path) -> None:
    """lock diff lists changed builds and added or removed packages per platform."""
    project.spec("env", conda_spec(cuda="11.8"))
    lock_ok(project)
    old = tmp_path / "old.yml"
    old.write_bytes(project.lockfile("env").read_bytes())
    project.spec("env", conda_spec(cuda="12.4", deps='"python 3.12.*", "pytorch", '
                                                     '"typing-extensions"'))
    lock_ok(project)
    new = project.lockfile("env")
    res = project.samebits("lock", "diff", str(old), str(new))
    assert res.returncode == 1
    assert "linux-64: 1 added, 0 removed, 5 changed" in res.stdout
    assert "  + typing-extensions 4.12.2 pyh0_0 (conda)" in res.stdout
    assert ("  ~ pytorch 2.4.0 cuda118_py312h0_100 -> 2.4.0 cuda124_py312h0_101 (conda)"
            in res.stdout)
    doc = json.loads(project.samebits("lock", "diff", str(old), str(new), "--json").stdout)
    changed = {c["name"]: c for c in doc["platforms"]["linux-64"]["changed"]}
    assert changed["cuda-version"]["old"]["version"] == "11.8"
    assert doc["format"] == 1 and doc["identical"] is False
    same = project.samebits("lock", "diff", str(new), str(new))
    assert same.returncode == 0 and "no package differs" in same.stdout


@pytest.mark.parametrize(("args", "code", "message"), [
    (["lock", "nope"], 2, "error: unknown environment 'nope'"),
    (["lock", "diff", "a.yml", "b.yml"], 2, "error: a.yml: no such lockfile"),
])
def test_usage_errors(project: TmpProject, args: list[str], code: int, message: str) -> None:
    """Expected failures print error: ... and exit 2, never a traceback."""
    project.spec("env", conda_spec())
    res = project.samebits(*args)
    assert res.returncode == code
    assert message in res.stderr
    assert "Traceback" not in res.stderr


def test_not_a_lockfile(project: TmpProject, tmp_path: Path) -> None:
    """A YAML file that is not conda-lock is rejected by conda-lock's parser, named."""
    bad = tmp_path / "bad.yml"
    bad.write_text("version: 1\nmetadata: {}\npackage: []\n")
    res = project.samebits("lock", "diff", str(bad), str(bad), "--json")
    assert res.returncode == 2
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "lockfile" and err["message"].startswith(f"{bad}: not a conda-lock file")


@pytest.mark.parametrize(("cutoff", "python"), [
    ("2023-11-15T00:00:00Z", "3.11.9"),   # python 3.12.7 was "uploaded" a day after 3.11.9
    ("2023-11-16", "3.12.7"),
])
def test_exclude_newer_on_the_conda_part(project: TmpProject, cutoff: str, python: str) -> None:
    """exclude-newer hides conda records uploaded after the cutoff, so a re-lock reproduces."""
    spec = conda_spec(generation="cpu", cuda=None, deps='"python"')
    project.spec("env", f'exclude-newer = "{cutoff}"\n' + spec)
    lock_ok(project)
    (pkg,) = [p for p in parse_lock(project.lockfile("env")).packages if p.name == "python"]
    assert pkg.version == python


def test_libyaml_and_pure_python_emit_the_same_lock() -> None:
    """The lock's bytes do not depend on whether PyYAML was built with libyaml."""
    import yaml

    from samebits.lock.model import dump_yaml, lock_to_dict

    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml: only the pure-Python emitter exists here")
    doc = lock_to_dict(parse_lock(Path(__file__).parents[2] / "lockfiles/hopper.conda-lock.yml"))
    doc["metadata"]["custom_metadata"].update({
        "samebits.tricky": "13.0", "samebits.star": "*", "samebits.empty": "",
        "samebits.unicode": "Grüße", "samebits.colon": "a: b", "samebits.yes": "yes",
        "samebits.long": "x" * 5000})
    assert dump_yaml(doc, dumper=yaml.CSafeDumper) == dump_yaml(doc, dumper=yaml.SafeDumper)
