"""verify env digests: the canonical manifest's bytes, pinned digests, and real reinstalls."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from tests.fixtures.verify import (  # noqa: F401  (fixtures)
    Installed,
    elves,
    install_env,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)
from verify.env.digest import (
    canonical_manifest,
    digests,
    environment_digest,
    packages_digest,
    prefix_digests,
)
from verify.env.manifest import Entry, build_manifest
from verify.env.records import Package

ENTRIES = (
    Entry(path="bin/tool", type="file", exec=True, sha256="a" * 64, owner="conda:x-1-0",
          category="package"),
    Entry(path="conda-meta/x-1-0.json", type="file", sha256="c" * 64, category="meta"),
    Entry(path="extra.txt", type="file", sha256="e" * 64, category="unowned"),
    Entry(path="lib/libx.so", type="symlink", target="libx.so.1", category="package"),
    Entry(path="lib/libx.so.1", type="file", sha256="b" * 64, category="package"),
    Entry(path="x/__pycache__/y.cpython-311.pyc", type="file", sha256="d" * 64,
          category="cache"),
)
GOLDEN_ENVIRONMENT = "cb81eed6ba558ffb1d18cf94d1c95955977613c7ca197b0690af637975deb8aa"
PACKAGES = (
    Package(manager="conda", name="x", version="1", build="0", sha256="f" * 64, md5="0" * 32,
            record="conda-meta/x-1-0.json"),
    Package(manager="pip", name="Some_Thing", version="2.0", tags=("py3-none-any",),
            record="lib/python3.11/site-packages/some_thing-2.0.dist-info/RECORD"),
)
GOLDEN_PACKAGES = "135eacdc653226b694fb6a14407dd103d995f6e1ff634fabd245466354b76036"


def test_canonical_manifest_bytes() -> None:
    """The canonical manifest is the documented NUL-separated records, sorted, filtered."""
    assert b"".join(canonical_manifest(ENTRIES)) == (
        b"samebits-environment-manifest 2\n"
        b"bin/tool\0f\0x\0" + b"a" * 64 + b"\0"
        b"extra.txt\0f\0-\0" + b"e" * 64 + b"\0"
        b"lib/libx.so\0l\0-\0libx.so.1\0"
        b"lib/libx.so.1\0f\0-\0" + b"b" * 64 + b"\0")


def test_interpreter_enters_the_manifest_after_the_header() -> None:
    """A venv's interpreter identity is one record right after the header."""
    got = b"".join(canonical_manifest(ENTRIES[:1], "9" * 64))
    assert got == (b"samebits-environment-manifest 2\n<interpreter>\0i\0-\0" + b"9" * 64
                   + b"\0bin/tool\0f\0x\0" + b"a" * 64 + b"\0")
    assert environment_digest(ENTRIES, "9" * 64) != environment_digest(ENTRIES)
    assert environment_digest(ENTRIES, "9" * 64) != environment_digest(ENTRIES, "8" * 64)


def test_package_identities() -> None:
    """A package's identity is what the packages digest hashes: no paths, canonical names."""
    assert [p.identity() for p in PACKAGES] == [
        {"manager": "conda", "name": "x", "version": "1", "build": "0", "sha256": "f" * 64},
        {"manager": "pip", "name": "some-thing", "version": "2.0", "tags": ["py3-none-any"]},
    ]


def test_golden_digests() -> None:
    """Pinned: changing either digest's input format is a deliberate, versioned break."""
    assert environment_digest(ENTRIES) == GOLDEN_ENVIRONMENT
    assert packages_digest(PACKAGES) == GOLDEN_PACKAGES


def _replace(which: str, **changes: object) -> tuple[Entry, ...]:
    return tuple(e._replace(**changes) if e.path == which else e for e in ENTRIES)


CHANGES = [
    ("content", _replace("lib/libx.so.1", sha256="9" * 64), True),
    ("executable bit", _replace("lib/libx.so.1", exec=True), True),
    ("symlink target", _replace("lib/libx.so", target="libx.so.2"), True),
    ("type", _replace("lib/libx.so", type="file", sha256="9" * 64, target=None), True),
    ("path", _replace("extra.txt", path="extra2.txt"), True),
    ("unowned file added", (*ENTRIES, Entry(path="z", type="file", sha256="1" * 64)), True),
    ("owner", _replace("bin/tool", owner="conda:y-1-0"), False),
    ("installer record content", _replace("conda-meta/x-1-0.json", sha256="9" * 64), False),
    ("bytecode cache content", _replace("x/__pycache__/y.cpython-311.pyc", sha256="9" * 64),
     False),
    ("entry order", tuple(reversed(ENTRIES)), False),
]


@pytest.mark.parametrize(("name", "entries", "changes"), CHANGES, ids=[c[0] for c in CHANGES])
def test_what_the_environment_digest_covers(name: str, entries: tuple[Entry, ...],
                                            changes: bool) -> None:
    """Content, exec bit, link target, type and path count; owners, records, caches do not."""
    assert (environment_digest(entries) != GOLDEN_ENVIRONMENT) is changes


def test_packages_digest_ignores_order_and_where_records_live() -> None:
    """The package set's digest depends on identities only."""
    moved = dataclasses.replace(PACKAGES[1], record="elsewhere/RECORD")
    assert packages_digest((moved, PACKAGES[0])) == GOLDEN_PACKAGES
    assert packages_digest((PACKAGES[0],)) != GOLDEN_PACKAGES


def test_two_installs_into_one_path_have_one_digest(pristine: Installed, vchannel: Path,
                                                    wheel: Path, rattler_cache: Path,
                                                    tmp_path: Path) -> None:
    """Install, digest, delete, install again at the same path: both digests are equal; at
    another path (the pristine prefix) the package digest is equal, the environment's not."""
    prefix = tmp_path / "env"
    install_env(vchannel, wheel, prefix, rattler_cache)
    first = prefix_digests(prefix)
    shutil.rmtree(prefix)
    install_env(vchannel, wheel, prefix, rattler_cache)
    assert prefix_digests(prefix) == first
    elsewhere = prefix_digests(pristine.prefix)
    assert elsewhere["packages"] == first["packages"]
    assert elsewhere["environment"] != first["environment"]  # share/vfa/config.txt


def test_prefix_digests_contract(pristine: Installed) -> None:
    """prefix_digests gives the two sha256 hex digests verify env prints."""
    got = prefix_digests(pristine.prefix)
    assert set(got) == {"environment", "packages"}
    assert all(len(v) == 64 and int(v, 16) >= 0 for v in got.values())
    assert got == digests(build_manifest(pristine.prefix, jobs=2))


def test_entries_sort_by_their_paths_bytes_whatever_the_characters() -> None:
    """The manifest's and the digests' order is the paths' bytes. ASCII text is compared as
    text (no encoding of every path); text with any other character, an undecodable byte
    among them (a surrogate escape sorts between U+D7FF and U+E000 as text, at 0x80-0xFF as
    a byte), is sorted by its bytes."""
    from verify.env.manifest import by_path_bytes

    ascii_paths = ["lib/a.py", "lib/a-b.py", "lib/a/b.py", "Z", "lib/a.b", "bin/x", "a/b_c"]
    others = ["lib/\u00e9.py", "lib/\udcff.py", "lib/\U0001f600.py", "lib/\ufffd.py",
              "lib/\ud7ff.py", "lib/z.py"]
    for paths in (ascii_paths, ascii_paths + others):
        entries = [Entry(p, "file") for p in reversed(paths)]
        assert [e.path for e in by_path_bytes(entries)] == sorted(paths, key=os.fsencode)
    assert sorted(ascii_paths + others) != sorted(ascii_paths + others, key=os.fsencode)


def test_by_path_is_made_once_per_manifest(pristine: Installed) -> None:
    """The file checks, the bytecode check and the linkage share one path index; a manifest
    made from another (``replace``, ``with_outside``) has its own, of its own entries."""
    m = build_manifest(pristine.prefix)
    first = m.by_path()
    assert first is m.by_path() and first == {e.path: e for e in m.entries}
    fewer = dataclasses.replace(m, entries=m.entries[1:])
    assert fewer.by_path() == {e.path: e for e in m.entries[1:]}
    assert m.entries[0].path in m.by_path() and m.entries[0].path not in fewer.by_path()
