"""samebits freeze of what samebits install and pip leave behind: every committed lock's
environment freezes to a spec that validates (a CUDA build of torch run on a CPU is generation
cpu); a wheel installed from a local file is traced to the index with its sha256, or the lock
says in one line that it is not reproducible elsewhere; a frozen spec re-locks (real uv) to
the same packages.

A committed lock's environment is built from the lock's own wheel records (the dist-info
files samebits install writes: METADATA, WHEEL, RECORD, INSTALLER, direct_url.json), not by
installing gigabytes."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from samebits.lock.model import LockedPackage, parse_lock
from samebits_app.cli import main
from tests.fixtures.fakewheels import Wheel, write_wheels

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).parents[2]
COMMITTED = sorted([*ROOT.glob("lockfiles/**/*.conda-lock.yml"),
                    ROOT / "examples" / "paper" / "conda-lock.yml"])
# the CPU build of torch in pip's find-links folder here: the official file's sha256
TORCH_CPU = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
TORCH_CPU_SHA = "6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b"
TORCH_CPU_URL = ("https://download.pytorch.org/whl/cpu/"
                 "torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl")


def _record(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


def records_prefix(prefix: Path, python: str, wheels: list[tuple[str, str, str, str]]) -> Path:
    """A venv holding only the dist-info records of (name, version, wheel URL, sha256), as
    samebits install writes them."""
    site = prefix / "lib" / f"python{'.'.join(python.split('.')[:2])}" / "site-packages"
    site.mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion = {python}\n")
    for name, version, url, sha in wheels:
        filename = url.rsplit("/", 1)[-1].replace("%2B", "+")
        tags = parse_wheel_filename(filename)[3]
        info = f"{name.replace('-', '_')}-{version}.dist-info"
        files = {
            "METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
            "WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
                     + "".join(f"Tag: {t}\n" for t in sorted(str(t) for t in tags)),
            "INSTALLER": "samebits\n",
            "direct_url.json": json.dumps({"archive_info": {"hash": f"sha256={sha}",
                                                            "hashes": {"sha256": sha}},
                                           "url": url}),
        }
        (site / info).mkdir()
        record = ""
        for fname, text in files.items():
            (site / info / fname).write_text(text)
            record += f"{info}/{fname},{_record(text.encode())},{len(text.encode())}\n"
        (site / info / "RECORD").write_text(record + f"{info}/RECORD,,\n")
    return prefix


def _ident(packages: list[LockedPackage]) -> list[tuple[str, str, str, str | None]]:
    return sorted((p.name, p.version, p.url, p.sha256) for p in packages)


def _freeze(capsys: pytest.CaptureFixture[str], prefix: Path, root: Path,
            *args: str) -> tuple[int, dict]:
    rc = main(["freeze", "--prefix", str(prefix), "--root", str(root), "--json", *args])
    return rc, json.loads(capsys.readouterr().out)


def _lock_prefix(lockfile: Path, where: Path) -> tuple[Path, list[LockedPackage], str]:
    lock = parse_lock(lockfile)
    pkgs = [p for p in lock.packages_for("linux-64") if p.manager == "pip"]
    python = lock.meta("python") + ".7"
    prefix = records_prefix(where, python, [(p.name, p.version, p.url, p.sha256 or "")
                                            for p in pkgs])
    return prefix, pkgs, lock.meta("generation")


def test_every_committed_lock_freezes_to_a_valid_spec(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """Each committed lock's linux-64 environment, frozen with the lock's generation: exit 0,
    the spec validates (cpu: no [cuda] although torch carries CUDA wheels), the frozen lock has
    the same wheels, and a wheel no index lists (download.pytorch.org's CPU torch) is pinned
    by its URL so the spec re-locks to it. Every lock's outcome is reported together."""
    bad = []
    for n, lockfile in enumerate(COMMITTED):
        prefix, pkgs, generation = _lock_prefix(lockfile, tmp_path / f"env{n}")
        root = tmp_path / f"root{n}"
        rc, doc = _freeze(capsys, prefix, root, "--name", "env", "--generation", generation)
        if rc != 0:
            bad.append(f"{lockfile.name}: exit {rc}: {doc.get('error') or doc}")
            continue
        spec = tomllib.loads((root / "environments" / "env.toml").read_text())
        frozen = parse_lock(root / "lockfiles" / "env.conda-lock.yml").packages
        if _ident(list(frozen)) != _ident(pkgs):
            bad.append(f"{lockfile.name}: the frozen lock's wheels differ")
        cuda = parse_lock(lockfile).meta("__cuda") or None
        if (spec.get("cuda") or {}).get("version") != cuda:
            bad.append(f"{lockfile.name}: [cuda] {spec.get('cuda')}, the lock says {cuda!r}")
        by_url = [r for r in spec["pypi"]["requirements"] if " @ " in r]
        want = [f"{p.name} @ {p.url}" for p in pkgs
                if not p.url.startswith("https://files.pythonhosted.org/")]
        if sorted(by_url) != sorted(want):
            bad.append(f"{lockfile.name}: pinned by URL {by_url}, expected {want}")
    assert bad == []


def test_cpu_lock_without_generation_names_cpu(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    """The cpu lock's environment carries CUDA 13.0 wheels: without --generation the message
    offers cpu beside the GPUs."""
    prefix, _, _ = _lock_prefix(ROOT / "lockfiles" / "cpu.conda-lock.yml", tmp_path / "env")
    rc, doc = _freeze(capsys, prefix, tmp_path / "root", "--name", "env")
    assert rc == 2
    assert doc["error"]["message"].endswith(
        ": pass --generation, the GPUs it is for (ada, ampere, blackwell, hopper, volta), or "
        "--generation cpu where it runs without a GPU")


def test_local_torch_traced_by_sha256(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    """torch 2.13.0+cpu installed from file:///opt/wheels: the index that lists a file with
    its sha256 (here a PEP 503 copy of download.pytorch.org/whl/cpu's page) gives the lock's
    URL, and the spec pins that URL; exit 0."""
    prefix = records_prefix(tmp_path / "env", "3.11.7", [
        ("torch", "2.13.0+cpu", f"file:///opt/wheels/{TORCH_CPU.replace('+', '%2B')}",
         TORCH_CPU_SHA)])
    page = tmp_path / "pytorch-cpu" / "torch"
    page.mkdir(parents=True)
    (page / "index.html").write_text(
        f'<html><body><a href="{TORCH_CPU_URL}#sha256={TORCH_CPU_SHA}" '
        f'data-requires-python="&gt;=3.10">{TORCH_CPU}</a></body></html>\n')
    (tmp_path / "empty").mkdir()
    index = (tmp_path / "pytorch-cpu").as_uri()
    rc, doc = _freeze(capsys, prefix, tmp_path / "root", "--name", "t", "--index",
                      str(tmp_path / "empty"), "--extra-index", index)
    assert rc == 0, doc
    assert doc["traced"] == [
        f"torch 2.13.0+cpu: installed from file:///opt/wheels/{TORCH_CPU.replace('+', '%2B')}; "
        f"the same file (sha256) is {TORCH_CPU_URL} on {index}"]
    (locked,) = parse_lock(Path(doc["lockfile"])).packages
    assert (locked.url, locked.sha256) == (TORCH_CPU_URL, TORCH_CPU_SHA)
    spec = tomllib.loads((tmp_path / "root" / "environments" / "t.toml").read_text())
    assert spec["pypi"]["requirements"] == [f"torch @ {TORCH_CPU_URL}"]


def test_local_wheel_nobody_serves_relocks_here(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    """A wheel with a local version pip installed from a file (a real venv, real pip): the
    lock names the file and freeze says in one line it is not reproducible elsewhere (exit 1);
    the spec pins that file, so `samebits lock` (real uv) re-locks to the same package."""
    wheels = write_wheels(tmp_path / "wheels", [Wheel(name="tinylocal", version="1.0+cpu")])
    whl = wheels / "tinylocal-1.0+cpu-py3-none-any.whl"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {**os.environ, "PIP_CONFIG_FILE": "/dev/null", "PIP_FIND_LINKS": "",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "-q", "--no-index", "--no-deps", str(whl)], check=True, env=env,
                   capture_output=True)
    (tmp_path / "empty").mkdir()
    root = tmp_path / "root"
    rc, doc = _freeze(capsys, venv, root, "--name", "loc", "--index", str(tmp_path / "empty"))
    assert rc == 1, doc
    url = whl.as_uri().replace("+", "%2B")
    sha = hashlib.sha256(whl.read_bytes()).hexdigest()
    assert doc["local"] == [{"package": "pip:tinylocal==1.0+cpu", "reason": (
        f"the lock names {url}, a file on this machine: not reproducible elsewhere "
        f"({(tmp_path / 'empty').as_uri()} has no file with its sha256)")}]
    spec = tomllib.loads((root / "environments" / "loc.toml").read_text())
    assert spec["pypi"]["requirements"] == [f"tinylocal @ {url}"]
    frozen = _ident(list(parse_lock(root / "lockfiles" / "loc.conda-lock.yml").packages))
    assert frozen == [("tinylocal", "1.0+cpu", url, sha)]
    assert main(["lock", "loc", "--root", str(root), "--cache-dir", str(tmp_path / "c")]) == 0
    capsys.readouterr()
    assert _ident(list(parse_lock(root / "lockfiles" / "loc.conda-lock.yml").packages)) == \
        frozen


@pytest.mark.network
@pytest.mark.slow
def test_frozen_cpu_lock_relocks_to_same_wheels(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    """The cpu lock's environment frozen (generation cpu) and re-locked with real uv against
    PyPI: the same 32 wheels, URLs and hashes as the committed lock."""
    prefix, pkgs, _ = _lock_prefix(ROOT / "lockfiles" / "cpu.conda-lock.yml", tmp_path / "env")
    root = tmp_path / "root"
    rc, doc = _freeze(capsys, prefix, root, "--name", "cpu", "--generation", "cpu")
    assert rc == 0, doc
    assert main(["lock", "cpu", "--root", str(root), "--cache-dir", str(tmp_path / "c")]) == 0
    capsys.readouterr()
    assert _ident(list(parse_lock(root / "lockfiles" / "cpu.conda-lock.yml").packages)) == \
        _ident(pkgs)
