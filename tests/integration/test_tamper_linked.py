"""The tamper matrix against a hardlinked install: a proof by identity misses nothing.

Each case of the tamper matrix (tests/fixtures/tamper.py) is applied to a prefix that
``samebits install --link-mode hardlink`` placed from its own private cache (so the prefix's
package files *are* the cache's sealed inodes, and a write into one is a write into the
cache). Then the change must be named, with exit 1, by all three ways of verifying it:

    install's own verify   ``check_env`` trusting the seals of the entries the install
                           linked from (what ``samebits install`` runs after placing)
    verify env --trust-seal
    verify env             every byte hashed

each against the report taken right after the install where the records alone cannot show
the change (a record forged with its file). Install's own verify runs twice: with the seals
trusted, and as ``samebits install`` runs it, told which files it linked (``placed``: taken
from their seal, proven by a stat on the other core, everything checked again where one is
not).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.tamper import CASES, NEEDS_REFERENCE, Finding
from tests.fixtures.verify import Installed

# whole installs, then three verifies each: slow, left out of CI's `nox -s tests`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samebits", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.fixture
def linked(pristine: Installed, vchannel: Path, wheel: Path, tmp_path: Path
           ) -> tuple[Path, Path, Path]:
    """(prefix, lockfile, cache): the pristine lock installed by hardlinks from a new cache."""
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    folders = os.pathsep.join(str(p) for p in (vchannel / "linux-64", vchannel / "noarch",
                                               wheel.parent))
    proc = _run("install", str(pristine.lockfile), "--target", str(prefix), "--platform",
                "linux-64", "--cache-dir", str(cache), "--link-mode", "hardlink", "--json",
                env={"SAMEBITS_FIND_LINKS": folders})
    assert proc.returncode == 0, proc.stderr + proc.stdout
    doc = json.loads(proc.stdout)
    assert doc["identical"] is True and doc["verify"]["proof"]["by_identity"] > 0
    return prefix, pristine.lockfile, cache


@pytest.fixture
def writes_anyway(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the case rewrites is made writable first, as a user (or a tool) not stopped by
    the read-only mode would: root needs nothing, anyone else chmods."""
    for name in ("write_bytes", "write_text"):
        original = getattr(Path, name)

        def write(self: Path, data, *args, _original=original, **kwargs):  # noqa: ANN001
            if self.exists() and not os.access(self, os.W_OK):
                os.chmod(self, self.stat().st_mode | 0o200)
            return _original(self, data, *args, **kwargs)

        monkeypatch.setattr(Path, name, write)


def _linked(prefix: Path, cache: Path, keys: list[str]) -> dict[str, str]:
    """Each regular file of ``prefix`` that is a sealed cache inode: its path -> that cache
    file (what ``InstallReport.linked`` named when the install placed it)."""
    from samebits.install.seal import SealIndex

    seals = SealIndex.load(cache, keys)
    links = {}
    for folder, _, names in os.walk(prefix):
        for name in names:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            got = seals.inodes.get((st.st_dev, st.st_ino))
            if got is not None and stat.S_ISREG(st.st_mode):
                links[os.path.relpath(path, prefix)] = got[1]
    assert links
    return links


def _found(doc: dict) -> set[tuple[str, str | None, str | None]]:
    return {(f["kind"], f.get("path"), f.get("package")) for f in doc["findings"]}


def _named(found: set, expected: Finding) -> bool:
    kind, path, package = expected
    return any(k == kind and p == path and package in (None, pkg) for k, p, pkg in found)


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_tamper_after_a_linked_install(linked: tuple[Path, Path, Path], writes_anyway: None,
                                       mutate: Callable[[Path], None], expected: Finding,
                                       request: pytest.FixtureRequest, tmp_path: Path) -> None:
    from samebits.install.resealing import Resealer
    from verify.env.check import check_env
    from verify.env.envreport import report_json

    prefix, lockfile, cache = linked
    keys = sorted(os.listdir(cache / "unpacked"))  # the entries this install linked from
    before = check_env(prefix, lockfile=lockfile, platform="linux-64", cache=cache,
                       linkage=False, coverage=False)
    assert before.identical
    reference = tmp_path / "env.verify.json"
    reference.write_text(json.dumps(report_json(before)))
    name = request.node.callspec.id
    against = ("--against", str(reference)) if name in NEEDS_REFERENCE else ()
    links = _linked(prefix, cache, keys)  # what the install knew it had linked
    mutate(prefix)

    for placed in (None, Resealer((), links, str(prefix))):
        report = check_env(prefix, lockfile=lockfile, platform="linux-64", cache=cache,
                           linkage=False, coverage=False, trust_seal=keys,
                           against=reference if against else None, placed=placed)
        assert report.exit_code == 1, ("install's own verify (the seal trusted)", placed)
        assert _named(_found(report_json(report)), expected), _found(report_json(report))
        assert report.proof is not None and report.proof["trust_seal"] is True

    for extra in (("--trust-seal",), ()):
        proc = _run("verify", "env", str(lockfile), "--prefix", str(prefix), "--platform",
                    "linux-64", "--cache-dir", str(cache), "--no-linkage", "--json",
                    *against, *extra)
        assert proc.returncode == 1, (extra, proc.stderr)
        assert "Traceback" not in proc.stderr
        doc = json.loads(proc.stdout)
        assert _named(_found(doc), expected), (extra, _found(doc))
        assert doc["proof"]["trust_seal"] is bool(extra)


def test_the_linked_control_is_identical(linked: tuple[Path, Path, Path]) -> None:
    """The control: untouched, the linked prefix is identical whichever way it is proven,
    with the same digests."""
    prefix, lockfile, cache = linked
    docs = []
    for extra in (("--trust-seal",), ()):
        proc = _run("verify", "env", str(lockfile), "--prefix", str(prefix), "--platform",
                    "linux-64", "--cache-dir", str(cache), "--no-linkage", "--json", *extra)
        assert proc.returncode == 0, proc.stderr
        docs.append(json.loads(proc.stdout))
    assert docs[0]["digests"] == docs[1]["digests"]
    assert docs[0]["proof"]["by_identity"] > 0 == docs[1]["proof"]["by_identity"]
