"""The tamper matrix: each way of changing an installed environment, caught end to end.

Every case changes a private copy of a real prefix (py-rattler installed the conda part, pip a
wheel) and runs the real `python -m verify env --json` against the lockfile and the report
recorded right after the install (`--against`), as a user keeps it; the case passes when the
report names the change (kind, path, owning package) and the exit code is 1. Two cases live in
the verify-gpu preflight, which runs before any workload.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.verify import Installed, install_env

ROOT = Path(__file__).resolve().parents[2]
SP = "lib/python3.11/site-packages"
VFA = "conda:vfa-1.0-h0_0"
SBTEST = "pip:sbtest==1.0"
PYTHON = "conda:python-3.11.9-h0_0_cpython"
VFA_META = "conda-meta/vfa-1.0-h0_0.json"


def verify_env(prefix: Path, lockfile: Path, *extra: str) -> tuple[int, dict]:
    res = subprocess.run(
        [sys.executable, "-m", "verify", "env", str(lockfile), "--prefix", str(prefix),
         "--platform", "linux-64", "--json", "--no-linkage", *extra],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode in (0, 1), res.stderr
    assert "Traceback" not in res.stderr
    return res.returncode, json.loads(res.stdout)


@pytest.fixture(scope="module")
def reference(pristine: Installed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report `verify env --json` gave right after the install: what the user keeps."""
    code, doc = verify_env(pristine.prefix, pristine.lockfile)
    assert code == 0 and doc["identical"] is True
    path = tmp_path_factory.mktemp("reference") / "env.verify.json"
    path.write_text(json.dumps(doc))
    return path


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def sha256_b64(data: bytes) -> str:
    import base64
    import hashlib

    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def record_matches_edit(p: Path) -> None:
    """Edit a pip file and rewrite its RECORD line to the new hash and size: RECORD agrees."""
    target = p / SP / "sbtest/data.bin"
    flip(target)
    data = target.read_bytes()
    record = p / SP / "sbtest-1.0.dist-info/RECORD"
    text = re.sub(r"^sbtest/data\.bin,[^\n]*$",
                  f"sbtest/data.bin,sha256={sha256_b64(data)},{len(data)}",
                  record.read_text(), flags=re.M)
    record.write_text(text)


def conda_meta_matches_edit(p: Path) -> None:
    """Edit a conda file and rewrite its conda-meta entry to match: the record agrees."""
    import hashlib

    target = p / "share/vfa/data.txt"
    target.write_text("tampered data\n")
    doc = json.loads((p / VFA_META).read_text())
    for entry in doc["paths_data"]["paths"]:
        if entry["_path"] == "share/vfa/data.txt":
            entry["sha256"] = hashlib.sha256(target.read_bytes()).hexdigest()
            entry["size_in_bytes"] = target.stat().st_size
    (p / VFA_META).write_text(json.dumps(doc))


def replace_hardlink(p: Path) -> None:
    """The installed library (a hardlink into the package cache) becomes a link elsewhere."""
    lib = p / "lib/libvfa.so.1"
    outside = p.parent / "elsewhere.so"
    outside.write_bytes(lib.read_bytes())
    lib.unlink()
    os.symlink(outside, lib)


def retarget(p: Path) -> None:
    (p / "lib/libvfa.so").unlink()
    os.symlink("libvfa.so.2", p / "lib/libvfa.so")


Finding = tuple[str, str | None, str | None]
CASES: list[tuple[str, Callable[[Path], None], Finding]] = [
    ("byte flip in a .so", lambda p: flip(p / "lib/libvfa.so.1"),
     ("modified", "lib/libvfa.so.1", VFA)),
    ("byte flip in a .py", lambda p: flip(p / SP / "sbtest/__init__.py"),
     ("modified", f"{SP}/sbtest/__init__.py", SBTEST)),
    ("truncation", lambda p: (p / "share/vfa/data.txt").write_bytes(b"da"),
     ("modified", "share/vfa/data.txt", VFA)),
    ("deleted file", lambda p: (p / "share/vfa/data.txt").unlink(),
     ("missing", "share/vfa/data.txt", VFA)),
    ("added file", lambda p: (p / "lib/libextra.so").write_bytes(b"\x7fELF"),
     ("unowned", "lib/libextra.so", None)),
    ("chmod +x", lambda p: (p / "share/vfa/data.txt").chmod(0o755),
     ("exec", "share/vfa/data.txt", VFA)),
    ("chmod -x", lambda p: (p / "bin/vfa-tool").chmod(0o644),
     ("exec", "bin/vfa-tool", VFA)),
    ("symlink retargeted", retarget, ("symlink", "lib/libvfa.so", VFA)),
    ("RECORD edited to match a modified file", record_matches_edit,
     ("modified", f"{SP}/sbtest/data.bin", None)),
    ("conda-meta edited to match a modified file", conda_meta_matches_edit,
     ("modified", "share/vfa/data.txt", None)),
    ("hardlink replaced by a link out of the prefix", replace_hardlink,
     ("type", "lib/libvfa.so.1", VFA)),
    ("extra .pth file (code at start-up)",
     lambda p: (p / SP / "zz-hook.pth").write_text("import os; os.environ['X'] = '1'\n"),
     ("unowned", f"{SP}/zz-hook.pth", None)),
    ("sitecustomize.py added",
     lambda p: (p / SP / "sitecustomize.py").write_text("import torch  # patched\n"),
     ("unowned", f"{SP}/sitecustomize.py", None)),
    ("modified interpreter", lambda p: flip(p / "bin/python3.11"),
     ("modified", "bin/python3.11", PYTHON)),
    ("RECORD line removed",
     lambda p: (p / SP / "sbtest-1.0.dist-info/RECORD").write_text(
         re.sub(r"^sbtest/__init__\.py,.*\n", "",
                (p / SP / "sbtest-1.0.dist-info/RECORD").read_text(), flags=re.M)),
     ("unowned", f"{SP}/sbtest/__init__.py", None)),
]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_tamper_is_detected_and_named(fresh_env: Installed, reference: Path,
                                      mutate: Callable[[Path], None], expected: Finding) -> None:
    """verify env exits 1 and its report names the changed file, the kind and the package."""
    mutate(fresh_env.prefix)
    code, doc = verify_env(fresh_env.prefix, fresh_env.lockfile, "--against", str(reference))
    assert code == 1 and doc["identical"] is False
    found = {(f["kind"], f.get("path"), f.get("package")) for f in doc["findings"]}
    kind, path, package = expected
    if package is None:
        assert any(k == kind and p == path for k, p, _ in found), found
    else:
        assert expected in found, found


# What the records alone cannot show: a record rewritten together with its file.
NEEDS_REFERENCE = {"RECORD edited to match a modified file",
                   "conda-meta edited to match a modified file"}


@pytest.mark.parametrize(("mutate", "expected"),
                         [c[1:] for c in CASES if c[0] not in NEEDS_REFERENCE],
                         ids=[c[0] for c in CASES if c[0] not in NEEDS_REFERENCE])
def test_tamper_is_detected_without_a_reference(fresh_env: Installed,
                                                mutate: Callable[[Path], None],
                                                expected: Finding) -> None:
    """Every kind the records can show is caught with the lockfile alone, no --against."""
    mutate(fresh_env.prefix)
    code, doc = verify_env(fresh_env.prefix, fresh_env.lockfile)
    assert code == 1 and doc["identical"] is False
    found = {(f["kind"], f.get("path"), f.get("package")) for f in doc["findings"]}
    kind, path, package = expected
    assert any(k == kind and p == path and package in (None, pkg) for k, p, pkg in found), found


@pytest.mark.parametrize("name", sorted(NEEDS_REFERENCE))
def test_forged_records_pass_without_a_reference(fresh_env: Installed, name: str) -> None:
    """The limit docs/explanation/guarantees.md states, pinned: a record forged with its file
    is silent without --against."""
    mutate = next(c[1] for c in CASES if c[0] == name)
    mutate(fresh_env.prefix)
    code, doc = verify_env(fresh_env.prefix, fresh_env.lockfile)
    assert (code, doc["findings"]) == (0, [])


def test_package_replaced_by_another_build(pristine: Installed, vchannel: Path, wheel: Path,
                                           rattler_cache: Path, tmp_path: Path) -> None:
    """vfa h1_1 where the lock has h0_0: the lock comparison names the build and the archive."""
    other = install_env(vchannel, wheel, tmp_path / "env", rattler_cache,
                        specs=("python 3.11.*", "vfa ==1.0 h1_1", "typing-extensions"))
    code, doc = verify_env(other.prefix, pristine.lockfile)
    assert code == 1
    kinds = {(f["kind"], f.get("package")) for f in doc["findings"]}
    assert {("package-build", "vfa"), ("package-hash", "vfa")} <= kinds


def test_clean_copy_is_identical(fresh_env: Installed, reference: Path) -> None:
    """The control: an untouched copy verifies identical against lock and reference."""
    code, doc = verify_env(fresh_env.prefix, fresh_env.lockfile, "--against", str(reference))
    assert code == 0 and doc["identical"] is True


@pytest.mark.parametrize(("var", "value", "check"), [
    ("LD_LIBRARY_PATH", "/usr/local/cuda-11.0/lib64", "library-path"),
    ("LD_PRELOAD", "/tmp/libfastmath.so", "preload"),
])
def test_library_environment_is_refused_by_preflight(var: str, value: str, check: str) -> None:
    """LD_LIBRARY_PATH outside the environment, or LD_PRELOAD: verify gpu stops before running."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), var: value}
    res = subprocess.run([sys.executable, "-m", "samebits", "verify", "gpu", "--device", "cpu",
                          "--only", "randn", "--json", "--out", os.devnull], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stderr
    problems = json.loads(res.stdout)["error"]["problems"]
    assert [p["check"] for p in problems] == [check]
    assert value in problems[0]["message"]
