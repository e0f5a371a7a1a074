"""verify env drift: every kind of change to a real installed prefix is found and attributed."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.verify import (  # noqa: F401  (fixtures)
    Installed,
    elves,
    fresh_env,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)
from verify.env.drift import file_findings
from verify.env.manifest import build_manifest

SP = "lib/python3.11/site-packages"
VFA = "conda:vfa-1.0-h0_0"
SBTEST = "pip:sbtest==1.0"
VFA_META = "conda-meta/vfa-1.0-h0_0.json"
VFA_FILES = ("bin/vfa-script", "bin/vfa-tool", "lib/libvfa.so", "lib/libvfa.so.1",
             "share/vfa/config.txt", "share/vfa/data.txt")


def flip_last_byte(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[-1] ^= 0xFF
    p.write_bytes(bytes(data))


def truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:3])


def retarget(p: Path, target: str) -> None:
    p.unlink()
    os.symlink(target, p)


def edit_record(prefix: Path, pattern: str, repl: str) -> None:
    record = prefix / SP / "sbtest-1.0.dist-info/RECORD"
    text = record.read_text()
    new = re.sub(pattern, repl, text, flags=re.M)
    assert new != text
    record.write_text(new)


def edit_conda_meta(prefix: Path, path: str, key: str, value: str) -> None:
    meta = prefix / VFA_META
    doc = json.loads(meta.read_text())
    for entry in doc["paths_data"]["paths"]:
        if entry["_path"] == path:
            entry[key] = value
    meta.write_text(json.dumps(doc))


Mutation = Callable[[Path], None]
CASES: list[tuple[str, Mutation, set[tuple[str, str, str | None]]]] = [
    ("byte flip in a library",
     lambda p: flip_last_byte(p / "lib/libvfa.so.1"),
     {("modified", "lib/libvfa.so.1", VFA)}),
    ("truncation",
     lambda p: truncate(p / "share/vfa/data.txt"),
     {("modified", "share/vfa/data.txt", VFA)}),
    ("deleted file",
     lambda p: (p / "share/vfa/data.txt").unlink(),
     {("missing", "share/vfa/data.txt", VFA)}),
    ("added file",
     lambda p: (p / "lib/evil.so").write_bytes(b"\x7fELF evil"),
     {("unowned", "lib/evil.so", None)}),
    ("chmod -x",
     lambda p: (p / "bin/vfa-script").chmod(0o644),
     {("exec", "bin/vfa-script", VFA)}),
    ("symlink retargeted",
     lambda p: retarget(p / "lib/libvfa.so", "libvfa.so.2"),
     {("symlink", "lib/libvfa.so", VFA)}),
    ("file replaced by a symlink",
     lambda p: retarget(p / "share/vfa/data.txt", "config.txt"),
     {("type", "share/vfa/data.txt", VFA)}),
    ("prefix-rewritten file edited",
     lambda p: (p / "share/vfa/config.txt").write_text("prefix = /elsewhere\n"),
     {("modified", "share/vfa/config.txt", VFA)}),
    ("byte flip in a pip file",
     lambda p: flip_last_byte(p / SP / "sbtest/data.bin"),
     {("modified", f"{SP}/sbtest/data.bin", SBTEST)}),
    ("pip file deleted",
     lambda p: (p / SP / "sbtest/__init__.py").unlink(),
     {("missing", f"{SP}/sbtest/__init__.py", SBTEST)}),
    ("RECORD hash edited",
     lambda p: edit_record(p, r"^(sbtest/data\.bin),sha256=[^,]+,", r"\1,sha256=" + "A" * 43 + ","),
     {("modified", f"{SP}/sbtest/data.bin", SBTEST)}),
    ("RECORD line removed",
     lambda p: edit_record(p, r"^sbtest/data\.bin,.*\n", ""),
     {("unowned", f"{SP}/sbtest/data.bin", None)}),
    ("conda-meta file hash edited",
     lambda p: edit_conda_meta(p, "share/vfa/data.txt", "sha256", "0" * 64),
     {("modified", "share/vfa/data.txt", VFA)}),
    ("conda-meta unreadable",
     lambda p: (p / VFA_META).write_text("{not json"),
     {("bad-record", VFA_META, VFA), *(("unowned", f, None) for f in VFA_FILES)}),
    ("bytecode rewritten and added (caches are not drift)",
     lambda p: [(p / SP / "sbtest/__pycache__/__init__.cpython-311.pyc").write_bytes(b"x"),
                (p / SP / "__pycache__").mkdir(),
                (p / SP / "__pycache__/typing_extensions.cpython-311.pyc").write_bytes(b"y")],
     set()),
]


def findings_of(prefix: Path) -> set[tuple[str, str | None, str | None]]:
    return {(f.kind, f.path, f.package) for f in file_findings(build_manifest(prefix, jobs=1))}


def test_pristine_prefix_has_no_findings(pristine: Installed) -> None:
    """A prefix just installed by py-rattler and pip verifies clean."""
    assert findings_of(pristine.prefix) == set()


@pytest.mark.parametrize(("name", "mutate", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_kind_of_drift_is_found_and_attributed(
        fresh_env: Installed, name: str, mutate: Mutation,
        expected: set[tuple[str, str, str | None]]) -> None:
    """One change gives exactly its findings, each naming the file and the owning package."""
    mutate(fresh_env.prefix)
    assert findings_of(fresh_env.prefix) == expected


def test_every_mismatch_is_reported_not_the_first(fresh_env: Installed) -> None:
    """All independent changes at once are all reported."""
    combined = [c for c in CASES if c[0] in (
        "byte flip in a library", "deleted file", "added file", "chmod -x",
        "symlink retargeted", "byte flip in a pip file", "pip file deleted")]
    for _, mutate, _ in combined:
        mutate(fresh_env.prefix)
    assert findings_of(fresh_env.prefix) == set().union(*(c[2] for c in combined))


def test_modified_finding_carries_both_hashes_and_sizes(fresh_env: Installed) -> None:
    """A truncated file's finding has the recorded and the actual sha256 and sizes."""
    target = fresh_env.prefix / "share/vfa/data.txt"
    recorded = __import__("hashlib").sha256(target.read_bytes()).hexdigest()
    truncate(target)
    (f,) = file_findings(build_manifest(fresh_env.prefix, jobs=1))
    assert (f.expected, f.actual, f.detail) == (
        recorded, __import__("hashlib").sha256(target.read_bytes()).hexdigest(),
        "size 19 -> 3")


def test_unowned_file_names_the_package_whose_folder_it_is_in(fresh_env: Installed) -> None:
    """A file dropped among one package's files says whose folder it sits in."""
    (fresh_env.prefix / SP / "sbtest/evil.py").write_text("import os\n")
    (f,) = file_findings(build_manifest(fresh_env.prefix, jobs=1))
    assert (f.kind, f.detail) == ("unowned", f"in a folder of {SBTEST}")


def test_ownership_categories_of_a_conda_prefix(pristine: Installed) -> None:
    """Package files are owned, installer records are meta, compiled bytecode is cache."""
    m = build_manifest(pristine.prefix, jobs=1)
    cats = {e.path: (e.category, e.owner) for e in m.entries}
    assert cats["lib/libvfa.so.1"] == ("package", VFA)
    assert cats[f"{SP}/typing_extensions.py"] == ("package",
                                                  "conda:typing-extensions-4.12.2-pyh0_0")
    assert cats[f"{SP}/sbtest-1.0.dist-info/RECORD"] == ("package", SBTEST)
    assert cats[f"{SP}/sbtest/__pycache__/__init__.cpython-311.pyc"] == ("cache", SBTEST)
    assert cats[VFA_META] == ("meta", "<installer>")
    assert cats["CACHEDIR.TAG"] == ("meta", "<installer>")


def test_hardlinks_inside_the_prefix_are_hashed_once_and_both_listed(fresh_env: Installed) -> None:
    """A second name for a file (a hardlink) is an entry of its own with the same hash."""
    os.link(fresh_env.prefix / "share/vfa/data.txt", fresh_env.prefix / "share/vfa/again.txt")
    entries = build_manifest(fresh_env.prefix, jobs=2).by_path()
    one, two = entries["share/vfa/data.txt"], entries["share/vfa/again.txt"]
    assert one.sha256 == two.sha256 is not None
    assert (one.category, two.category) == ("package", "unowned")
