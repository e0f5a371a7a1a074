"""A Containerfile and a bundle's offline requirements install the PyPI part with ``pip
--no-deps``, where pip's order falls back to the names: for a path two wheels write with
different bytes (sktime over scikit-base's ``docs/``), the lock records the last writer pip
would leave with dependencies, and the rendered Containerfile and the bundle install the
writers in stages so that every path ends with those bytes. The stages' pip commands are run
here, for real, into a venv that ``verify env`` then checks against the lock (no container
daemon is needed for that part)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from samebits.lock.model import Lock, render_lock
from samebits.lock.read import load_lock
from samebits.lock.shared import SharedGroup, SharedPaths
from samebits.render.containerfile import containerfile_files, pip_stages, stage_file
from tests.fixtures.fakewheels import Wheel, wheel_bytes_to
from tests.fixtures.install import locked_wheel

ROOT = Path(__file__).resolve().parents[2]
LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
SHARED = "shared/conf.py"


def lock_with_shared(tmp_path: Path) -> Path:
    """zeta-main needs alpha-base, both write shared/conf.py: pip with dependencies installs
    alpha-base first, so zeta-main's file stays; by name alone (--no-deps: reverse name order)
    alpha-base's would."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    base = wheel_bytes_to(folder, Wheel("alpha-base", "1.0", files={
        SHARED: b"WHO = 'base'\n", "alpha_base/__init__.py": b""}))
    main = wheel_bytes_to(folder, Wheel("zeta-main", "1.0", requires=("alpha-base",), files={
        SHARED: b"WHO = 'main'\n", "zeta_main/__init__.py": b""}))
    record = SharedPaths(platform="linux-64", groups=(SharedGroup(
        writers=("alpha-base", "zeta-main"), paths=(f"lib/python{LINE}/site-packages/{SHARED}",)
    ),))
    custom = {"samebits.lock-format": "1", "samebits.environment": "shared",
              "samebits.python": LINE, record.key: record.to_text()}
    lock = Lock(platforms=("linux-64",), channels=(), sources=("test",),
                content_hash={"linux-64": "0" * 64}, custom=custom,
                packages=(locked_wheel(base), locked_wheel(main)))
    path = tmp_path / "shared.conda-lock.yml"
    path.write_text(render_lock(lock))
    return path


def pip_into(venv: Path, files: list[Path]) -> None:
    for f in files:
        subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"),
                        "install", "-q", "--no-deps", "--require-hashes", "--no-compile",
                        "--only-binary=:all:", "--disable-pip-version-check", "-r", str(f)],
                       check=True, capture_output=True, timeout=300)


def verify(venv: Path, lock: Path) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "verify", "env", "--prefix", str(venv),
                           str(lock), "--platform", "linux-64", "--json", "--no-linkage",
                           "--no-bytecode"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    return proc.returncode, json.loads(proc.stdout)


def test_the_containerfile_installs_the_writers_in_stages(tmp_path: Path) -> None:
    lock = lock_with_shared(tmp_path)
    env = load_lock(lock, name="shared", root=tmp_path)
    assert [[p.name for p in s] for s in pip_stages(env, "linux-64")] == [
        ["alpha-base"], ["zeta-main"]]
    files = containerfile_files(env)
    assert sorted(files) == ["Containerfile", "linux-64.requirements-2.txt",
                             "linux-64.requirements.txt"]
    text = files["Containerfile"]
    assert "linux-64.requirements-2.txt" in text
    assert 'for f in /opt/samebits/$platform.requirements-2.txt; do if [ -e "$f" ]' in text
    out = tmp_path / "containers"
    out.mkdir()
    for name, body in files.items():
        (out / name).write_text(body)
    # the Containerfile's order: each stage after the one before
    staged = tmp_path / "staged"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(staged)], check=True)
    pip_into(staged, [out / stage_file("linux-64", k) for k in range(2)])
    assert (staged / f"lib/python{LINE}/site-packages/{SHARED}").read_bytes() == \
        b"WHO = 'main'\n"
    code, doc = verify(staged, lock)
    assert (code, doc["identical"], doc["findings"]) == (0, True, [])
    # one pip --no-deps of every wheel (the Containerfile before): the other file stays, and
    # verify env says so against the lock's record
    flat = tmp_path / "all.txt"
    flat.write_text("".join((out / stage_file("linux-64", k)).read_text() for k in range(2)))
    once = tmp_path / "once"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(once)], check=True)
    pip_into(once, [flat])
    assert (once / f"lib/python{LINE}/site-packages/{SHARED}").read_bytes() == \
        b"WHO = 'base'\n"
    code, doc = verify(once, lock)
    assert code == 1
    assert [(f["kind"], f["path"]) for f in doc["findings"]] == [
        ("modified", f"lib/python{LINE}/site-packages/{SHARED}")]


def test_a_lock_without_shared_paths_renders_one_file(tmp_path: Path) -> None:
    """No record: one requirements file per platform, as before (the committed containers/
    keep their bytes)."""
    lock = lock_with_shared(tmp_path)
    text = lock.read_text()
    lock.write_text("\n".join(ln for ln in text.splitlines()
                              if "samebits.shared." not in ln) + "\n")
    env = load_lock(lock, name="shared", root=tmp_path)
    assert sorted(containerfile_files(env)) == ["Containerfile", "linux-64.requirements.txt"]
    assert "requirements-2" not in containerfile_files(env)["Containerfile"]


def test_the_bundles_offline_requirements_come_in_stages(tmp_path: Path) -> None:
    """samebits bundle of the same lock: offline/linux-64.requirements.txt and -2.txt, the
    README's pip commands in that order; run as written from the extracted bundle, the venv is
    identical to the lock."""
    import os
    import tarfile

    lock = lock_with_shared(tmp_path)
    run = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    proc = subprocess.run([sys.executable, "-m", "samebits", "bundle", str(lock), "--platform",
                           "linux-64", "--out", str(tmp_path / "b.tar")], capture_output=True,
                          text=True, cwd=ROOT, env=run, timeout=600)
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(tmp_path / "b.tar") as tf:
        tf.extractall(tmp_path / "x", filter="data")
    (root,) = (tmp_path / "x").iterdir()
    readme = (root / "README.txt").read_text()
    assert "-r offline/linux-64.requirements.txt &&" in readme
    assert "-r offline/linux-64.requirements-2.txt" in readme
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    for f in ("offline/linux-64.requirements.txt", "offline/linux-64.requirements-2.txt"):
        subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"),
                        "install", "-q", "--no-index", "--no-deps", "--require-hashes",
                        "--no-compile", "--disable-pip-version-check", "-r", f],
                       check=True, capture_output=True, timeout=300, cwd=root)
    code, doc = verify(venv, lock)
    assert (code, doc["identical"], doc["findings"]) == (0, True, []), doc["findings"]
