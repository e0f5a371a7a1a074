"""`samebits verify env` / `python -m verify env`: exit codes, messages, the JSON document."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from samebits._io import canonical_json
from samebits_app.cli import main
from tests.fixtures.verify import (  # noqa: F401  (fixtures)
    SP_REL,
    Installed,
    elves,
    fresh_env,
    pristine,
    rattler_cache,
    rattler_install,
    vchannel,
    wheel,
)

REPO = Path(__file__).resolve().parents[2]


def run(capsysbinary: pytest.CaptureFixture[bytes], *args: str) -> tuple[int, bytes, str]:
    rc = main(["verify", "env", *args])
    out, err = capsysbinary.readouterr()
    return rc, out, err.decode()


def test_clean_prefix_with_lock_exits_0(pristine: Installed,
                                        capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """A clean prefix and its lock: exit 0 and the text says identical."""
    rc, out, _ = run(capsysbinary, str(pristine.lockfile), "--prefix", str(pristine.prefix),
                     "--platform", "linux-64")
    assert rc == 0
    assert out.decode().splitlines()[-1] == "result: identical (exit 0)"


def test_drift_exits_1_and_names_file_and_package(
        fresh_env: Installed, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """One flipped byte: exit 1, the finding line names the file and the package."""
    target = fresh_env.prefix / "share/vfa/data.txt"
    target.write_bytes(target.read_bytes().upper())
    rc, out, _ = run(capsysbinary, "--prefix", str(fresh_env.prefix), str(fresh_env.lockfile))
    lines = out.decode().splitlines()
    assert rc == 1
    assert any(ln.startswith("  modified        share/vfa/data.txt [conda:vfa-1.0-h0_0]: "
                             "sha256 ") for ln in lines)
    assert lines[-1] == "result: DRIFT: 1 finding (exit 1)"


BAD_INPUT = [
    ("no such prefix", ["--prefix", "{tmp}/nope"], "{tmp}/nope: no such directory"),
    ("not an environment", ["--prefix", "{tmp}"], "{tmp}: not an environment"),
    ("no such lockfile", ["--prefix", "{env}", "{tmp}/x.conda-lock.yml"],
     "{tmp}/x.conda-lock.yml: no such lockfile"),
    ("a lockfile that is not one", ["--prefix", "{env}", "{tmp}/bad.yml"],
     "{tmp}/bad.yml: not a conda-lock file"),
    ("platform not in the lock", ["--prefix", "{env}", "{lock}", "--platform",
                                  "linux-aarch64"],
     "{lock}: no platform linux-aarch64 (it has linux-64)"),
    ("reference of another format", ["--prefix", "{env}", "--against", "{tmp}/ref.json"],
     "{tmp}/ref.json: format = 2: this samebits reads `verify env` reports of format 1"),
    ("jobs below one", ["--prefix", "{env}", "--jobs", "0"], "--jobs 0: must be at least 1"),
]


@pytest.mark.parametrize(("name", "args", "message"), BAD_INPUT, ids=[b[0] for b in BAD_INPUT])
def test_bad_input_exits_2_with_the_value_named(
        pristine: Installed, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes],
        name: str, args: list[str], message: str) -> None:
    """Bad input: exit 2, `error: ...` quoting the value, no traceback."""
    (tmp_path / "bad.yml").write_text("version: 1\npackage: 3\n")
    (tmp_path / "ref.json").write_text('{"format": 2, "kind": "samebits.verify-env"}')
    fill = {"tmp": str(tmp_path), "env": str(pristine.prefix), "lock": str(pristine.lockfile)}
    rc, out, err = run(capsysbinary, *(a.format(**fill) for a in args))
    assert rc == 2 and out == b""
    assert err.startswith(f"error: {message.format(**fill)}")
    assert "Traceback" not in err


def test_json_report_is_canonical_and_byte_stable(
        pristine: Installed, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """--json twice gives the same bytes, in canonical form, format 1, identical true."""
    args = ("--prefix", str(pristine.prefix), str(pristine.lockfile), "--json")
    rc1, first, _ = run(capsysbinary, *args)
    rc2, second, _ = run(capsysbinary, *args, "--jobs", "1")
    assert (rc1, rc2) == (0, 0) and first == second
    doc = json.loads(first)
    assert canonical_json(doc) == first
    assert (doc["format"], doc["kind"], doc["identical"], doc["ok"]) == (
        1, "samebits.verify-env", True, True)
    assert doc["summary"]["packages"] == {"conda": 3, "pip": 1}
    entry = next(e for e in doc["manifest"] if e["path"] == "lib/libvfa.so")
    assert entry == {"path": "lib/libvfa.so", "type": "symlink", "target": "libvfa.so.1",
                     "owner": "conda:vfa-1.0-h0_0", "category": "package"}


def test_bytecode_an_interpreter_cannot_check_is_counted_not_called_checked(
        fresh_env: Installed, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """The conda python here is not a runnable interpreter (as on another architecture): a
    compiled pyc is counted as unchecked and said so; nothing is called checked."""
    import py_compile

    py_compile.compile(str(fresh_env.prefix / SP_REL / "sbtest/__init__.py"), doraise=True)
    rc, out, _ = run(capsysbinary, "--prefix", str(fresh_env.prefix), "--json")
    doc = json.loads(out)
    assert rc == 0
    assert doc["interpreter"]["runs_here"] is False
    bc = doc["bytecode"]
    assert (bc["interpreter_runs"], bc["checked"]) == (False, 0)
    assert bc["unchecked"] > 0
    assert f"{bc['unchecked']:,} bytecode files not checked: the environment's interpreter " \
           "does not run here" in doc["notes"]


def test_against_a_reference_finds_what_records_cannot(
        fresh_env: Installed, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """A file edited together with its RECORD line, and a chmod on a pip file, are found only
    against an earlier report; the records alone see nothing."""
    rc, ref, _ = run(capsysbinary, "--prefix", str(fresh_env.prefix), "--json")
    assert rc == 0
    (tmp_path / "ref.json").write_bytes(ref)
    init = fresh_env.prefix / SP_REL / "sbtest/__init__.py"
    init.write_text("__version__ = '6.6.6'\n")
    record = fresh_env.prefix / SP_REL / "sbtest-1.0.dist-info/RECORD"
    from tests.fixtures.fakewheels import _record_hash
    lines = [ln if not ln.startswith("sbtest/__init__.py,") else
             f"sbtest/__init__.py,{_record_hash(init.read_bytes())},{init.stat().st_size}"
             for ln in record.read_text().splitlines()]
    record.write_text("\n".join(lines) + "\n")
    os.chmod(fresh_env.prefix / SP_REL / "sbtest/data.bin", 0o755)
    rc, plain, _ = run(capsysbinary, "--prefix", str(fresh_env.prefix), "--json")
    assert rc == 0 and json.loads(plain)["findings"] == []
    rc, out, _ = run(capsysbinary, "--prefix", str(fresh_env.prefix), "--json",
                     "--against", str(tmp_path / "ref.json"))
    got = {(f["kind"], f["path"], f.get("package"), f["source"])
           for f in json.loads(out)["findings"]}
    assert rc == 1
    assert got == {
        ("modified", f"{SP_REL}/sbtest/__init__.py", "pip:sbtest==1.0", "reference"),
        ("modified", f"{SP_REL}/sbtest-1.0.dist-info/RECORD", "pip:sbtest==1.0", "reference"),
        ("exec", f"{SP_REL}/sbtest/data.bin", "pip:sbtest==1.0", "reference"),
    }


def test_python_m_verify_env(fresh_env: Installed) -> None:
    """`python -m verify env ... --json` prints the report and exits 0, then 1 after a change."""
    cmd = [sys.executable, "-m", "verify", "env", "--prefix", str(fresh_env.prefix),
           str(fresh_env.lockfile), "--json"]
    clean = subprocess.run(cmd, capture_output=True, cwd=REPO)
    assert clean.returncode == 0 and json.loads(clean.stdout)["identical"] is True
    (fresh_env.prefix / "bin/vfa-script").unlink()
    drift = subprocess.run(cmd, capture_output=True, cwd=REPO)
    doc = json.loads(drift.stdout)
    assert drift.returncode == 1 and doc["identical"] is False
    assert [(f["kind"], f["path"]) for f in doc["findings"]] == [("missing", "bin/vfa-script")]


def test_running_environment_is_the_default(tmp_path: Path) -> None:
    """With no --prefix, the running environment (here a fresh venv) is checked; samebits
    comes from PYTHONPATH, so the venv holds only what `python -m venv` made."""
    import sysconfig

    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    path = os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])
    proc = subprocess.run([str(env / "bin/python"), "-m", "verify", "env", "--json"],
                          capture_output=True, cwd=REPO, env={**os.environ, "PYTHONPATH": path})
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert (doc["prefix"], doc["prefix_kind"], doc["identical"]) == (str(env), "venv", True)
    assert {e["category"] for e in doc["manifest"]} == {"scaffold"}
    assert doc["interpreter"]["path"] == os.path.realpath(sys._base_executable)


def test_unresolved_library_is_named_and_exits_1(
        vchannel: Path, rattler_cache: Path, tmp_path: Path,
        capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """Identical files but a library nobody ships: exit 1, the file and package named;
    --no-linkage skips the check and exits 0."""
    from verify.env.linkage import host_library_dirs

    if any(os.path.exists(os.path.join(d, "libcudart.so.11.0")) for d in host_library_dirs()):
        pytest.skip("this host has libcudart.so.11.0 in its default library folders")
    prefix = tmp_path / "env"
    rattler_install(vchannel, ["python 3.11.*", "needy"], prefix, rattler_cache)
    rc, out, _ = run(capsysbinary, "--prefix", str(prefix))
    text = out.decode()
    assert rc == 1
    assert ("  lib/libneedy.so [conda:needy-1.0-h0_0] needs libcudart.so.11.0: "
            "cannot open shared object file") in text.splitlines()
    assert text.splitlines()[-1] == (
        "result: identical files, but libraries do not resolve (exit 1)")
    rc, out, _ = run(capsysbinary, "--prefix", str(prefix), "--no-linkage", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["linkage"] == {"checked": False} and doc["ok"] is True
