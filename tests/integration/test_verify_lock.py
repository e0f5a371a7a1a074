"""verify env against a lockfile: missing, extra, other version, other build, other archive."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from samebits.lock.model import LockedPackage, parse_lock
from tests.fixtures.verify import (  # noqa: F401  (fixtures)
    PLATFORM,
    Installed,
    elves,
    fresh_env,
    install_env,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)
from verify.env.lockcheck import lock_check, lock_findings
from verify.env.manifest import build_manifest
from verify.env.records import Package


def conda(name: str, version: str = "1.0", build: str = "h0_0", md5: str | None = "aa",
          sha256: str | None = "bb") -> tuple[Package, LockedPackage]:
    return (Package(manager="conda", name=name, version=version, build=build, md5=md5,
                    sha256=sha256, record=f"conda-meta/{name}-{version}-{build}.json"),
            LockedPackage(name=name, version=version, manager="conda", platform=PLATFORM,
                          url=f"file:///c/{name}-{version}-{build}.conda", md5=md5,
                          sha256=sha256, build=build))


def pip(name: str, version: str = "1.0", tags: tuple[str, ...] = ("py3-none-any",),
        sha256: str | None = None) -> Package:
    return Package(manager="pip", name=name, version=version, tags=tags, sha256=sha256,
                   record=f"lib/python3.11/site-packages/{name}-{version}.dist-info/RECORD")


def locked_pip(name: str, version: str = "1.0", filename: str | None = None,
               sha256: str = "cc") -> LockedPackage:
    return LockedPackage(name=name, version=version, manager="pip", platform=PLATFORM,
                         url=f"https://files/{filename or f'{name}-{version}-py3-none-any.whl'}",
                         sha256=sha256)


A, LA = conda("a")
TABLE = [
    ("identical", [A], [LA], []),
    ("missing", [], [LA], [("package-missing", "a", "1.0 h0_0", None)]),
    ("extra", [A], [], [("package-extra", "a", None, "1.0 h0_0")]),
    ("other version", [conda("a", version="1.1")[0]], [LA],
     [("package-version", "a", "1.0", "1.1")]),
    ("other build and archive", [conda("a", build="h1_1", md5="ax", sha256="bx")[0]], [LA],
     [("package-build", "a", "h0_0", "h1_1"), ("package-hash", "a", "md5 aa", "md5 ax"),
      ("package-hash", "a", "sha256 bb", "sha256 bx")]),
    ("conda hash unknown on one side is not a difference", [conda("a", md5=None)[0]], [LA],
     []),
    ("pip names compare canonically, versions as PEP 440", [pip("Typing_Extensions", "4.0")],
     [locked_pip("typing-extensions", "4.0.0")], []),
    ("pip other version", [pip("sbtest", "1.1")], [locked_pip("sbtest")],
     [("package-version", "sbtest", "1.0", "1.1")]),
    ("pip other wheel tags", [pip("t", tags=("cp311-cp311-manylinux_2_28_x86_64",))],
     [locked_pip("t", filename="t-1.0-cp311-cp311-manylinux_2_28_aarch64.whl")],
     [("package-build", "t", "cp311-cp311-manylinux_2_28_aarch64",
       "cp311-cp311-manylinux_2_28_x86_64")]),
    ("pip tags compared only where no archive hash proves the wheel: same arch, renamed "
     "platform is a note", [pip("t", tags=("cp310-cp310-linux_x86_64",))],
     [locked_pip("t", filename="t-1.0-cp310-cp310-manylinux1_x86_64.whl")], []),
    ("pip file name and WHEEL disagree, archive hash is the lock's: a note",
     [pip("torch", tags=("cp310-cp310-linux_x86_64",), sha256="cc")],
     [locked_pip("torch", filename="torch-1.0-cp310-cp310-manylinux1_x86_64.whl")], []),
    ("pip archive hash is the lock's: the file name's tags are not the wheel's record",
     [pip("t", tags=("cp311-cp311-manylinux_2_28_x86_64",), sha256="cc")],
     [locked_pip("t", filename="t-1.0-cp311-cp311-manylinux_2_28_aarch64.whl")], []),
    # maturin's WHEEL writes one compressed tag set (hf-xet, pydantic_core); pip keeps it: the
    # set it means is the file name's two tags (a false package-build before)
    ("pip WHEEL's compressed tag set is the file name's tags",
     [pip("hf-xet", tags=("cp37-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64",))],
     [locked_pip("hf-xet", filename="hf_xet-1.0-cp37-abi3-manylinux_2_17_x86_64."
                 "manylinux2014_x86_64.whl")], []),
    ("pip WHEEL's compressed tag set of another platform is still drift",
     [pip("t", tags=("cp37-abi3-manylinux_2_17_aarch64.manylinux2014_aarch64",))],
     [locked_pip("t", filename="t-1.0-cp37-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64."
                 "whl")],
     [("package-build", "t", "cp37-abi3-manylinux2014_x86_64 cp37-abi3-manylinux_2_17_x86_64",
       "cp37-abi3-manylinux2014_aarch64 cp37-abi3-manylinux_2_17_aarch64")]),
    # pip from a bundle's offline folder: direct_url.json names the local file, with the
    # lock's sha256: the same archive, a note (package-url before)
    ("pip another URL, the lock's archive sha256",
     [Package(manager="pip", name="t", version="1.0", tags=("py3-none-any",), sha256="cc",
              url="file:///bundle/archives/cc/t-1.0-py3-none-any.whl",
              record="lib/python3.11/site-packages/t-1.0.dist-info/RECORD")],
     [locked_pip("t")], []),
    ("pip another URL and another archive", [Package(
        manager="pip", name="t", version="1.0", tags=("py3-none-any",), sha256="dd",
        url="file:///elsewhere/t-1.0-py3-none-any.whl",
        record="lib/python3.11/site-packages/t-1.0.dist-info/RECORD")], [locked_pip("t")],
     [("package-hash", "t", "sha256 cc", "sha256 dd"),
      ("package-url", "t", "https://files/t-1.0-py3-none-any.whl",
       "file:///elsewhere/t-1.0-py3-none-any.whl")]),
    ("pip archive hash recorded by pip differs", [pip("t", sha256="dd")], [locked_pip("t")],
     [("package-hash", "t", "sha256 cc", "sha256 dd")]),
    ("pip archive hash not recorded is not a difference", [pip("t")], [locked_pip("t")], []),
    ("conda and pip of one name are two packages", [pip("a")], [LA],
     [("package-missing", "a", "1.0 h0_0", None), ("package-extra", "a", None, "1.0")]),
]


@pytest.mark.parametrize(("name", "installed", "locked", "expected"), TABLE,
                         ids=[t[0] for t in TABLE])
def test_lock_findings_table(name: str, installed: list[Package], locked: list[LockedPackage],
                             expected: list[tuple]) -> None:
    """Each difference between installed and locked packages is one finding."""
    got = [(f.kind, f.package, f.expected, f.actual)
           for f in lock_findings(installed, locked)]
    assert sorted(got, key=str) == sorted(expected, key=str)


ARCHIVE_TAGS = [
    ("the locked archive's WHEEL differs from the installed one: drift",
     frozenset({"cp310-cp310-manylinux1_x86_64"}),
     [("package-build", "t", "cp310-cp310-manylinux1_x86_64", "cp310-cp310-linux_x86_64")], 0),
    ("the locked archive's WHEEL is the installed one whatever its file name says: a note",
     frozenset({"cp310-cp310-linux_x86_64"}), [], 1),
]


def test_archive_wheel_with_a_compressed_tag_set() -> None:
    """The locked archive's WHEEL read from the cache is expanded (read_wheel_tags); the
    installed one, the same bytes, must be too: no finding, no note."""
    from verify.env.lockcheck import read_wheel_tags

    text = "Wheel-Version: 1.0\nTag: cp37-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64\n"
    checked = lock_check(
        [pip("hf-xet", tags=("cp37-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64",))],
        [locked_pip("hf-xet", filename="hf_xet-1.0-cp37-abi3-manylinux_2_17_x86_64."
                    "manylinux2014_x86_64.whl")],
        archive_tags=lambda lp: read_wheel_tags(text))
    assert (checked.findings, checked.notes) == ([], [])


@pytest.mark.parametrize(("name", "own", "expected", "notes"), ARCHIVE_TAGS,
                         ids=[t[0] for t in ARCHIVE_TAGS])
def test_archive_wheel_decides_tags(name: str, own: frozenset[str], expected: list[tuple],
                                    notes: int) -> None:
    """With no recorded hash, the locked archive's own WHEEL (from the cache) is the judge."""
    checked = lock_check([pip("t", tags=("cp310-cp310-linux_x86_64",))],
                         [locked_pip("t", filename="t-1.0-cp310-cp310-manylinux1_x86_64.whl")],
                         archive_tags=lambda lp: own)
    assert [(f.kind, f.package, f.expected, f.actual) for f in checked.findings] == expected
    assert len(checked.notes) == notes


def test_misnamed_wheel_installs_and_verifies(tmp_path: Path) -> None:
    """A wheel named ...-manylinux1_x86_64.whl whose WHEEL says linux_x86_64 (PyPI's torch 2.0.0
    and 2.2.2): a fresh `samebits install` of its lock is identical, exit 0, the disagreement
    a note; `verify env` says the same."""
    from tests.fixtures.install import locked_wheel, wheel, write_lock
    from tests.fixtures.render import run_cli

    line = f"{sys.version_info[0]}.{sys.version_info[1]}"
    tag = f"cp{line.replace('.', '')}-cp{line.replace('.', '')}"
    built = wheel(tmp_path / "wheels", "oldtorch", "2.0.0", {"oldtorch/__init__.py": b"x = 1\n"},
                  tag=f"{tag}-linux_x86_64", purelib=False)
    misnamed = built.with_name(f"oldtorch-2.0.0-{tag}-manylinux1_x86_64.whl")
    built.rename(misnamed)
    env = write_lock(tmp_path / "lockfiles" / "o.conda-lock.yml", [locked_wheel(misnamed)],
                     python=line)
    prefix = tmp_path / "env"
    proc = run_cli("install", str(env.path), "--target", str(prefix), "--platform", "linux-64",
                   "--python", sys.executable, "--cache-dir", str(tmp_path / "cache"),
                   "--find-links", str(tmp_path / "wheels"), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["verify"]
    assert report["findings"] == []
    assert any("oldtorch: the lock's file name says" in n for n in report["notes"])
    again = run_cli("verify", "env", "--prefix", str(prefix), str(env.path),
                    "--platform", "linux-64", "--cache-dir", str(tmp_path / "cache"), "--json",
                    cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-2000:]


def findings_against_lock(prefix: Path, lockfile: Path) -> set[tuple[str, str | None]]:
    m = build_manifest(prefix, jobs=1)
    locked = parse_lock(lockfile).packages_for(PLATFORM)
    return {(f.kind, f.package, f.expected, f.actual)
            for f in lock_findings(m.records.packages, locked)}


def test_pristine_matches_its_lock(pristine: Installed) -> None:
    """A prefix installed from the lock's records matches it, conda and pip parts both."""
    assert findings_against_lock(pristine.prefix, pristine.lockfile) == set()


def test_package_swapped_for_another_build(pristine: Installed, vchannel: Path, wheel: Path,
                                           rattler_cache: Path, tmp_path: Path) -> None:
    """vfa h1_1 installed where the lock says h0_0: build and both archive hashes differ."""
    other = install_env(vchannel, wheel, tmp_path / "env", rattler_cache,
                        specs=("python 3.11.*", "vfa ==1.0 h1_1", "typing-extensions"))
    want = {r.name.normalized: r for r in pristine.records}["vfa"]
    have = {r.name.normalized: r for r in other.records}["vfa"]
    assert findings_against_lock(other.prefix, pristine.lockfile) == {
        ("package-build", "vfa", "h0_0", "h1_1"),
        ("package-hash", "vfa", f"md5 {want.md5.hex()}", f"md5 {have.md5.hex()}"),
        ("package-hash", "vfa", f"sha256 {want.sha256.hex()}", f"sha256 {have.sha256.hex()}"),
    }


@pytest.mark.parametrize("algo", ["md5", "sha256"])
def test_conda_meta_archive_hash_edited(fresh_env: Installed, algo: str) -> None:
    """conda-meta's archive md5/sha256 edited: the lock comparison names the package."""
    meta = fresh_env.prefix / "conda-meta/vfa-1.0-h0_0.json"
    doc = json.loads(meta.read_text())
    old, doc[algo] = doc[algo], "f" * len(doc[algo])
    meta.write_text(json.dumps(doc))
    assert findings_against_lock(fresh_env.prefix, fresh_env.lockfile) == {
        ("package-hash", "vfa", f"{algo} {old}", f"{algo} {'f' * len(old)}")}


def test_package_removed_from_conda_meta(fresh_env: Installed) -> None:
    """A conda record deleted: the lock says the package is missing."""
    (fresh_env.prefix / "conda-meta/typing-extensions-4.12.2-pyh0_0.json").unlink()
    (got,) = findings_against_lock(fresh_env.prefix, fresh_env.lockfile)
    assert got[:2] == ("package-missing", "typing-extensions")
