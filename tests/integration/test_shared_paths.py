"""Two wheels writing one path with different bytes (as opencv-python and
opencv-python-headless both write cv2/): ``samebits lock`` records the paths and the winner
pip's order gives, ``samebits install`` places the winner's files and warns, ``verify env``
attributes each file to its winner; and real pip, installing the same wheels, leaves the same
bytes. Offline: small wheels built here (tests/fixtures/fakewheels.py), served by a loopback
index with range requests (tests/fixtures/pypi_index.py), the real uv, pip and CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.lock.model import parse_lock
from samebits.lock.read import load_lock
from tests.fixtures.fakewheels import Wheel, write_wheels
from tests.fixtures.lock import TmpProject
from tests.fixtures.pypi_index import LocalIndex, Serving
from verify.env.drift import file_findings
from verify.env.lockcheck import shared_writers
from verify.env.manifest import build_manifest
from verify.env.overwritten import overwrite_notes

LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
SITE = f"lib/python{LINE}/site-packages"
RP = ("Requires-Python: >=3.8",)
UPLOADED = "2026-01-01T00:00:00Z"


def _pair() -> list[Wheel]:
    """cvlike and cvlike-headless: one cv/ package, two builds; both need base."""
    def one(name: str, kind: str) -> Wheel:
        info = f"{name.replace('-', '_')}-1.0.dist-info"
        return Wheel(name, "1.0", requires=("base>=1",), metadata=RP, files={
            "cv/__init__.py": b"from cv.core import KIND\n",            # the same bytes
            "cv/core.py": f"KIND = {kind!r}\n\ndef main():\n    return 0\n".encode(),
            "cv/data.bin": f"\0{kind}".encode(),
            f"{name.replace('-', '_')}.libs/lib{kind}.so": kind.encode(),  # its own
            f"{info}/entry_points.txt": f"[console_scripts]\ncvtool = cv.core:main{kind}\n"
                                        .encode()})
    return [one("cvlike", "full"), one("cvlike-headless", "headless"),
            Wheel("base", "1.0", metadata=RP)]


SPEC = f"""\
generation = "cpu"
python = "{LINE}"
exclude-newer = "2026-03-01T00:00:00Z"
[platforms.linux-64]
glibc = "2.28"
[pypi]
index = "{{url}}"
requirements = ["cvlike", "cvlike-headless"]
"""
SHARED = ["bin/cvtool", f"{SITE}/cv/core.py", f"{SITE}/cv/data.bin"]


@pytest.fixture
def served(tmp_path: Path) -> tuple[LocalIndex, Path]:
    folder = write_wheels(tmp_path / "wheels", _pair())
    idx = LocalIndex(folder=folder, upload_times={w.name: UPLOADED for w in folder.glob("*")})
    return idx, folder


def _run(project: TmpProject, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, with a longer leash than the fixture's: verify env hashes the venv's
    base interpreter and checks its bytecode (a cold cache here)."""
    return project.samebits(*args, timeout=600)


@pytest.mark.slow
def test_lock_install_verify_and_pip_agree(project: TmpProject, tmp_path: Path,
                                           served: tuple[LocalIndex, Path]) -> None:
    """The lock records the two paths' writers in pip's order (cvlike last: both weigh the
    same, and pip installs the later name first); install places cvlike's files with a
    warning naming both packages and the paths; verify env is identical; pip's own install
    of the same wheels leaves the same bytes; a re-lock reads no wheel again."""
    idx, folder = served
    cache = tmp_path / "cache"
    with Serving(idx) as url:
        project.spec("env", SPEC.format(url=url))
        res = _run(project, "lock", "--cache-dir", str(cache))
        assert res.returncode == 0, res.stderr
        first = project.lockfile("env").read_bytes()
        lock = parse_lock(project.lockfile("env"))
        assert json.loads(lock.custom["samebits.shared.linux-64"]) == {
            "format": 1, "order": "pip 26.3",
            "shared": [{"writers": ["cvlike-headless", "cvlike"], "paths": SHARED}]}
        assert sorted(p.name for p in (cache / "wheelfiles-v1").iterdir()) == sorted(
            f"{p.sha256}.json" for p in lock.packages)
        idx.log.clear()
        res = _run(project, "lock", "--cache-dir", str(cache))
        assert (res.returncode, project.lockfile("env").read_bytes()) == (0, first), res.stderr
        assert idx.requests_for("files") == []  # every file list from the cache

        prefix = tmp_path / "env"
        res = _run(project, "install", "env", "--target", str(prefix), "--cache-dir",
                   str(cache))
        assert res.returncode == 0, res.stdout + res.stderr
    assert ("  warning    3 files written with different bytes by cvlike-headless and cvlike: "
            "cvlike's placed over cvlike-headless's, as pip installs them (the lock records "
            f"it): {', '.join(SHARED)}") in res.stdout
    site = prefix / SITE
    assert (site / "cv/core.py").read_bytes().startswith(b"KIND = 'full'")
    assert (site / "cv/data.bin").read_bytes() == b"\0full"
    assert b"mainfull" in (prefix / "bin/cvtool").read_bytes()
    assert (site / "cvlike_headless.libs/libheadless.so").exists()  # its own files stay
    res = _run(project, "verify", "env", "env", "--prefix", str(prefix), "--json",
               "--no-linkage")
    doc = json.loads(res.stdout)
    assert (res.returncode, doc["identical"], doc["findings"]) == (0, True, [])
    overwritten = [n for n in doc["notes"] if "overwritten" in n]
    assert overwritten and all("cvlike-headless" in n for n in overwritten), doc["notes"]

    # real pip, the lock's pins, the same wheels: the same bytes in cv/
    venv = tmp_path / "pipvenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pins = tmp_path / "requirements.txt"
    pins.write_text("".join(f"{p.name}=={p.version}\n" for p in lock.packages))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"),
                    "install", "--no-index", "--find-links", str(folder), "--no-compile",
                    "--disable-pip-version-check", "-r", str(pins)],
                   check=True, capture_output=True, timeout=300)
    theirs = venv / SITE / "cv"
    assert {p.name: p.read_bytes() for p in theirs.iterdir() if p.is_file()} == \
        {p.name: p.read_bytes() for p in (site / "cv").iterdir() if p.is_file()}
    assert b"mainfull" in (venv / "bin/cvtool").read_bytes()
    # and pip's environment verifies against the lock, the loser's RECORD lines overwritten
    res = _run(project, "verify", "env", "env", "--prefix", str(venv), "--json",
               "--no-linkage")
    doc = json.loads(res.stdout)
    assert (res.returncode, doc["identical"], doc["findings"]) == (0, True, []), res.stderr
    assert [n for n in doc["notes"] if "overwritten" in n] == overwritten


@pytest.mark.slow
def test_verify_attributes_each_file_to_its_winner(project: TmpProject, tmp_path: Path,
                                                   served: tuple[LocalIndex, Path]) -> None:
    """With the lock's record the file must be the winner's: the loser's bytes are drift
    (expected: the winner's hash). Without it, a file two RECORDs claim is accepted when it
    is one of theirs and the other is named overwritten; bytes of neither are drift."""
    idx, _ = served
    cache = tmp_path / "cache"
    prefix = tmp_path / "env"
    with Serving(idx) as url:
        project.spec("env", SPEC.format(url=url))
        assert _run(project, "lock", "--cache-dir", str(cache)).returncode == 0
        res = _run(project, "install", "env", "--target", str(prefix), "--cache-dir",
                   str(cache), "--link-mode", "copy", "--no-bytecode")
        assert res.returncode == 0, res.stdout + res.stderr
    env = load_lock(project.lockfile("env"))
    shared = shared_writers(env.lock, "linux-64", file=env.origin)
    assert shared == {p: ("cvlike-headless", "cvlike") for p in SHARED}

    def check(with_lock: bool) -> tuple[list[tuple[str, str | None, str | None]], list[str]]:
        m = build_manifest(prefix, elf=False)
        found = file_findings(m, shared if with_lock else None)
        return ([(f.kind, f.path, f.package) for f in found],
                overwrite_notes(m, shared if with_lock else None))

    full, headless = "pip:cvlike==1.0", "pip:cvlike-headless==1.0"
    for with_lock in (True, False):
        assert check(with_lock) == ([], [
            f"{headless}: 3 files of its RECORD overwritten by {full} ("
            + ("the lock records that order" if with_lock else
               "pip leaves the later one's") + f"): {', '.join(SHARED)}"])

    data = prefix / SITE / "cv/data.bin"
    data.chmod(0o644)
    data.write_bytes(b"\0headless")  # the loser's bytes: as if pip had installed them last
    found, notes = check(True)
    assert found == [("modified", f"{SITE}/cv/data.bin", full)]
    assert notes == [f"{headless}: 2 files of its RECORD overwritten by {full} (the lock "
                     f"records that order): bin/cvtool, {SITE}/cv/core.py"]
    found, notes = check(False)
    assert found == []
    assert f"{full}: 1 file of its RECORD overwritten by {headless} (pip leaves the later " \
           f"one's): {SITE}/cv/data.bin" in notes

    data.write_bytes(b"\0neither")  # no writer's bytes: drift with or without the lock
    for with_lock in (True, False):
        found, _ = check(with_lock)
        assert [f[:2] for f in found] == [("modified", f"{SITE}/cv/data.bin")]


def test_an_unrecorded_pair_follows_pips_order(tmp_path: Path,
                                               served: tuple[LocalIndex, Path]) -> None:
    """A lock without the record (one written before it, or by another tool): the install
    computes pip's order from the wheels' metadata, places the same winner and says that
    the lock records none."""
    from samebits.install import install_prefix
    from tests.fixtures.install import locked_wheel, write_lock

    _, folder = served
    env = write_lock(tmp_path / "old.conda-lock.yml",
                     [locked_wheel(w) for w in sorted(folder.glob("*.whl"))], python=LINE)
    prefix = tmp_path / "env"
    report = install_prefix(env, "linux-64", prefix, final=str(prefix),
                            cache=tmp_path / "cache", interpreter=sys.executable)
    assert [(o.path, o.writers, o.recorded) for o in report.overwritten] == [
        (p, ("cvlike-headless", "cvlike"), False) for p in SHARED]
    assert (prefix / SITE / "cv/data.bin").read_bytes() == b"\0full"
    (line,) = [x for x in report.lines() if x.startswith("  warning")]
    assert line.endswith("(pip's order computed here: the lock records none; re-lock to "
                         f"record it): {', '.join(SHARED)}")
    assert report.to_json()["overwritten"][0] == {
        "path": "bin/cvtool", "writers": ["cvlike-headless", "cvlike"], "winner": "cvlike",
        "recorded": False}


def test_a_record_that_does_not_match_the_wheels_is_refused(
        tmp_path: Path, served: tuple[LocalIndex, Path]) -> None:
    """A recorded path the wheels do not write as recorded: an error naming the key and the
    path, before anything is placed."""
    from samebits.errors import LockfileError
    from samebits.install import install_prefix
    from samebits.lock.model import Lock, render_lock
    from tests.fixtures.install import locked_wheel

    _, folder = served
    packages = tuple(locked_wheel(w) for w in sorted(folder.glob("*.whl")))
    record = json.dumps({"format": 1, "order": "pip 26.3", "shared": [
        {"writers": ["base", "cvlike"], "paths": [f"{SITE}/cv/core.py"]}]})
    path = tmp_path / "edited.conda-lock.yml"
    path.write_text(render_lock(Lock(
        platforms=("linux-64",), channels=(), sources=("test",),
        content_hash={"linux-64": "0" * 64}, packages=packages,
        custom={"samebits.python": LINE, "samebits.shared.linux-64": record})))
    prefix = tmp_path / "env"
    with pytest.raises(LockfileError) as err:
        install_prefix(load_lock(path), "linux-64", prefix, final=str(prefix),
                       cache=tmp_path / "cache", interpreter=sys.executable)
    assert err.value.message == (
        f"{path.name}: metadata.custom_metadata.samebits.shared.linux-64 = "
        f"\"{SITE}/cv/core.py\": the lock records it written by base, cvlike; its wheels "
        "write it here by cvlike, cvlike-headless")
    assert not prefix.exists() or not any(prefix.iterdir())  # nothing placed
