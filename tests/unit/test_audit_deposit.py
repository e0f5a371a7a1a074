"""A paper's deposit archive unpacked by the package archives' rules (samebits_app.audit.deposit):
every hostile member refused by name, all of them listed, nothing written outside; links that
stay inside kept; one top folder taken as the root."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from samebits.errors import InputError
from samebits_app.audit.deposit import archive_root, unpack


def tar(path: Path, members: list[tuple[str, str, bytes | str]]) -> Path:
    """A .tar.gz of (name, kind, data): kind file, dir, sym (data: target), hard, fifo."""
    with tarfile.open(path, "w:gz") as tf:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                assert isinstance(data, bytes)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE,
                         "hard": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
            if kind in ("sym", "hard"):
                info.linkname = str(data)
            tf.addfile(info)
    return path


def zipped(path: Path, members: list[tuple[str, bytes, int]]) -> Path:
    """A zip of (name, data, unix mode); a mode with S_IFLNK is a symlink whose data is its
    target."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


GOOD = [("paper-1/", "dir", ""), ("paper-1/train.py", "file", b"print(1)\n"),
        ("paper-1/data/x.json", "file", b"{}\n"), ("paper-1/link.py", "sym", "train.py"),
        ("paper-1/copy.py", "hard", "paper-1/train.py")]


def test_a_good_tar_unpacks_with_its_one_folder_as_root(tmp_path: Path) -> None:
    """Files, folders, a symlink inside and a hard link (as a copy); the root is paper-1/."""
    dest = tmp_path / "tree"
    unpack(tar(tmp_path / "p.tar.gz", GOOD), dest)
    root = archive_root(dest)
    assert root == dest / "paper-1"
    assert (root / "train.py").read_bytes() == b"print(1)\n"
    assert os.readlink(root / "link.py") == "train.py"
    assert (root / "copy.py").read_bytes() == b"print(1)\n" and not (root / "copy.py").is_symlink()
    assert sorted(p.name for p in root.iterdir()) == ["copy.py", "data", "link.py", "train.py"]


@pytest.mark.parametrize(("members", "problems"), [
    ([("../evil.py", "file", b"x")], ["../evil.py: '..' in path"]),
    ([("/etc/evil", "file", b"x")], ["/etc/evil: absolute path"]),
    ([("p/link", "sym", "../../etc/passwd")],
     ["p/link: link escaping the prefix (../../etc/passwd)"]),
    ([("p/abs", "sym", "/etc/passwd")], ["p/abs: link to an absolute path (/etc/passwd)"]),
    ([("p/hard", "hard", "../x")], ["p/hard: hardlink to '../x': '..' in path"]),
    ([("p/pipe", "fifo", "")], ["p/pipe: device, fifo or other special file"]),
    ([("p/a", "file", b"1"), ("p/a", "file", b"2")], ["p/a: in the archive twice"]),
    ([("../a", "file", b"1"), ("p/l", "sym", "/x"), ("p/ok", "file", b"ok")],
     ["../a: '..' in path", "p/l: link to an absolute path (/x)"]),
], ids=["dotdot", "absolute", "symlink-out", "symlink-absolute", "hardlink-out", "fifo",
        "twice", "every-problem"])
def test_a_hostile_tar_is_refused_naming_every_member(tmp_path: Path, members: list,
                                                      problems: list[str]) -> None:
    """Each hostile member by name and why (all of them, not the first); nothing outside."""
    with pytest.raises(InputError) as err:
        unpack(tar(tmp_path / "bad.tar.gz", members), tmp_path / "sub" / "tree")
    text = err.value.message
    assert text.startswith("bad.tar.gz: refused, ")
    assert [ln.strip() for ln in text.splitlines()[1:]] == problems
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tar.gz", "sub"]


def test_a_link_through_a_link_that_leads_out_is_refused(tmp_path: Path) -> None:
    """A link whose text stays inside ('up/..' from p/ is p/) but which really leads out,
    through another link (up -> ..): found where it points, removed, refused."""
    members = [("p/f", "file", b"x"), ("p/up", "sym", ".."), ("p/up2", "sym", "up/..")]
    with pytest.raises(InputError) as err:
        unpack(tar(tmp_path / "x.tar.gz", members), tmp_path / "tree")
    assert err.value.message.splitlines()[1:] == [
        "  p/up2: a link that leads out of the folder ('up/..')"]
    assert not (tmp_path / "tree" / "p" / "up2").is_symlink()


def test_a_zip_with_links_and_bombs(tmp_path: Path) -> None:
    """A zip: a file and a link inside kept; a link out, a '..' name refused."""
    good = zipped(tmp_path / "g.zip", [("r/a.py", b"x = 1\n", 0o100644),
                                       ("r/run.sh", b"#!/bin/sh\n", 0o100755),
                                       ("r/b.py", b"a.py", 0o120777)])
    unpack(good, tmp_path / "g")
    root = archive_root(tmp_path / "g")
    assert os.readlink(root / "b.py") == "a.py" and os.access(root / "run.sh", os.X_OK)
    bad = zipped(tmp_path / "b.zip", [("r/../../x", b"x", 0o100644),
                                      ("r/l", b"../../etc", 0o120777)])
    with pytest.raises(InputError) as err:
        unpack(bad, tmp_path / "b")
    assert [ln.strip() for ln in err.value.message.splitlines()[1:]] == [
        "r/../../x: '..' in path", "r/l: link escaping the prefix (../../etc)"]


def test_a_zip_bomb_is_refused_by_its_declared_sizes(tmp_path: Path) -> None:
    """A member that says it inflates more than 1000 times over (and over a MiB) is refused
    before a byte of it is written."""
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("r/zeros", b"\0" * (16 << 20))
    assert zipfile.ZipFile(path).infolist()[0].compress_size < (1 << 20)
    raw = bytearray(path.read_bytes())
    at = raw.rfind(b"PK\x01\x02")  # the central directory says it inflates to 3.75 GiB
    raw[at + 24:at + 28] = (0xF0000000).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    with pytest.raises(InputError, match=r"r/zeros: inflates \d+ bytes to \d+ \(over 1000x\): "
                       "a zip bomb"):
        unpack(path, tmp_path / "tree")
    assert not (tmp_path / "tree" / "r" / "zeros").exists()


def test_not_an_archive(tmp_path: Path) -> None:
    (tmp_path / "x.tar.gz").write_bytes(b"not an archive at all")
    with pytest.raises(InputError, match=r"x.tar.gz: not a zip or tar archive"):
        unpack(tmp_path / "x.tar.gz", tmp_path / "tree")
