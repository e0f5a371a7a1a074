"""The import probe: an unresolved library is judged by what ``import`` really loads, in real
venvs that `samebits install` makes from wheels whose ELF files gcc builds here (offline)."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.fixtures.install import locked_wheel, wheel, write_lock
from tests.fixtures.render import run_cli
from tests.fixtures.verify import gcc

LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
SP = f"lib/python{LINE}/site-packages"
EXT = importlib.machinery.EXTENSION_SUFFIXES[0]      # .cpython-311-x86_64-linux-gnu.so
GONE = "libgone.so.1"                                # built to link against, shipped nowhere
MISSING = f"{GONE}: cannot open shared object file: No such file or directory"
STATIC = "the static verdict stands"


def extension(work: Path, name: str, *link: str) -> bytes:
    """A real CPython extension module ``name`` whose DT_NEEDED has ``link`` (no RUNPATH
    unless a ``-Wl,-rpath`` is among them)."""
    (work / f"{name}.c").write_text(
        "#include <Python.h>\n"
        f"static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, \"{name}\", NULL, -1}};\n"
        f"PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&def); }}\n")
    out = work / f"{name}{EXT}"
    gcc("-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", "-o", str(out),
        f"{name}.c", f"-L{work}", "-Wl,--no-as-needed", *link, cwd=work)
    return out.read_bytes()


def library(work: Path, soname: str, *link: str) -> bytes:
    (work / "s.c").write_text("int s(void) { return 0; }\n")
    gcc("-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", soname, "s.c", f"-L{work}",
        "-Wl,--no-as-needed", *link, cwd=work)
    return (work / soname).read_bytes()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One wheel per case; every file that cannot load needs libgone.so.1."""
    work = tmp_path_factory.mktemp("elves")
    out = tmp_path_factory.mktemp("wheels")
    library(work, GONE)
    needs_gone = extension(work, "_ext", f"-l:{GONE}")
    libpre = library(work, "libpre.so")
    pre_ext = extension(work, "_pre", "-l:libpre.so")   # no RUNPATH to pre/lib
    libmid = library(work, "libmid.so.1", f"-l:{GONE}")
    # site-packages/top/_ext.so -> <prefix>/lib, where midlib's data file lies
    top_ext = extension(work, "_ext", "-l:libmid.so.1",
                        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../../../lib")
    files: dict[str, dict[str, bytes]] = {
        "hot": {"hot/__init__.py": b"from hot import _ext\n", f"hot/_ext{EXT}": needs_gone},
        "cold": {"cold/__init__.py": b"", f"cold/_ext{EXT}": needs_gone},
        "pre": {"pre/__init__.py": b"import ctypes, os\n"
                b"ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libpre.so'))\n"
                b"from pre import _pre\n",
                "pre/lib/libpre.so": libpre, f"pre/_pre{EXT}": pre_ext},
        "nomod": {"nomod-1.0.data/data/lib/libnomod.so.1": library(work, "libnomod.so.1",
                                                                    f"-l:{GONE}")},
        "other": {"other/__init__.py": b"import samebits_no_such_module\n",
                  f"other/_ext{EXT}": needs_gone},
        "midlib": {"midlib-1.0.data/data/lib/libmid.so.1": libmid},
        "top": {"top/__init__.py": b"from top import _ext\n", f"top/_ext{EXT}": top_ext},
        "slow": {"slow/__init__.py": b"import time\ntime.sleep(3600)\n",
                 f"slow/_ext{EXT}": needs_gone},
        "boom": {"boom/__init__.py": b"import ctypes\nctypes.string_at(0)\n",
                 f"boom/_ext{EXT}": needs_gone},
    }
    return {name: wheel(out, name, "1.0", f, tag="py3-none-manylinux_2_17_x86_64",
                        purelib=False) for name, f in files.items()}


def install(tmp_path: Path, wheels: dict[str, Path], names: list[str]
            ) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """`samebits install` of a lock of those wheels: (its process, the prefix, the lock)."""
    env = write_lock(tmp_path / "lockfiles" / "probe.conda-lock.yml",
                     [locked_wheel(wheels[n]) for n in names], python=LINE)
    prefix = tmp_path / "env"
    proc = run_cli("install", str(env.path), "--target", str(prefix), "--platform", "linux-64",
                   "--python", sys.executable, "--cache-dir", str(tmp_path / "cache"),
                   "--find-links", str(wheels[names[0]].parent), "--json", cwd=tmp_path)
    return proc, prefix, env.path


def pip_env(tmp_path: Path, wheels: dict[str, Path], names: list[str]) -> Path:
    """A venv of `python -m venv` with those wheels installed by pip (no verify of its own)."""
    prefix = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(prefix / "bin/python"),
                    "install", "-q", "--no-deps", "--no-index",
                    *(str(wheels[n]) for n in names)], check=True, capture_output=True)
    return prefix


def verify(prefix: Path, *args: str, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    return run_cli("verify", "env", "--prefix", str(prefix), "--no-bytecode", "--no-coverage",
                   *args, cwd=prefix.parent, env=env)


# file, needed, where the report puts it, status, what its detail says
CASES = [
    ("imported and missing a library: still a finding, the import error quoted",
     f"{SP}/hot/_ext{EXT}", GONE, "unresolved", "unresolved", f"import hot: {MISSING}"),
    ("never imported by `import cold`: a note saying when it would load",
     f"{SP}/cold/_ext{EXT}", GONE, "lazy", "lazy",
     "not loaded by `import cold`; it loads only when `cold._ext` is imported (or something "
     "dlopens it)"),
    ("its package loads the library by path first (torchaudio's way): loaded on import",
     f"{SP}/pre/_pre{EXT}", "libpre.so", "loaded", "loaded",
     "loaded by `import pre`: ld.so found its libraries at run time"),
    ("a package with no Python module (PyPI's tbb): start-up alone, a note",
     "lib/libnomod.so.1", GONE, "lazy", "lazy",
     "pip:nomod==1.0 has no Python module to import and the interpreter's start-up does not "
     "load it; it loads only when something dlopens it"),
    ("an import that fails for another reason: the static verdict stands, said so",
     f"{SP}/other/_ext{EXT}", GONE, "unresolved", "unresolved",
     "import other: ModuleNotFoundError: No module named 'samebits_no_such_module' (not a "
     f"missing library: {STATIC})"),
    ("a module-less package's library that an imported extension needs: that import judges it",
     "lib/libmid.so.1", GONE, "unresolved", "unresolved", f"import top: {MISSING}"),
]


def test_verify_env_judges_unresolved_libraries_by_what_import_loads(
        tmp_path: Path, wheels: dict[str, Path]) -> None:
    """One environment holding every case: verify env in bubblewrap (--json) and without a
    sandbox (SAMEBITS_SANDBOX=none, text) give each file the same verdict, and the JSON
    records the modules imported and each one's outcome."""
    prefix = pip_env(tmp_path, wheels, ["hot", "cold", "pre", "nomod", "other", "midlib", "top"])
    proc = verify(prefix, "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["identical"] is True and doc["ok"] is False
    linkage = doc["linkage"]
    got = {(lk["file"], lk["needed"]): (key, lk["status"], lk.get("detail"))
           for key in ("unresolved", "loaded", "lazy") for lk in linkage[key]}
    assert got == {(file, needed): (key, status, detail)
                   for _, file, needed, key, status, detail in CASES}
    assert [lk["found"] for lk in linkage["loaded"]] == [f"{SP}/pre/lib/libpre.so"]
    imports = linkage["imports"]
    assert imports["ran"] is True and imports["isolation"] == "one process per module"
    assert {p["module"]: p["outcome"] for p in imports["probes"]} == {
        "": "imported", "cold": "imported", "hot": "failed", "other": "failed",
        "pre": "imported", "top": "failed"}
    assert next(p for p in imports["probes"] if p["module"] == "top")["missing"] == GONE
    assert {f["file"]: f["modules"] for f in imports["files"]}["lib/libmid.so.1"] == ["top"]
    assert "HOME" in imports["environment"] and "PYTHONPATH" not in imports["environment"]
    text = verify(prefix, env={"SAMEBITS_SANDBOX": "none"})
    assert text.returncode == 1, text.stderr
    lines = text.stdout.splitlines()
    for _, file, needed, _, _, detail in CASES:
        assert any(line.startswith((f"  {file} ", f"  note: {file} "))
                   and f"needs {needed}: " in line and detail in line
                   for line in lines), (file, detail)
    assert "  imports: start-up alone (nothing to import), `import cold`, `import hot`, " \
        "`import other`, `import pre`, `import top` in the environment's Python, one process " \
        "each, without a sandbox (SAMEBITS_SANDBOX=none), 60 s each: 3 failed, 3 imported" \
        in lines
    assert lines[-1] == "result: identical files, but libraries do not resolve (exit 1)"


@pytest.mark.slow
def test_install_notes_libraries_nothing_imports_and_exits_0(tmp_path: Path,
                                                              wheels: dict[str, Path]) -> None:
    """`samebits install`'s own verify: files no import loads, or that load once their
    package has loaded its own library, are notes and loaded links; exit 0, and a standalone
    verify env gives the same linkage."""
    proc, prefix, lock = install(tmp_path, wheels, ["cold", "pre", "nomod"])
    assert proc.returncode == 0, proc.stdout[-3000:]
    doc = json.loads(proc.stdout)
    linkage = doc["verify"]["linkage"]
    assert doc["ok"] is True and linkage["unresolved"] == []
    assert sorted(lk["file"] for lk in linkage["lazy"]) == [
        "lib/libnomod.so.1", f"{SP}/cold/_ext{EXT}"]
    assert [lk["file"] for lk in linkage["loaded"]] == [f"{SP}/pre/_pre{EXT}"]
    alone = verify(prefix, str(lock), "--json")
    assert alone.returncode == 0, alone.stdout
    assert json.loads(alone.stdout)["linkage"] == linkage


@pytest.mark.parametrize(("name", "outcome", "why"), [
    ("slow", "timeout", "import slow: the probe did not finish (killed after 2 s): " + STATIC),
    ("boom", "crashed",
     "import boom: the probe did not finish (crashed: killed by SIGSEGV): " + STATIC),
], ids=["an import that hangs", "an import that segfaults"])
def test_a_probe_that_does_not_finish_leaves_the_static_verdict(
        tmp_path: Path, wheels: dict[str, Path], name: str, outcome: str, why: str) -> None:
    """An import that hangs is killed at the timeout, one that segfaults ends by its signal
    (a venv made by python -m venv, the wheel installed by pip): neither says what loads, so
    the library stays unresolved and the report says why."""
    from verify.env.check import check_env
    from verify.env.envreport import report_json, report_text

    prefix = pip_env(tmp_path, wheels, [name])
    report = check_env(prefix, bytecode=False, coverage=False, import_timeout=2)
    assert report.exit_code == 1 and report.identical
    (link,) = report.linkage.unresolved if report.linkage else ()
    assert (link.file, link.needed, link.detail) == (f"{SP}/{name}/_ext{EXT}", GONE, why)
    imports = report_json(report)["linkage"]["imports"]
    assert [(p["module"], p["outcome"]) for p in imports["probes"]] == [(name, outcome)]
    assert imports["timeout_s"] == 2
    assert [(f["file"], f["verdict"], f["why"]) for f in imports["files"]] == [
        (f"{SP}/{name}/_ext{EXT}", "unresolved", why)]
    assert f"needs {GONE}: cannot open shared object file; {why}" in report_text(report)


def test_a_python_that_does_not_run_probes_nothing(tmp_path: Path) -> None:
    """No interpreter to import with: the static verdict stands and the record says why."""
    from verify.env.importverdict import judge_by_imports
    from verify.env.linkage import check_linkage
    from verify.env.manifest import build_manifest

    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /nonexistent\n")
    work = tmp_path / "work"
    work.mkdir()
    library(work, GONE)
    (prefix / "lib").mkdir()
    (prefix / "lib/libx.so").write_bytes(library(work, "libx.so", f"-l:{GONE}"))
    manifest = build_manifest(prefix, jobs=1)
    static = check_linkage(manifest, host_dirs=())
    judged = judge_by_imports(static, manifest, executable=None, runs=False, readable=(),
                              environ=os.environ)
    assert judged.unresolved == static.unresolved and not judged.ok
    assert judged.to_json()["imports"] == {
        "ran": False, "why": f"the environment's Python does not run here: {STATIC}",
        "files": [{"file": "lib/libx.so", "packages": [], "modules": [],
                   "verdict": "unresolved", "why": f"no package owns it: {STATIC}"}]}


# ------------------------------------------------------------------- real packages from PyPI

REAL_SPEC = """\
format = 1
generation = "cpu"
python = "{line}"
exclude-newer = "2024-06-01T00:00:00Z"
[platforms.linux-64]
glibc = "2.28"
[pypi]
requirements = ["{requirement}"]
"""


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize(("requirement", "file", "needed", "detail"), [
    ("numba==0.59.1", f"{SP}/numba/np/ufunc/tbbpool{EXT}", "libtbb.so.12",
     "not loaded by `import numba`; it loads only when `numba.np.ufunc.tbbpool` is imported "
     "(or something dlopens it)"),
    ("tbb==2021.10.0", "lib/libtbbbind.so.3", "libhwloc.so.5",
     "pip:tbb==2021.10.0 has no Python module to import and the interpreter's start-up does "
     "not load it; it loads only when something dlopens it"),
], ids=["numba without TBB", "tbb without hwloc"])
def test_real_wheels_whose_optional_libraries_pip_lacks(
        tmp_path: Path, requirement: str, file: str, needed: str, detail: str) -> None:
    """Real wheels from PyPI, locked and installed by samebits: numba 0.59.1's tbbpool module
    needs libtbb.so.12 (pip installs no TBB; `import numba` does not load it), tbb 2021.10's
    libtbbbind needs libhwloc.so.5 (libtbb dlopens it where hwloc exists): install exits 0
    with a note naming the file and the library, where it used to fail."""
    if not (3, 9) <= sys.version_info[:2] <= (3, 12):
        pytest.skip(f"numba 0.59.1 has wheels for Python 3.9-3.12, not {LINE}")
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "real.toml").write_text(
        REAL_SPEC.format(line=LINE, requirement=requirement))
    cache = str(tmp_path / "cache")
    locked = run_cli("lock", "--root", str(tmp_path), "real", "--cache-dir", cache,
                     cwd=tmp_path)
    assert locked.returncode == 0, locked.stderr
    lock = tmp_path / "lockfiles" / "real.conda-lock.yml"
    prefix = tmp_path / "env"
    proc = run_cli("install", str(lock), "--target", str(prefix), "--platform", "linux-64",
                   "--python", sys.executable, "--cache-dir", cache, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    lines = proc.stdout.splitlines()
    package = f"pip:{requirement}"
    assert f"  note: {file} [{package}] needs {needed}: {detail}" in lines
    assert lines[-1] == "result: identical (exit 0)"


@pytest.mark.network
@pytest.mark.slow
def test_real_library_missing_where_import_loads_it_is_still_a_finding(tmp_path: Path) -> None:
    """The same numba environment with numpy's OpenBLAS deleted (its RECORD row too, so the
    files are identical to their records): `import numpy` fails, so its extension modules'
    links stay unresolved and quote the import error; exit 1."""
    if not (3, 9) <= sys.version_info[:2] <= (3, 12):
        pytest.skip(f"numba 0.59.1 has wheels for Python 3.9-3.12, not {LINE}")
    prefix = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(prefix / "bin/python"),
                    "install", "-q", "--no-cache-dir", "numba==0.59.1", "numpy==1.26.4",
                    "llvmlite==0.42.0"], check=True, capture_output=True)
    site = prefix / SP
    (blas,) = (site / "numpy.libs").glob("libopenblas*.so")
    blas.unlink()
    (record,) = site.glob("numpy-*.dist-info/RECORD")
    record.write_text("".join(line for line in record.read_text().splitlines(keepends=True)
                              if not line.startswith(f"numpy.libs/{blas.name},")))
    proc = verify(prefix, "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["identical"] is True and doc["ok"] is False
    unresolved = {lk["file"]: lk for lk in doc["linkage"]["unresolved"]}
    core = unresolved[f"{SP}/numpy/core/_multiarray_umath{EXT}"]
    assert (core["needed"], core["detail"]) == (
        blas.name, f"import numpy: {blas.name}: cannot open shared object file: No such file "
        "or directory")
    # numba imports numpy: its tbbpool is no longer proven lazy, the static verdict stands
    assert unresolved[f"{SP}/numba/np/ufunc/tbbpool{EXT}"]["detail"].startswith(
        f"import numba: {blas.name}: cannot open shared object file")
