"""Wheels: laid out as pypa/installer lays them out, plus PEP 610 provenance."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.install import install_prefix
from tests.fixtures.install import locked_wheel, wheel, write_lock

ROOT = Path(__file__).resolve().parents[2]
LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"


def rich_wheel(folder: Path) -> Path:
    """Every scheme a wheel can use, a console and a GUI script, an executable member."""
    data = "richpkg-1.0.data"
    return wheel(folder, "richpkg", "1.0", {
        "richpkg/__init__.py": b"def main():\n    return 0\n",
        "richpkg/sub/mod.py": b"X = 1\n",
        "richpkg/tool.sh": b"#!/bin/sh\necho tool\n",
        f"{data}/scripts/richpkg-legacy": b"#!python\nimport richpkg\n",
        f"{data}/data/share/richpkg/readme.txt": b"data\n",
        f"{data}/headers/richpkg.h": b"int x;\n",
        f"{data}/purelib/extra_mod.py": b"Y = 2\n",
        "richpkg-1.0.dist-info/entry_points.txt":
            b"[console_scripts]\nrichpkg = richpkg:main\n[gui_scripts]\nrichgui = richpkg:main\n",
    }, executables=("richpkg/tool.sh",))


def _installer(whl: Path, stage: Path, final: str) -> None:
    """pypa/installer itself, as samebits used it before the cache, given pip's scheme for a
    venv (``pip._internal.locations``: headers in ``include/site/pythonX.Y/<name>``)."""
    from installer import install
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    site = stage / "lib" / f"python{LINE}" / "site-packages"
    scheme = {"purelib": str(site), "platlib": str(site), "scripts": str(stage / "bin"),
              "headers": str(stage / "include" / "site" / f"python{LINE}" / "richpkg"),
              "data": str(stage)}
    dest = SchemeDictionaryDestination(scheme, interpreter=f"{final}/bin/python",
                                       script_kind="posix")
    with WheelFile.open(whl) as source:
        install(source, dest, additional_metadata={"INSTALLER": b"samebits\n"})


def _tree(root: Path) -> dict[str, tuple]:
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = Path(d) / n
            st = p.lstat()
            out[p.relative_to(root).as_posix()] = (p.read_bytes(),
                                                   bool(st.st_mode & stat.S_IXUSR))
    return out


def test_same_layout_as_pypa_installer(tmp_path: Path) -> None:
    """Every file, its bytes and executable bit, and every RECORD row equal what
    pypa/installer writes; samebits adds direct_url.json (and its RECORD row) only."""
    whl = rich_wheel(tmp_path / "wheels")
    env = write_lock(tmp_path / "t.conda-lock.yml", [locked_wheel(whl)], python=LINE)
    final = str(tmp_path / "final")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    install_prefix(env, "linux-64", ours, final=final, cache=tmp_path / "cache",
                   interpreter=sys.executable)
    _installer(whl, theirs, final)
    info = f"lib/python{LINE}/site-packages/richpkg-1.0.dist-info"
    mine, ref = _tree(ours), _tree(theirs)
    record = mine.pop(f"{info}/RECORD")[0].decode().splitlines()
    mine.pop(f"{info}/direct_url.json")
    for venv_file in ("pyvenv.cfg", "bin/python", "bin/python3", f"bin/python{LINE}"):
        mine.pop(venv_file)  # the venv samebits makes for a lock without a conda python
    assert mine == {k: v for k, v in ref.items() if not k.endswith("/RECORD")}
    ref_record = ref[f"{info}/RECORD"][0].decode().splitlines()
    assert [r for r in record if not r.startswith("richpkg-1.0.dist-info/direct_url.json,")] \
        == ref_record
    assert mine["bin/richpkg"][1] and mine["bin/richgui"][1]
    assert mine["bin/richpkg-legacy"][0] == f"#!{final}/bin/python\nimport richpkg\n".encode()


def test_direct_url_names_the_lock(tmp_path: Path) -> None:
    """Each wheel's dist-info has PEP 610 direct_url.json with the lock's URL and sha256, in
    RECORD with its hash, exactly as pip writes it."""
    whl = rich_wheel(tmp_path / "wheels")
    p = locked_wheel(whl)
    env = write_lock(tmp_path / "t.conda-lock.yml", [p], python=LINE)
    prefix = tmp_path / "env"
    install_prefix(env, "linux-64", prefix, final=str(prefix), cache=tmp_path / "cache",
                   interpreter=sys.executable)
    info = prefix / "lib" / f"python{LINE}" / "site-packages" / "richpkg-1.0.dist-info"
    raw = (info / "direct_url.json").read_bytes()
    assert json.loads(raw) == {"url": p.url, "archive_info": {
        "hash": f"sha256={p.sha256}", "hashes": {"sha256": p.sha256}}}
    assert raw == json.dumps(json.loads(raw), sort_keys=True).encode()  # pip's bytes
    rows = (info / "RECORD").read_text().splitlines()
    assert any(r.startswith("richpkg-1.0.dist-info/direct_url.json,sha256=") for r in rows)


@pytest.mark.slow
def test_lockfile_tells_a_swapped_wheel(tmp_path: Path) -> None:
    """verify env --lockfile reads direct_url.json: a lock naming another archive of the same
    name and version is a package-hash finding (exit 1); the right lock is identical."""
    whl = rich_wheel(tmp_path / "wheels")
    p = locked_wheel(whl)
    env = write_lock(tmp_path / "t.conda-lock.yml", [p], python=LINE)
    prefix = tmp_path / "env"
    install_prefix(env, "linux-64", prefix, final=str(prefix), cache=tmp_path / "cache",
                   interpreter=sys.executable)
    other = write_lock(tmp_path / "other.conda-lock.yml",
                       [dataclasses.replace(p, sha256="ab" * 32)], python=LINE)

    def verify(lock: Path) -> tuple[int, dict]:
        proc = subprocess.run([sys.executable, "-m", "verify", "env", "--prefix", str(prefix),
                               str(lock), "--platform", "linux-64", "--json",
                               "--no-linkage"], capture_output=True, text=True, cwd=ROOT)
        return proc.returncode, json.loads(proc.stdout)

    rc, doc = verify(env.path)
    assert (rc, doc["identical"]) == (0, True), doc["findings"]
    rc, doc = verify(other.path)
    assert rc == 1
    assert [(f["kind"], f["package"]) for f in doc["findings"]] == [("package-hash", "richpkg")]


@pytest.mark.parametrize(("second", "requires", "placed", "writers", "pycs"), [
    (b"", (), b"", None, 2),
    (b"# mine\n", (), b"", ("nvidia-two", "nvidia-one"), 1),
    (b"# mine\n", ("nvidia-one",), b"# mine\n", ("nvidia-one", "nvidia-two"), 1),
], ids=["the same bytes (CUDA 12 nvidia-* wheels)", "different bytes",
        "different bytes, the second needs the first (sktime and scikit-base's docs/)"])
def test_a_file_two_wheels_write(tmp_path: Path, second: bytes, requires: tuple[str, ...],
                                 placed: bytes, writers: tuple[str, ...] | None,
                                 pycs: int) -> None:
    """Two wheels shipping one path: placed once when the bytes are the same (as pip leaves
    it), and verify env says identical; different bytes, in a lock that does not record the
    path: the file of the one pip installs last is placed (pip's order from the wheels'
    METADATA: equal weights, the later name first; a wheel that requires the other, after
    it), the loser's source is not compiled, and verify env says identical."""
    from tests.fixtures.fakewheels import Wheel, wheel_bytes_to

    folder = tmp_path / "wheels"
    folder.mkdir()
    one = wheel_bytes_to(folder, Wheel("nvidia-one", "1.0", files={
        "nvidia/__init__.py": b"", "nvidia/one/lib.txt": b"1\n"}))
    two = wheel_bytes_to(folder, Wheel("nvidia-two", "1.0", requires=requires, files={
        "nvidia/__init__.py": second, "nvidia/two/lib.txt": b"2\n"}))
    env = write_lock(tmp_path / "t.conda-lock.yml", [locked_wheel(one), locked_wheel(two)],
                     python=LINE)
    prefix = tmp_path / "env"
    for _ in range(2):  # compiled, then every pyc from the cache
        shutil.rmtree(prefix, ignore_errors=True)
        report = install_prefix(env, "linux-64", prefix, final=str(prefix),
                                cache=tmp_path / "cache", interpreter=sys.executable,
                                bytecode=True)
        proc = subprocess.run([sys.executable, "-m", "verify", "env", "--prefix", str(prefix),
                               str(env.path), "--platform", "linux-64", "--json",
                               "--no-linkage"], capture_output=True, text=True, cwd=ROOT)
        doc = json.loads(proc.stdout)
        assert (proc.returncode, doc["identical"]) == (0, True), doc["findings"]
    assert report.bytecode is not None
    assert (report.bytecode.compiled, report.bytecode.reused) == (0, pycs)
    assert (prefix / f"lib/python{LINE}/site-packages/nvidia/__init__.py").read_bytes() == placed
    assert [o.writers for o in report.overwritten] == ([writers] if writers else [])
