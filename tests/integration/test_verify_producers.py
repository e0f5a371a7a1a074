"""Fresh environments from every real producer verify identical; each forgery is caught.

Producers (tests/fixtures/producers.py): ``python -m venv`` + pip, ``virtualenv`` + pip, ``uv
venv`` +
``uv pip install``, and a conda prefix installed by py-rattler from packages rattler-build
built. Each test runs the real ``python -m verify env --json`` with no ``--against``.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import hashlib
import json
import marshal
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from samebits.lock.model import Lock, LockedPackage, render_lock
from tests.fixtures.fakewheels import Wheel, wheel_bytes_to
from tests.fixtures.producers import (  # noqa: F401  (fixtures)
    LINE,
    SP,
    base_python,
    conda_produced,
    copy_interpreter,
    produced,
    producer_wheel,
    rb_channel,
    run,
)
from tests.fixtures.verify import _once  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
SBTEST = "pip:sbtest==1.0"
TAG = sys.implementation.cache_tag


@pytest.fixture(scope="session")
def vcache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One samebits cache for the session's verify runs (bytecode verdicts)."""
    return _once(tmp_path_factory, "verify-cache", lambda: tmp_path_factory.mktemp("vcache"))


def verify(prefix: Path, cache: Path, *extra: str) -> tuple[int, dict]:
    res = subprocess.run(
        [sys.executable, "-m", "verify", "env", "--prefix", str(prefix), "--json",
         "--cache-dir", str(cache), *extra],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode in (0, 1), res.stderr
    assert "Traceback" not in res.stderr
    return res.returncode, json.loads(res.stdout)


def kinds(doc: dict) -> set[tuple[str, str | None, str | None]]:
    return {(f["kind"], f.get("path"), f.get("package")) for f in doc["findings"]}


def copy_prefix(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)  # copy2: times kept, pyc headers stay valid
    return dest


# ----------------------------------------------------------------------- fresh: identical

@pytest.mark.parametrize("producer", ["venv", "virtualenv", "uv"])
def test_fresh_venv_from_each_producer_is_identical(produced: dict[str, Path], vcache: Path,
                                                    producer: str) -> None:
    """python -m venv + pip, virtualenv + pip, uv venv + uv pip: exit 0, identical, every
    pyc checked by the interpreter itself, the interpreter identified."""
    code, doc = verify(produced[producer], vcache)
    assert (code, doc["identical"], doc["findings"]) == (0, True, [])
    assert doc["interpreter"]["runs_here"] is True
    assert doc["interpreter"]["cache_tag"] == TAG
    assert doc["bytecode"]["unchecked"] == 0
    made_by = {e["path"] for e in doc["manifest"] if e["category"] == "scaffold"}
    assert "pyvenv.cfg" in made_by


@pytest.mark.parametrize("producer", ["uv", "virtualenv"])
def test_a_venv_of_python_3_9_is_identical(producer_wheel: Path, vcache: Path, tmp_path: Path,
                                           producer: str) -> None:
    """uv venv and virtualenv write _virtualenv.py and .pth for a Python before 3.10 (a 2022
    paper's 3.9): their scaffolding, identical (uv's two files were unowned DRIFT before)."""
    from tests.fixtures.producers import make_uv, make_virtualenv
    from tests.fixtures.pythons import pyenv_python, skip_reason

    base = pyenv_python("3.9")
    if base is None:
        pytest.skip(skip_reason("3.9"))
    make = make_uv if producer == "uv" else make_virtualenv
    env = make(base, tmp_path / producer, producer_wheel)
    assert (env / "lib/python3.9/site-packages/_virtualenv.pth").exists()
    code, doc = verify(env, vcache)
    assert (code, doc["identical"], doc["findings"]) == (0, True, [])
    made_by = {e["path"] for e in doc["manifest"] if e["category"] == "scaffold"}
    assert {"lib/python3.9/site-packages/_virtualenv.py",
            "lib/python3.9/site-packages/_virtualenv.pth"} <= made_by


def test_fresh_conda_prefix_from_rattler_build_is_identical(conda_produced: Path,
                                                             vcache: Path) -> None:
    """rattler-build packages (softlink, text and binary prefix placeholders, noarch python
    with an entry point) installed by py-rattler: identical, every file owned."""
    code, doc = verify(conda_produced, vcache)
    assert (code, doc["identical"], doc["findings"]) == (0, True, [])
    cats = {e["path"]: (e["category"], e["owner"]) for e in doc["manifest"]}
    assert cats["bin/demopy"][0] == "package"  # the entry point rattler wrote
    assert cats["lib/libdemo.so"] == ("package", "conda:demo-1.0-hb0f4dca_0")
    assert doc["interpreter"]["path"] == str(conda_produced / f"bin/python{LINE}")


def test_conda_softlinks_verify_without_the_package_cache(conda_produced: Path, vcache: Path,
                                                          tmp_path: Path) -> None:
    """With the package cache gone (micromamba clean --all), the softlink's record is judged
    by either convention; a retargeted link is still caught."""
    env = copy_prefix(conda_produced, tmp_path / "env")
    for meta in (env / "conda-meta").glob("*.json"):
        doc = json.loads(meta.read_text())
        doc["extracted_package_dir"] = str(tmp_path / "gone")
        for entry in doc["paths_data"]["paths"]:  # conda's convention: no link-text hash
            if entry["path_type"] == "softlink":
                entry.pop("sha256_in_prefix", None)
        meta.write_text(json.dumps(doc))
    code, doc = verify(env, vcache, "--no-linkage")
    assert (code, doc["findings"]) == (0, [])
    (env / "lib/libdemo.so").unlink()
    os.symlink("../bin/demo-tool", env / "lib/libdemo.so")
    code, doc = verify(env, vcache, "--no-linkage")
    assert code == 1
    assert ("symlink", "lib/libdemo.so", "conda:demo-1.0-hb0f4dca_0") in kinds(doc)


def test_exec_bits_and_targets_come_from_the_archive_in_samebits_cache(
        conda_produced: Path, rb_channel: Path, vcache: Path, tmp_path: Path) -> None:
    """No extracted package cache, but the archive where samebits install keeps it: a chmod
    and a retarget are caught from the archive's own modes and links."""
    env = copy_prefix(conda_produced, tmp_path / "env")
    cache = tmp_path / "cache"
    for meta in (env / "conda-meta").glob("*.json"):
        doc = json.loads(meta.read_text())
        doc.pop("extracted_package_dir", None)
        meta.write_text(json.dumps(doc))
        archive = rb_channel / doc["subdir"] / doc["fn"]
        dest = cache / "archives" / doc["sha256"] / doc["fn"]
        dest.parent.mkdir(parents=True)
        shutil.copy(archive, dest)
    (env / "bin/demo-script").chmod(0o644)
    (env / "lib/libdemo.so").unlink()
    os.symlink("libdemo.so.2", env / "lib/libdemo.so")
    code, doc = verify(env, cache, "--no-linkage", "--no-bytecode")
    got = {(f["kind"], f["path"], f["source"]) for f in doc["findings"]}
    assert code == 1
    assert got == {("exec", "bin/demo-script", "package archive"),
                   ("symlink", "lib/libdemo.so", "package archive")}
    assert list((cache / "archive-facts").glob("*.json"))  # kept for the next run


# --------------------------------------------------------------------------- forgeries

def forge_body(pyc: Path, source: bytes) -> None:
    """Keep the 16-byte header (it still matches the source), replace the code."""
    data = pyc.read_bytes()
    pyc.write_bytes(data[:16] + marshal.dumps(compile(source, "x", "exec")))
    st = pyc.stat()
    os.utime(pyc, (st.st_atime, st.st_mtime))


def forge_unchecked_hash(pyc: Path, source: bytes) -> None:
    """An unchecked-hash pyc (flags=1): Python loads it whatever the source says."""
    data = pyc.read_bytes()
    pyc.write_bytes(data[:4] + (1).to_bytes(4, "little") + b"\0" * 8
                    + marshal.dumps(compile(source, "x", "exec")))


MOD_PYC = f"{SP}/sbtest/__pycache__/mod.{TAG}.pyc"
EVIL = b"def answer():\n    return 43\n"

BYTECODE_CASES: list[tuple[str, str, Callable[[Path], None]]] = [
    ("venv: body replaced, header intact", "venv",
     lambda p: forge_body(p / MOD_PYC, EVIL)),
    ("virtualenv: body replaced, header intact", "virtualenv",
     lambda p: forge_body(p / MOD_PYC, EVIL)),
    ("venv: unchecked-hash pyc", "venv", lambda p: forge_unchecked_hash(p / MOD_PYC, EVIL)),
]


@pytest.mark.parametrize(("producer", "mutate"), [c[1:] for c in BYTECODE_CASES],
                         ids=[c[0] for c in BYTECODE_CASES])
def test_forged_bytecode_is_caught_and_named(produced: dict[str, Path], vcache: Path,
                                             tmp_path: Path, producer: str,
                                             mutate: Callable[[Path], None]) -> None:
    """A pyc whose body is not its source's compile: exit 1, the pyc and its package named."""
    env = copy_prefix(produced[producer], tmp_path / "env")
    mutate(env)
    code, doc = verify(env, vcache)
    assert code == 1
    assert ("bytecode", MOD_PYC, SBTEST) in kinds(doc)


def test_forged_bytecode_in_uv_venv_written_at_run_time(produced: dict[str, Path],
                                                        vcache: Path, tmp_path: Path) -> None:
    """uv compiles nothing; Python writes the pycs on first import; a forged one is caught."""
    env = copy_prefix(produced["uv"], tmp_path / "env")
    run(env / "bin/python", "-c", "import sbtest")
    assert (env / MOD_PYC).is_file()
    code, doc = verify(env, vcache)
    assert (code, doc["findings"]) == (0, [])
    forge_body(env / MOD_PYC, EVIL)
    code, doc = verify(env, vcache)
    assert ("bytecode", MOD_PYC, SBTEST) in kinds(doc)


def test_stale_bytecode_is_a_note_not_a_forgery(produced: dict[str, Path], vcache: Path,
                                                tmp_path: Path) -> None:
    """A pyc whose header no longer matches its source is ignored by Python: listed as stale."""
    env = copy_prefix(produced["venv"], tmp_path / "env")
    forge_body(env / MOD_PYC, EVIL)
    os.utime(env / SP / "sbtest/mod.py", (1, 1))  # the header's mtime no longer matches
    code, doc = verify(env, vcache)
    assert (code, doc["findings"]) == (0, [])
    assert MOD_PYC in doc["bytecode"]["stale_files"]


def test_bytecode_verdicts_are_cached(produced: dict[str, Path], tmp_path: Path) -> None:
    """The second run compiles nothing, and its report is the same bytes."""
    from samebits._io import canonical_json
    from verify.env.check import check_env
    from verify.env.envreport import report_json

    cache = tmp_path / "cache"
    first = check_env(produced["virtualenv"], cache=cache, linkage=False)
    second = check_env(produced["virtualenv"], cache=cache, linkage=False)
    assert first.bytecode is not None and second.bytecode is not None
    assert first.bytecode.compiled == first.bytecode.checked > 0
    assert second.bytecode.compiled == 0
    assert canonical_json(report_json(first)) == canonical_json(report_json(second))


# ------------------------------------------------------------------ the base interpreter

@pytest.fixture
def own_base(base_python: Path, tmp_path: Path) -> Path:
    """A private copy of the base interpreter and a venv on it (python -m venv)."""
    base = copy_interpreter(tmp_path / "base")
    run(base, "-m", "venv", "--without-pip", tmp_path / "env")
    return base


def _stdlib(base: Path) -> Path:
    return base.parent.parent / "lib" / f"python{LINE}"


STARTUP_CASES: list[tuple[str, Callable[[Path], Path]]] = [
    ("sitecustomize.py in the base stdlib",
     lambda base: _write(_stdlib(base) / "sitecustomize.py", b"import os\n")),
    ("usercustomize.py in lib-dynload",
     lambda base: _write(_stdlib(base) / "lib-dynload/usercustomize.py", b"import os\n")),
    ("a zip on sys.path", lambda base: _write(
        base.parent.parent / "lib" / f"python{LINE.replace('.', '')}.zip", b"PK\5\6" + bytes(18))),
]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("plant", [c[1] for c in STARTUP_CASES],
                         ids=[c[0] for c in STARTUP_CASES])
def test_file_planted_in_the_base_interpreter_is_caught(own_base: Path, tmp_path: Path,
                                                        vcache: Path,
                                                        plant: Callable[[Path], Path]) -> None:
    """What the base interpreter runs at start-up needs an owner: a planted one is a finding."""
    code, doc = verify(tmp_path / "env", vcache)
    assert (code, doc["findings"]) == (0, [])
    planted = plant(own_base)
    code, doc = verify(tmp_path / "env", vcache)
    assert code == 1
    assert [(f["kind"], f["path"]) for f in doc["findings"]] == [("startup", str(planted))]


def test_pth_in_base_site_packages_counts_with_system_site_packages(
        base_python: Path, tmp_path: Path, vcache: Path) -> None:
    """include-system-site-packages: the base's *.pth run at start-up; unowned is a finding."""
    base = copy_interpreter(tmp_path / "base")
    run(base, "-m", "venv", "--without-pip", "--system-site-packages", tmp_path / "env")
    planted = _write(base.parent.parent / SP / "zz-hook.pth", b"import os\n")
    code, doc = verify(tmp_path / "env", vcache)
    assert code == 1
    assert [(f["kind"], f["path"]) for f in doc["findings"]] == [("startup", str(planted))]


def test_another_interpreter_gives_another_environment_digest(own_base: Path, tmp_path: Path,
                                                              vcache: Path) -> None:
    """Two venvs alike but for one byte of the base's stdlib: the environment digests differ,
    the packages and files digests do not (an image carries the files digest: the same
    whichever host built it), and the interpreter's stdlib digest says why."""
    _, before = verify(tmp_path / "env", vcache)
    target = _stdlib(own_base) / "textwrap.py"
    target.write_bytes(target.read_bytes() + b"\n")
    _, after = verify(tmp_path / "env", vcache)
    assert before["digests"]["packages"] == after["digests"]["packages"]
    assert before["files_digest"] == after["files_digest"] != after["digests"]["environment"]
    assert before["digests"]["environment"] != after["digests"]["environment"]
    assert before["interpreter"]["stdlib"]["sha256"] != after["interpreter"]["stdlib"]["sha256"]
    assert before["interpreter"]["sha256"] == after["interpreter"]["sha256"]


# ------------------------------------------------------------------------- provenance

def _lock(wheel: Path, url: str | None = None) -> Lock:
    pip = LockedPackage(name="sbtest", version="1.0", manager="pip", platform="linux-64",
                        url=url or wheel.as_uri(),
                        sha256=hashlib.sha256(wheel.read_bytes()).hexdigest())
    return Lock(platforms=("linux-64",), channels=(), sources=("test",),
                content_hash={"linux-64": "0" * 64}, custom={}, packages=(pip,))


def test_swapped_wheel_with_a_consistent_record_is_caught(base_python: Path,
                                                          producer_wheel: Path,
                                                          tmp_path: Path,
                                                          vcache: Path) -> None:
    """Another sbtest 1.0 wheel (same name, version, tags, its RECORD self-consistent),
    installed by pip from a file: direct_url.json's hash and URL differ from the lock's."""
    env = tmp_path / "env"
    run(base_python, "-m", "venv", "--without-pip", env)
    (tmp_path / "evil").mkdir()
    other = wheel_bytes_to(tmp_path / "evil", Wheel(name="sbtest", version="1.0", files={
        "sbtest/__init__.py": b"import os  # not the locked wheel\n"}))
    run(sys.executable, "-m", "pip", "--python", env / "bin/python", "install", "-q",
        "--no-deps", other)
    lockfile = tmp_path / "env.conda-lock.yml"
    lockfile.write_text(render_lock(_lock(producer_wheel)))
    code, doc = verify(env, vcache, str(lockfile))
    assert code == 1
    got = {(f["kind"], f["package"], f["detail"]) for f in doc["findings"]}
    assert got == {("package-hash", "sbtest", "archive sha256"),
                   ("package-url", "sbtest", "direct_url.json")}
    assert doc["unproven"] == []


def test_the_locked_wheel_by_file_is_proven_and_index_installs_are_unproven(
        base_python: Path, producer_wheel: Path, produced: dict[str, Path], tmp_path: Path,
        vcache: Path) -> None:
    """pip install of the locked file records its URL and hash: identical against the lock;
    uv from --find-links records neither: identical, listed as unproven."""
    env = tmp_path / "env"
    run(base_python, "-m", "venv", "--without-pip", env)
    run(sys.executable, "-m", "pip", "--python", env / "bin/python", "install", "-q",
        "--no-deps", producer_wheel)
    lockfile = tmp_path / "env.conda-lock.yml"
    lockfile.write_text(render_lock(_lock(producer_wheel)))
    code, doc = verify(env, vcache, str(lockfile))
    assert (code, doc["findings"], doc["unproven"]) == (0, [], [])
    code, doc = verify(produced["uv"], vcache, str(lockfile))
    assert (code, doc["findings"], doc["unproven"]) == (0, [], [SBTEST])


# --------------------------------------------------------------------------- scaffolding

SCAFFOLD_CASES: list[tuple[str, str, Callable[[Path], None], tuple[str, str]]] = [
    ("virtualenv: _virtualenv.pth edited", "virtualenv",
     lambda p: (p / SP / "_virtualenv.pth").write_text("import os; os.system('x')\n"),
     ("scaffold", f"{SP}/_virtualenv.pth")),
    ("uv: a file added to bin/", "uv", lambda p: (p / "bin/activate.evil").write_text("x\n"),
     ("unowned", "bin/activate.evil")),
    ("uv: .gitignore un-ignores", "uv", lambda p: (p / ".gitignore").write_text("!*\n"),
     ("scaffold", ".gitignore")),
    ("venv: activate_this.py is not python -m venv's", "venv",
     lambda p: (p / "bin/activate_this.py").write_text("import os\n"),
     ("unowned", "bin/activate_this.py")),
]


@pytest.mark.parametrize(("producer", "mutate", "expected"), [c[1:] for c in SCAFFOLD_CASES],
                         ids=[c[0] for c in SCAFFOLD_CASES])
def test_scaffolding_is_owned_but_not_a_hiding_place(produced: dict[str, Path], vcache: Path,
                                                    tmp_path: Path, producer: str,
                                                    mutate: Callable[[Path], None],
                                                    expected: tuple[str, str]) -> None:
    """Each producer's scaffolding is keyed on pyvenv.cfg: an extra or altered file is named."""
    env = copy_prefix(produced[producer], tmp_path / "env")
    mutate(env)
    code, doc = verify(env, vcache, "--no-bytecode")
    assert code == 1
    assert [(f["kind"], f["path"]) for f in doc["findings"]] == [expected]


DEBIAN_PYTHON = Path(f"/usr/bin/python{LINE}")


@pytest.mark.skipif(not (DEBIAN_PYTHON.exists() and Path("/var/lib/dpkg/info").is_dir()),
                    reason=f"needs Debian's python{LINE} (apt-get install python{LINE}-venv)")
def test_venv_on_debians_python_checks_its_stdlib_against_dpkg(tmp_path: Path,
                                                               vcache: Path) -> None:
    """A venv on the system Python: its stdlib matches dpkg's md5sums and its sitecustomize
    (a symlink Debian ships) is owned: identical."""
    env = tmp_path / "env"
    subprocess.run([DEBIAN_PYTHON, "-m", "venv", "--without-pip", env], check=True)
    code, doc = verify(env, vcache)
    assert (code, doc["findings"]) == (0, [])
    assert doc["interpreter"]["path"] == str(DEBIAN_PYTHON)


def test_dpkg_records_own_the_stdlib_and_its_start_up_links(tmp_path: Path) -> None:
    """md5sums give files and their md5; .list gives ownership of links and conffiles."""
    from verify.env.interpreter import Located
    from verify.env.startup import dpkg_records

    info = tmp_path / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (info / "libpython3.11-minimal:amd64.md5sums").write_text(
        "0123  usr/lib/python3.11/os.py\n4567  usr/share/doc/x\n")
    (info / "libpython3.11-minimal:amd64.list").write_text(
        "/usr/lib/python3.11\n/usr/lib/python3.11/sitecustomize.py\n")
    loc = Located(executable="/usr/bin/python3.11", stdlib="/usr/lib/python3.11",
                  base_prefix="/usr", line="3.11", inside=False)
    assert dpkg_records(loc, root=str(tmp_path)) == {
        "/usr/lib/python3.11/os.py": ("deb:libpython3.11-minimal", "0123", "md5"),
        "/usr/lib/python3.11/sitecustomize.py": ("deb:libpython3.11-minimal", None, "md5")}


@pytest.mark.skipif(not (DEBIAN_PYTHON.exists() and Path("/var/lib/dpkg/info").is_dir()),
                    reason=f"needs Debian's python{LINE} (apt-get install python{LINE}-venv)")
def test_dpkg_records_agree_with_dpkg_itself() -> None:
    """On the real dpkg database: each stdlib file dpkg_records names is owned by the package
    `dpkg -S` names, with the md5 of its bytes (it reads only the packages whose .list names
    the stdlib, so a package it skipped would show here as a file with no owner)."""
    from verify.env.interpreter import Located
    from verify.env.startup import dpkg_records

    stdlib = f"/usr/lib/python{LINE}"
    loc = Located(executable=str(DEBIAN_PYTHON), stdlib=stdlib, base_prefix="/usr",
                  line=LINE, inside=False)
    got = dpkg_records(loc)
    files = sorted(p for p, (_, md5, _) in got.items() if md5 and os.path.isfile(p))
    assert len(files) > 100
    sample = [*files[:: max(1, len(files) // 40)], f"{stdlib}/os.py"]
    owners = subprocess.run(["dpkg", "-S", *sample], capture_output=True, text=True,
                            check=True, timeout=120).stdout.splitlines()
    by_path = {line.split(": ", 1)[1]: line.split(": ", 1)[0].split(":")[0]
               for line in owners}
    for path in sample:
        pkg, md5, algo = got[path]
        assert (pkg, algo) == (f"deb:{by_path[path]}", "md5"), path
        assert hashlib.md5(Path(path).read_bytes()).hexdigest() == md5, path


def test_venv_with_copies_runs_on_its_base_and_a_changed_copy_is_caught(
        base_python: Path, tmp_path: Path, vcache: Path) -> None:
    """python -m venv --copies: bin/python is the base's binary, byte for byte; another
    binary there is a different interpreter and is named."""
    env = tmp_path / "env"
    run(base_python, "-m", "venv", "--copies", "--without-pip", env)
    code, doc = verify(env, vcache, "--no-linkage")
    assert (code, doc["findings"]) == (0, [])
    assert doc["interpreter"]["path"] == str(base_python)
    with open(env / "bin/python3", "ab") as f:
        f.write(b"\0")
    code, doc = verify(env, vcache, "--no-linkage")
    assert code == 1
    assert [(f["kind"], f["path"]) for f in doc["findings"]] == [("scaffold", "bin/python3")]


def test_venv_whose_interpreter_is_gone_is_not_runnable(tmp_path: Path, vcache: Path) -> None:
    """A venv whose base Python is not there (an image built without a base that has it) has
    identical files and cannot run at all: exit 1, said so, never "identical"."""
    prefix = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    cfg = prefix / "pyvenv.cfg"
    cfg.write_text("".join(
        "home = /nonexistent/bin\n" if line.startswith("home") else line
        for line in cfg.read_text().splitlines(keepends=True)))
    for link in (prefix / "bin").iterdir():
        if link.is_symlink():
            link.unlink()
            link.symlink_to("/nonexistent/bin/python3")
    code, doc = verify(prefix, vcache)
    assert code == 1
    assert doc["identical"] is True and doc["ok"] is False
    assert "the base interpreter is gone (home = /nonexistent/bin)" in doc["not_runnable"]
    text = subprocess.run([sys.executable, "-m", "verify", "env", "--prefix", str(prefix),
                           "--cache-dir", str(vcache)], capture_output=True, text=True,
                          cwd=Path(__file__).parents[2])
    assert "result: identical files, but NOT RUNNABLE" in text.stdout
