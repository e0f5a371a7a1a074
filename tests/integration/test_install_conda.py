"""Conda packages: samebits links a cache entry the way py-rattler links the archive."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samebits.install import install_prefix
from samebits.install.placeholder import (
    PlaceholderError,
    replace_binary,
    replace_shebang,
    replace_text,
)
from samebits.install.sources import Sources
from tests.fixtures.install import PLACEHOLDER, CondaPkg, locked_conda, write_channel, write_lock

LONG = "/" + "x" * 140


def packages(fmt: str) -> list[CondaPkg]:
    """python (as conda ships it: bin/python a link), and every feature the linker handles."""
    script = f"#!{PLACEHOLDER}/bin/python3.12 -E\nprint('{PLACEHOLDER}/lib')\n".encode()
    binary = b"\x7fELF\0\0" + f"{PLACEHOLDER}/lib:{PLACEHOLDER}/lib64".encode() + b"\0tail\0"
    return [
        CondaPkg(name="python", version="3.12.7", fmt=fmt,
                 files={"bin/python3.12": b"#!/bin/sh\necho python\n",
                        "lib/python3.12/os.py": b"# os\n"},
                 executables=("bin/python3.12",),
                 symlinks={"bin/python": "python3.12", "bin/python3": "python3.12"}),
        CondaPkg(name="tool", version="1.0", fmt=fmt, depends=("python",),
                 files={"bin/tool": script, "lib/libtool.so.1": binary,
                        "share/tool/config.txt": f"prefix={PLACEHOLDER}\n".encode(),
                        "share/tool/plain.txt": b"no placeholder\n"},
                 executables=("bin/tool", "lib/libtool.so.1"),
                 symlinks={"lib/libtool.so": "libtool.so.1"},
                 placeholders={"bin/tool": "text", "lib/libtool.so.1": "binary",
                               "share/tool/config.txt": "text"}),
        CondaPkg(name="purepy", version="2.0", build="pyh0_0", subdir="noarch", noarch="python",
                 fmt=fmt, depends=("python >=3.8",),
                 files={"site-packages/purepy/__init__.py": b"def main():\n    return 0\n",
                        "python-scripts/purepy-run": b"#!/usr/bin/env python\n"},
                 executables=("python-scripts/purepy-run",),
                 entry_points=("purepy = purepy:main",)),
    ]


def _rattler_install(archives: list[Path], where: Path, final: str, cache: Path) -> None:
    import rattler

    async def go() -> None:
        records = [await rattler.RepoDataRecord.from_package_archive(a) for a in archives]
        await rattler.install(records, target_prefix=where, cache_dir=cache,
                              platform=rattler.Subdir("linux-64"),
                              execute_link_scripts=False, show_progress=False,
                              alternative_target_prefix=final)

    asyncio.run(go())


def _tree(root: Path) -> dict[str, tuple]:
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = Path(d) / n
            rel = p.relative_to(root).as_posix()
            if rel.startswith("conda-meta/") or rel == "CACHEDIR.TAG" or "__pycache__" in rel:
                continue
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("symlink", os.readlink(p))
            else:
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest(),
                            bool(st.st_mode & stat.S_IXUSR))
    return out


def _paths_data(root: Path) -> dict[str, list]:
    out = {}
    for f in sorted((root / "conda-meta").glob("*.json")):
        doc = json.loads(f.read_text())
        out[f.name] = sorted((e["_path"], e["path_type"], e.get("sha256"),
                              e.get("sha256_in_prefix"), e.get("size_in_bytes"),
                              e.get("prefix_placeholder"), e.get("file_mode"))
                             for e in doc["paths_data"]["paths"])
        out[f.name + ":files"] = sorted(doc["files"])
    return out


@pytest.mark.parametrize("fmt", [".tar.bz2", ".conda"])
def test_same_prefix_as_py_rattler(fmt: str, tmp_path: Path) -> None:
    """Files, modes, links, placeholders, noarch python and conda-meta paths_data equal
    py-rattler's install of the same archives into the same final path."""
    archives = write_channel(tmp_path / "channel", packages(fmt))
    env = write_lock(tmp_path / "lock" / "t.conda-lock.yml",
                     [locked_conda(a) for a in archives.values()])
    final = str(tmp_path / "final")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    install_prefix(env, "linux-64", ours, final=final, cache=tmp_path / "cache",
                   sources=Sources(file_roots=(tmp_path,)))
    _rattler_install(list(archives.values()), theirs, final, tmp_path / "rattler-cache")
    assert _tree(ours) == _tree(theirs)
    assert _paths_data(ours) == _paths_data(theirs)
    config = (ours / "share/tool/config.txt").read_text()
    assert config == f"prefix={final}\n"


def test_conda_meta_names_the_lock_not_the_machine(tmp_path: Path) -> None:
    """conda-meta/*.json carry the lock's URL, channel and hashes and no path of this host."""
    archives = write_channel(tmp_path / "channel", packages(".conda"))
    locked = [locked_conda(a) for a in archives.values()]
    env = write_lock(tmp_path / "t.conda-lock.yml", locked)
    cache = tmp_path / "cache"
    install_prefix(env, "linux-64", tmp_path / "env", final="/opt/env", cache=cache)
    for p in locked:
        text = (tmp_path / "env" / "conda-meta" / f"{p.name}-{p.version}-{p.build}.json"
                ).read_text()
        doc = json.loads(text)
        assert (doc["url"], doc["sha256"], doc["md5"]) == (p.url, p.sha256, p.md5)
        assert doc["channel"] == p.url.rsplit("/", 2)[0]
        assert str(cache) not in text and str(tmp_path / "env") not in text
        assert not {"extracted_package_dir", "link", "package_tarball_full_path"} & set(doc)


SHEBANGS = {
    "short": ("#!/pfx/bin/python3.12 -E", "/pfx", "/opt/env", "#!/opt/env/bin/python3.12 -E"),
    "too long, python": (
        "#!/pfx/bin/python3.12 -E", "/pfx", LONG,
        f"#!/bin/sh\n'''exec' \"{LONG}/bin/python3.12\" -E \"$0\" \"$@\" #'''"),
    "too long, other": ("#!/pfx/bin/perl -w", "/pfx", LONG, "#!/usr/bin/env perl -w"),
    "space in prefix": ("#!/pfx/bin/bash", "/pfx", "/my env", "#!/usr/bin/env bash"),
    "no placeholder": ("#!/usr/bin/env bash", "/pfx", "/my env", "#!/usr/bin/env bash"),
}


@pytest.mark.parametrize("case", sorted(SHEBANGS))
def test_shebang_rules(case: str) -> None:
    """A first line over 127 bytes or with a space becomes a trampoline or /usr/bin/env."""
    line, old, new, expected = SHEBANGS[case]
    assert replace_shebang(line, old, new) == expected


REPLACE = {
    "text, every occurrence": (replace_text, b"a=/pfx/x\nb=/pfx/y\n", "/opt/e",
                               b"a=/opt/e/x\nb=/opt/e/y\n"),
    "binary, padded in its C string": (replace_binary, b"\0/pfx/lib:/pfx/l\0end",
                                       "/o", b"\0/o/lib:/o/l\0\0\0\0\0end"),
    "binary, unterminated at the end": (replace_binary, b"x/pfx/a", "/o", b"x/o/a\0\0"),
    "binary, nothing to do": (replace_binary, b"\0abc\0", "/o", b"\0abc\0"),
}


@pytest.mark.parametrize("case", sorted(REPLACE))
def test_placeholder_replacement(case: str) -> None:
    """Text files change length; binary files keep it, NUL-padding each C string."""
    fn, data, prefix, expected = REPLACE[case]
    got = fn(data, "/pfx", prefix)
    assert got == expected
    if fn is replace_binary:
        assert len(got) == len(data)


def test_binary_placeholder_longer_prefix_refused() -> None:
    """A prefix longer than the placeholder cannot fit a binary file: a clear error."""
    with pytest.raises(PlaceholderError) as err:
        replace_binary(b"\0/pfx\0", "/pfx", "/longer")
    assert str(err.value) == ("the install path (7 bytes) is longer than the package's "
                              "placeholder (4 bytes), which a binary file cannot grow")


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=4),
       prefix=st.text(alphabet="/abcxyz_-.", min_size=1, max_size=12))
def test_binary_replacement_properties(data: bytes, cuts: list[int], prefix: str) -> None:
    """Whatever the bytes: the length is kept and each C string (the bytes between NULs) has
    every placeholder replaced by the prefix and the bytes it no longer needs as NULs at its
    end: conda's rule, written out per C string. (The prefix and the bytes after it may spell
    the placeholder again, '/' + 'pfx_placehold_...': one pass, as conda makes it.)"""
    placeholder = "/pfx_placehold_" + "p" * 12
    old, new = placeholder.encode(), prefix.encode()
    for at in sorted(cuts, reverse=True):  # the placeholder at some places in the bytes
        data = data[:at] + old + data[at:]
    out = replace_binary(data, placeholder, prefix)
    assert len(out) == len(data)
    expected = b"\0".join(s.replace(old, new) + b"\0" * (s.count(old) * (len(old) - len(new)))
                          for s in data.split(b"\0"))
    assert out == expected
    assert new in out or old not in data


def test_prefix_longer_than_a_binary_placeholder(tmp_path: Path) -> None:
    """Installing where the path is longer than a binary file's placeholder: an error naming
    the package, the archive and the file; nothing is placed."""
    from samebits.errors import InputError

    pkg = CondaPkg(name="bin", version="1.0",
                   files={"lib/libb.so": f"\0{PLACEHOLDER}\0".encode()},
                   placeholders={"lib/libb.so": "binary"})
    archives = write_channel(tmp_path / "channel", [pkg])
    env = write_lock(tmp_path / "t.conda-lock.yml", [locked_conda(archives["bin"])])
    final = "/" + "d" * 200
    with pytest.raises(InputError) as err:
        install_prefix(env, "linux-64", tmp_path / "env", final=final, cache=tmp_path / "cache")
    assert err.value.message == (
        "linux-64: bin 1.0: bin-1.0-h0_0.tar.bz2: lib/libb.so: the install path (201 bytes) "
        f"is longer than the package's placeholder ({len(PLACEHOLDER)} bytes), which a binary "
        "file cannot grow")
    assert not (tmp_path / "env").exists()
