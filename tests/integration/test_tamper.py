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
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.tamper import CASES, NEEDS_REFERENCE, Finding
from tests.fixtures.verify import Installed, install_env

ROOT = Path(__file__).resolve().parents[2]
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
