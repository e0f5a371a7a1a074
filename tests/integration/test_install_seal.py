"""The sealed cache: every alteration of an entry is found, links are proven by a stat, and
nothing the seal cannot vouch for escapes a hash.

The first half works on entries unpacked in this process (``samebits.install.unpack``) and
checks them with ``samebits cache verify``'s function and the install's check; the second half
runs whole installs (marked slow, as tests/test_install_cache.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from samebits.install.cache import read_entry
from samebits.install.entryfiles import CorruptEntry
from samebits.install.fetch import cache_key, prove
from samebits.install.place import Copy, Placer, place_all
from samebits.install.seal import (
    SEAL,
    SEAL_DIGEST,
    SealIndex,
    check,
    prove_placed,
    read_seal,
    reseal,
    seal_bytes,
    verify_cache,
    vouches,
)
from samebits.install.sources import Sources
from samebits.install.unpack import unpack
from tests.fixtures.install import locked_wheel, wheel, write_lock

ROOT = Path(__file__).resolve().parents[2]
LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
FILES = {"alpha/__init__.py": b"A = 1\n", "alpha/data.bin": bytes(range(256)) * 64,
         "alpha/tool.so": b"\x7fELF" + b"\0" * 60}


def _entry(tmp_path: Path, name: str = "alpha"):
    """A wheel proved and unpacked into ``tmp_path/cache``: (cache, entry)."""
    w = wheel(tmp_path / "wheels", name, "1.0", {k.replace("alpha", name): v
                                                  for k, v in FILES.items()})
    p = locked_wheel(w)
    cache = tmp_path / "cache"
    fetched = prove(p, cache, sources=Sources(find_links=(w.parent,)))
    return cache, unpack(fetched, cache)


def test_a_second_unpack_keeps_the_entry_another_process_published(tmp_path: Path) -> None:
    """Two installs sharing a cache (a cluster's, issue 43's Slurm run): one found no entry
    and unpacks while the other has published it and links from it. The second unpack returns
    the published entry, the very folder (it used to evict it and publish its own, and the
    first install's check failed with 'seal.lock: No such file'); an entry renamed away from
    under a reader is EntryGone, which the install reads again rather than evicting."""
    from samebits.install.cache import evict
    from samebits.install.entryfiles import EntryGone

    w = wheel(tmp_path / "wheels", "alpha", "1.0", FILES)
    p = locked_wheel(w)
    cache = tmp_path / "cache"
    fetched = prove(p, cache, sources=Sources(find_links=(w.parent,)))
    first = unpack(fetched, cache)
    linked = tmp_path / "prefix-data.bin"  # as an install links it: the inode stays alive
    os.link(first.tree / "alpha/data.bin", linked)
    again = unpack(fetched, cache)
    assert again.root == first.root
    assert (first.tree / "alpha/data.bin").stat().st_ino == linked.stat().st_ino
    assert check(first).hashed == 0  # still whole, its seal vouching for every file
    evict(cache / "unpacked", first.key)
    with pytest.raises(EntryGone):
        check(first)


def nfiles(entry) -> int:
    return sum(1 for m in entry.members if m.type == "file")  # the dist-info's too


def _restore_times(path: Path, st: os.stat_result) -> None:
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def content_in_place(entry) -> None:
    """One byte flipped in place: the same inode, size and mode, and mtime set back."""
    path = entry.tree / "alpha/data.bin"
    st = path.stat()
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    with open(path, "r+b") as f:
        f.write(data)
    os.chmod(path, 0o444)
    _restore_times(path, st)


def mode_changed(entry) -> None:
    os.chmod(entry.tree / "alpha/__init__.py", 0o644)


def seal_edited(entry) -> None:
    """One number of seal.json changed, its digest left: the digest no longer matches."""
    path = entry.root / SEAL
    path.write_bytes(path.read_bytes().replace(b'"format":1', b'"format":1 '))


def seal_and_digest_forged(entry) -> None:
    """A seal naming other bytes, with a digest to match: the manifest check sees it."""
    path = entry.root / SEAL
    doc = json.loads(path.read_bytes())
    for row in doc["files"]:
        if row[0] == "alpha/data.bin":
            row[8] = "0" * 64
    data = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    path.write_bytes(data)
    (entry.root / SEAL_DIGEST).write_text(hashlib.sha256(data).hexdigest() + "\n")


def digest_edited(entry) -> None:
    (entry.root / SEAL_DIGEST).write_text("0" * 64 + "\n")


def seal_removed_digest_kept(entry) -> None:
    (entry.root / SEAL).unlink()


def other_inode(entry) -> None:
    """The file replaced by another inode: same size, mode and mtime, other bytes."""
    path = entry.tree / "alpha/data.bin"
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[7] ^= 1
    tmp = path.with_name("data.bin.new")
    tmp.write_bytes(bytes(data))
    os.chmod(tmp, 0o444)
    os.replace(tmp, path)
    _restore_times(path, st)


def manifest_edited(entry) -> None:
    path = entry.root / "manifest.json"
    path.write_bytes(path.read_bytes().replace(b'"notes":[]', b'"notes":["x"]'))


ALTERATIONS: list[tuple[str, Callable, str]] = [
    ("content changed in place, size, mode and mtime kept", content_in_place,
     "alpha/data.bin: differs from the archive"),
    ("mode changed", mode_changed, "alpha/__init__.py: mode -rw-r--r-- in the cache"),
    ("seal.json edited", seal_edited, "seal.json: seal.json hashes to"),
    ("seal.json forged with a matching digest", seal_and_digest_forged,
     "alpha/data.bin: the seal's sha256 is not the manifest's"),
    ("seal.sha256 edited", digest_edited, "seal.json: seal.json hashes to"),
    ("seal.json removed, its digest kept", seal_removed_digest_kept,
     "seal.json: seal.json is gone but seal.sha256 is there"),
    ("a file replaced by another inode", other_inode,
     "alpha/data.bin: differs from the archive"),
    ("manifest.json edited under its seal", manifest_edited, "seal.json: seal.json seals "
     "manifest"),
]


@pytest.mark.parametrize(("alter", "why"), [a[1:] for a in ALTERATIONS],
                         ids=[a[0] for a in ALTERATIONS])
def test_each_alteration_is_found_and_evicted(tmp_path: Path, alter: Callable,
                                              why: str) -> None:
    """install's check refuses the entry naming the problem, and `samebits cache verify`'s
    check evicts it; an untouched neighbour stays."""
    cache, entry = _entry(tmp_path)
    _, other = _entry(tmp_path, "beta")
    assert check(entry).vouched == nfiles(entry)
    alter(entry)
    fresh = read_entry(cache, entry.key, entry.filename)
    if fresh is not None:  # an edited manifest still reads: the seal names its bytes
        with pytest.raises(CorruptEntry) as err:
            check(fresh)
        assert why in str(err.value)
    report = verify_cache(cache)
    assert report.exit_code == 1
    assert [(k, f) for k, f, _ in report.evicted] == [(entry.key, entry.filename)]
    assert why in report.evicted[0][2]
    assert not entry.root.exists() and other.root.exists()
    assert verify_cache(cache).exit_code == 0


def test_a_seal_row_of_the_wrong_type_vouches_for_nothing(tmp_path: Path) -> None:
    """A seal's rows are taken as JSON typed them (``read_seal``): a stat field written as
    text never equals a stat, so that file is hashed (and sealed again from the hash); a
    sha256 that is not text, or a row of another length, makes the seal unreadable."""
    cache, entry = _entry(tmp_path)

    def edit(change: Callable[[list], None]) -> None:
        doc = json.loads((entry.root / SEAL).read_bytes())
        change(doc["files"])
        data = json.dumps(doc).encode()
        (entry.root / SEAL).write_bytes(data)
        (entry.root / SEAL_DIGEST).write_text(hashlib.sha256(data).hexdigest() + "\n")

    def size_as_text(rows: list) -> None:
        rows[0][3] = str(rows[0][3])

    edit(size_as_text)
    got = check(entry)
    assert (got.hashed, got.vouched) == (1, nfiles(entry) - 1)
    assert check(entry).vouched == nfiles(entry)  # sealed again from the hash
    for change in (lambda rows: rows[0].__setitem__(8, 0), lambda rows: rows[0].pop()):
        edit(change)
        with pytest.raises(CorruptEntry, match="unreadable"):
            check(entry)


def test_untouched_entries_are_sound_by_stat_alone(tmp_path: Path) -> None:
    """The control: nothing hashed, nothing evicted, the seal unchanged."""
    cache, entry = _entry(tmp_path)
    before = (entry.root / SEAL).read_bytes()
    report = verify_cache(cache)
    assert (report.exit_code, report.hashed, report.evicted, report.resealed) == (0, 0, [], [])
    assert verify_cache(cache, full=True).hashed == nfiles(entry)
    assert (entry.root / SEAL).read_bytes() == before


def test_a_link_is_accepted_and_resealed(tmp_path: Path) -> None:
    """A hardlink made to a cache file moves its ctime and link count: the seal vouches (links
    came), reseal writes the new stat, and the seal is strict again afterwards."""
    cache, entry = _entry(tmp_path)
    src = entry.tree / "alpha/data.bin"
    os.link(src, tmp_path / "linked")
    sealed = read_seal(entry.root, entry.key, entry.manifest_sha256).files["alpha/data.bin"]
    st = src.stat()
    assert st.st_ctime_ns != sealed.ctime_ns or st.st_nlink != sealed.nlink
    assert vouches(sealed, st)
    assert reseal(entry, ["alpha/data.bin"]) == 1
    now = read_seal(entry.root, entry.key, entry.manifest_sha256).files["alpha/data.bin"]
    assert (now.ctime_ns, now.nlink) == (st.st_ctime_ns, 2)
    result = check(entry)
    assert (result.vouched, result.relinked, result.hashed) == (nfiles(entry), 0, 0)


def test_reseal_after_a_link_went_and_came(tmp_path: Path) -> None:
    """A prefix removed (a link went) and the file linked again (one came): the link count is
    the sealed one, only the ctime moved. check vouches for nothing it cannot (the ctime
    alone moved: hashed), but an install that has just linked the file re-seals it."""
    cache, entry = _entry(tmp_path)
    src = entry.tree / "alpha/data.bin"
    os.link(src, tmp_path / "first")
    assert reseal(entry, ["alpha/data.bin"]) == 1
    os.unlink(tmp_path / "first")
    os.link(src, tmp_path / "second")
    sealed = read_seal(entry.root, entry.key, entry.manifest_sha256).files["alpha/data.bin"]
    assert src.stat().st_nlink == sealed.nlink and not vouches(sealed, src.stat())
    assert reseal(entry, ["alpha/data.bin"]) == 1
    assert check(entry).hashed == 0


def test_a_moved_ctime_without_a_link_is_hashed(tmp_path: Path) -> None:
    """chmod and back (the same mode, the ctime moved, no link): the seal cannot vouch, so
    the file is hashed; its bytes are the manifest's, so it is sealed again, not evicted."""
    cache, entry = _entry(tmp_path)
    path = entry.tree / "alpha/data.bin"
    os.chmod(path, 0o644)
    os.chmod(path, 0o444)
    result = check(entry)
    assert (result.vouched, result.hashed) == (nfiles(entry) - 1, 1)
    assert check(entry).hashed == 0  # sealed again


def test_a_copied_cache_is_hashed_and_resealed(tmp_path: Path) -> None:
    """Every inode new (a cache copied to another disk): every file hashed, none evicted."""
    import shutil

    cache, entry = _entry(tmp_path)
    moved = tmp_path / "moved"
    shutil.copytree(cache, moved, copy_function=shutil.copy2)
    report = verify_cache(moved)
    assert (report.exit_code, report.hashed, report.resealed) == (0, nfiles(entry),
                                                                  [entry.key])
    assert verify_cache(moved).hashed == 0


def test_an_entry_of_an_older_samebits_is_sealed_from_hashes(tmp_path: Path) -> None:
    cache, entry = _entry(tmp_path)
    (entry.root / SEAL).unlink()
    (entry.root / SEAL_DIGEST).unlink()
    result = check(entry)
    assert result.sealed_now and result.hashed == nfiles(entry)
    assert check(entry).vouched == nfiles(entry)


def test_the_documented_window(tmp_path: Path) -> None:
    """Pinned, as the seal's docstring states it: a write in place that keeps the size, sets
    mtime back to the nanosecond *and* comes with a link count change is not seen by a stat;
    `cache verify --full` (every byte hashed) finds it."""
    cache, entry = _entry(tmp_path)
    content_in_place(entry)
    os.link(entry.tree / "alpha/data.bin", tmp_path / "a-link")
    assert verify_cache(cache).exit_code == 0
    report = verify_cache(cache, full=True)
    assert report.exit_code == 1 and "differs from the archive" in report.evicted[0][2]


def test_the_seal_is_byte_stable(tmp_path: Path) -> None:
    """The same inodes give the same seal bytes, whoever writes them and in what order."""
    cache, entry = _entry(tmp_path)
    seal = read_seal(entry.root, entry.key, entry.manifest_sha256)
    assert seal is not None
    data = (entry.root / SEAL).read_bytes()
    assert seal_bytes(entry.key, seal.manifest, dict(reversed(list(seal.files.items())))) == data
    os.link(entry.tree / "alpha/data.bin", tmp_path / "x")
    os.unlink(tmp_path / "x")
    reseal(entry, ["alpha/data.bin"])
    first = (entry.root / SEAL).read_bytes()
    reseal(entry, ["alpha/data.bin"])
    assert (entry.root / SEAL).read_bytes() == first


def test_a_seal_just_written_reads_back_as_its_bytes_parse(tmp_path: Path) -> None:
    """write_seal keeps what it wrote, so this install's verify does not parse it again:
    what it hands back is what parsing the bytes on disk gives, and other bytes on disk
    (the seal rewritten by someone else, digest and all) are parsed, not taken from memory."""
    from samebits.install import seal as sealmod

    cache, entry = _entry(tmp_path)
    os.link(entry.tree / "alpha/data.bin", tmp_path / "x")
    reseal(entry, ["alpha/data.bin"])  # written now, with the new link count
    kept = read_seal(entry.root, entry.key, entry.manifest_sha256)
    sealmod._PARSED.clear()
    parsed = read_seal(entry.root, entry.key, entry.manifest_sha256)
    assert kept == parsed and kept.files["alpha/data.bin"].nlink == 2
    other = dict(parsed.files)
    other["alpha/data.bin"] = other["alpha/data.bin"]._replace(size=1)
    data = seal_bytes(entry.key, parsed.manifest, other)
    (entry.root / SEAL).write_bytes(data)
    (entry.root / SEAL_DIGEST).write_text(hashlib.sha256(data).hexdigest() + "\n")
    assert read_seal(entry.root, entry.key, entry.manifest_sha256).files == other


def test_seals_read_ahead_are_taken_only_while_their_bytes_are_the_same(
        tmp_path: Path) -> None:
    """``read_ahead`` (install, while its forked check works) parses an entry's seal into
    the memo its verify's ``SealIndex.load`` then finds; a seal rewritten since, digest and
    all (in place, and through a link to the seal file), is parsed again, never taken from
    memory; an entry whose lock another process holds is skipped at once, not waited for."""
    import fcntl

    from samebits.install import seal as sealmod
    from samebits.install.seal import SEAL_LOCK, read_ahead

    cache, entry = _entry(tmp_path)
    sealmod._PARSED.clear()
    read_ahead([entry])
    (ahead,) = sealmod._PARSED.values()
    assert read_seal(entry.root, entry.key, entry.manifest_sha256) is ahead
    index = SealIndex.load(cache, [entry.key])
    src = entry.tree / "alpha/__init__.py"
    assert index.lookup(src.stat()).sha256 == ahead.files["alpha/__init__.py"].sha256

    def rewritten(path: Path, size: int) -> None:
        other = dict(ahead.files)
        other["alpha/__init__.py"] = other["alpha/__init__.py"]._replace(size=size)
        data = seal_bytes(entry.key, ahead.manifest, other)
        path.write_bytes(data)  # in place: the same inode, other bytes
        (entry.root / SEAL_DIGEST).write_text(hashlib.sha256(data).hexdigest() + "\n")

    for n, path in enumerate((entry.root / SEAL, tmp_path / "seal-link"), 1):
        if path.name == "seal-link":
            os.link(entry.root / SEAL, path)  # written through another name of the file
        sealmod._PARSED.clear()
        read_ahead([entry])
        rewritten(path, 1000 + n)
        again = read_seal(entry.root, entry.key, entry.manifest_sha256)
        assert again is not ahead and again.files["alpha/__init__.py"].size == 1000 + n
        assert SealIndex.load(cache, [entry.key]).lookup(src.stat()) is None  # not vouched
    sealmod._PARSED.clear()
    fd = os.open(entry.root / SEAL_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process's (flock: this fd, not this pid)
        read_ahead([entry])
        assert sealmod._PARSED == {}
    finally:
        os.close(fd)


def test_seal_index_vouches_only_for_sealed_unchanged_inodes(tmp_path: Path) -> None:
    cache, entry = _entry(tmp_path)
    index = SealIndex.load(cache, [entry.key, "0" * 64])
    assert index.entries == (entry.key,)
    src = entry.tree / "alpha/__init__.py"
    assert index.lookup(src.stat()).sha256 == hashlib.sha256(b"A = 1\n").hexdigest()
    copy = tmp_path / "copy.py"
    copy.write_bytes(src.read_bytes())
    assert index.lookup(copy.stat()) is None       # the same bytes, another inode
    moved = tmp_path / "moved-away"
    os.link(src, moved)  # the same inode, two more links, and none at the sealed path: its
    os.link(src, tmp_path / "another")  # stat alone would vouch (links came and went)
    os.unlink(src)
    assert vouches(read_seal(entry.root, entry.key, entry.manifest_sha256)
                   .files["alpha/__init__.py"], moved.stat())
    assert index.lookup(moved.stat()) is None
    digest_edited(entry)
    refused = SealIndex.load(cache, [entry.key])
    assert refused.entries == () and refused.refused[0][0] == entry.key


def test_what_install_just_linked_is_proven_by_one_stat_and_resealed_from_it(
        tmp_path: Path) -> None:
    """Install's own verify knows which prefix paths it has just linked from which cache
    files (``Placed``): ``prove_placed`` stats each prefix path once, proves it by reseal's
    rule (the sealed inode, size, mtime and mode; linking moved its ctime), even where a link
    went and came (the sealed link count, only the ctime moved), and ``reseal`` then writes
    exactly that stat. A file linked and then rewritten through the link (its mtime moved),
    one replaced by another inode with the same bytes, and one gone are not proven; one whose
    cache file no seal was read for is left to the walk."""
    cache, entry = _entry(tmp_path)
    data, init = entry.source("alpha/data.bin"), entry.source("alpha/__init__.py")
    tool = entry.source("alpha/tool.so")
    os.link(data, tmp_path / "old")
    assert reseal(entry, ["alpha/data.bin"]) == 1
    os.unlink(tmp_path / "old")  # a previous prefix removed ...
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    os.link(data, prefix / "data.bin")  # ... and the new one linked: nlink as sealed
    os.link(init, prefix / "init.py")
    os.link(tool, prefix / "tool.so")
    sealed = read_seal(entry.root, entry.key, entry.manifest_sha256).files
    st = os.lstat(prefix / "data.bin")
    assert st.st_nlink == sealed["alpha/data.bin"].nlink
    index = SealIndex.load(cache, [entry.key])
    assert index.lookup(st) is None  # ctime alone moved: a walk's stat would not vouch
    assert index.at(data) == (sealed["alpha/data.bin"], str(entry.root))
    paths = {"data.bin": data, "init.py": init, "tool.so": tool}
    assert prove_placed(str(prefix), paths, index) == (
        [], {data: st, init: os.lstat(prefix / "init.py"), tool: os.lstat(prefix / "tool.so")})
    failed, seen = prove_placed(str(prefix), {"data.bin": data}, index)
    assert reseal(entry, ["alpha/data.bin"], seen) == 1
    now = read_seal(entry.root, entry.key, entry.manifest_sha256).files
    assert (now["alpha/data.bin"].ctime_ns, now["alpha/data.bin"].nlink) == (
        st.st_ctime_ns, st.st_nlink)
    assert now["alpha/__init__.py"] == sealed["alpha/__init__.py"]  # not seen: as sealed

    os.chmod(init, 0o644)  # rewritten through the link after linking: mtime moves
    with open(init, "r+b") as f:
        f.write(b"B")
    os.chmod(init, 0o444)
    os.unlink(prefix / "tool.so")  # another inode, the same bytes, the same mode
    (prefix / "tool.so").write_bytes(FILES["alpha/tool.so"])
    os.chmod(prefix / "tool.so", os.lstat(tool).st_mode & 0o7777)
    os.unlink(prefix / "data.bin")  # gone
    failed, seen = prove_placed(str(prefix), paths, index)
    assert sorted(failed) == ["data.bin", "init.py", "tool.so"] and seen == {}
    unknown = {"elsewhere.bin": str(tmp_path / "not-in-any-seal")}
    assert prove_placed(str(prefix), unknown, index) == ([], {})
    assert index.at(unknown["elsewhere.bin"]) is None


RESEAL_IN_A_CHILD = """
import json, os, sys
from pathlib import Path
from samebits.install import resealing
from samebits.install.cache import read_entry
from samebits.install.seal import SealIndex, entry_lock
from samebits.host import thread_count

cache, key, prefix, wait = Path(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
entry = read_entry(cache, key, None)
data = entry.source("alpha/data.bin")
resealing.WAIT_LIMIT = wait
job = [(entry, ("alpha/data.bin",))]
before = thread_count()
r = resealing.Resealer(job, {"linked": data}, prefix)
seals = SealIndex.load(cache, [key])
if wait < 1:  # held here: the child waits on it past its limit
    with entry_lock(entry.root, exclusive=True):
        r.start(seals)
        forked = r.pid is not None
        unproven = r.unproven()
else:
    r.start(seals)
    forked = r.pid is not None
    unproven = r.unproven()
print(json.dumps({"threads": before, "forked": forked, "unproven": unproven,
                  "got": list(r.finish())}))
"""


def _reseal_in_a_fresh_process(cache: Path, key: str, prefix: Path, wait: float) -> dict:
    """``Resealer`` in a fresh interpreter with only its main thread (a pytest process may
    hold threads of its own, and xdist's always does: there it would not fork)."""
    proc = subprocess.run([sys.executable, "-c", RESEAL_IN_A_CHILD, str(cache), key,
                           str(prefix), str(wait)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_proof_and_reseal_run_in_a_child_while_the_verify_goes_on(tmp_path: Path) -> None:
    """``Resealer``: forked once the verify has read the seals, the child proves the linked
    path and writes the seal the parent reads back and counts; with another thread alive the
    proof and the re-seal run in this process instead (no fork); a child that outlives its
    limit is killed, its proof made here, said, and the seal is left as it was; a path
    rewritten after linking is named unproven."""
    import threading

    from samebits.install import resealing

    cache, entry = _entry(tmp_path)
    data = entry.source("alpha/data.bin")
    os.link(data, tmp_path / "linked")
    st = os.lstat(data)
    got = _reseal_in_a_fresh_process(cache, entry.key, tmp_path, resealing.WAIT_LIMIT)
    assert got == {"threads": 1, "forked": True, "unproven": [], "got": [1, ""]}
    now = read_seal(entry.root, entry.key, entry.manifest_sha256).files["alpha/data.bin"]
    assert (now.ctime_ns, now.nlink) == (st.st_ctime_ns, 2)

    os.link(data, tmp_path / "again")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        here = resealing.Resealer([(entry, ("alpha/data.bin",))], {"again": data},
                                  str(tmp_path))
        here.start(SealIndex.load(cache, [entry.key]))
        assert here.pid is None  # a thread besides this one: no fork
        assert here.unproven() == []
        assert here.finish() == (1, "")
    finally:
        stop.set()
        other.join()
    assert read_seal(entry.root, entry.key, entry.manifest_sha256).files[
        "alpha/data.bin"].nlink == 3

    os.link(data, tmp_path / "third")
    before = (entry.root / SEAL).read_bytes()
    got = _reseal_in_a_fresh_process(cache, entry.key, tmp_path, 0.5)
    assert got["unproven"] == [] and got["got"][0] == 0 and "not refreshed" in got["got"][1]
    assert (entry.root / SEAL).read_bytes() == before

    os.chmod(data, 0o644)  # written through a link after linking: not proven, not sealed
    with open(tmp_path / "linked", "r+b") as f:
        f.write(b"X")
    os.chmod(data, 0o444)
    got = _reseal_in_a_fresh_process(cache, entry.key, tmp_path, resealing.WAIT_LIMIT)
    assert got["unproven"] == ["linked"] and got["got"] == [0, ""]
    assert (entry.root / SEAL).read_bytes() == before


def _installed_and_verified(tmp_path: Path, target: str,
                            change: Callable[[Path], None] = lambda _: None):
    """``samebits install``'s own steps in this process: ``install_prefix(reseal=False)``
    of the small lock, ``change`` applied to the prefix, then ``check_env`` with what the
    install linked (``placed``): (the report, the Resealer, the install's report)."""
    from samebits.install import install_prefix
    from samebits.install.resealing import Resealer
    from samebits.lock.read import load_lock
    from verify.env.check import check_env

    lock = tmp_path / "lockfiles" / "small.conda-lock.yml"
    if not lock.exists():
        small_lock(tmp_path)
    env, prefix = load_lock(lock), tmp_path / target
    report = install_prefix(env, "linux-64", prefix, final=str(prefix), cache=tmp_path / "cache",
                            interpreter=sys.executable, reseal=False,
                            sources=Sources(find_links=(tmp_path / "wheels",)))
    change(prefix)
    resealer = Resealer(report.to_reseal, report.linked, str(prefix))
    verdict = check_env(prefix, lockfile=lock, platform="linux-64", cache=tmp_path / "cache",
                        trust_seal=report.sealed_entries, loaded=env, linkage=False,
                        coverage=False, placed=resealer)
    return verdict, resealer, report


def test_install_s_verify_takes_linked_files_only_once_a_stat_proves_each(
        tmp_path: Path) -> None:
    """Install's own verify (``check_env`` with ``placed``) takes every file the install
    linked from its seal, and its report stands only once a stat of each proves it: untouched,
    identical with every linked file proven by identity and re-sealed from those stats. A
    file rewritten through its link before that stat (its mtime moved) is not taken: the
    verify runs again with a stat of every file and names it. A linked file replaced by
    another inode with the same bytes is no finding: the second run hashes it."""
    verdict, resealer, report = _installed_and_verified(tmp_path, "env")
    linked = report.placed["hardlink"]
    assert len(report.linked) == linked and all(
        (tmp_path / "env" / rel).stat().st_ino == os.stat(src).st_ino
        for rel, src in report.linked.items())
    assert verdict.identical and verdict.proof is not None
    assert verdict.proof["by_identity"] == linked and resealer.finish() == (linked, "")

    def rewrite(prefix: Path) -> None:
        placed = prefix / SITE / "alpha" / "data.bin"
        os.chmod(placed, 0o644)
        with open(placed, "r+b") as f:
            f.write(b"\xff")
        os.chmod(placed, 0o444)

    verdict, resealer, _ = _installed_and_verified(tmp_path, "env2", rewrite)
    assert resealer.unproven() == [f"{SITE}/alpha/data.bin"]  # so the verify ran again
    assert not verdict.identical and verdict.exit_code == 1
    assert ("modified", f"{SITE}/alpha/data.bin") in {
        (f.kind, f.path) for f in verdict.findings}
    assert verdict.proof is not None and verdict.proof["by_identity"] < linked
    assert any(n.startswith(f"1 file the install linked (first: {SITE}/alpha/data.bin)")
               and "every file checked again" in n for n in verdict.notes), verdict.notes

    def replace(prefix: Path) -> None:
        placed = prefix / SITE / "alpha" / "__init__.py"
        mode = placed.stat().st_mode & 0o7777
        placed.unlink()
        placed.write_bytes(FILES["alpha/__init__.py"])
        placed.chmod(mode)

    verdict, _, _ = _installed_and_verified(tmp_path, "env3", replace)
    assert verdict.identical and verdict.proof is not None
    assert verdict.proof["by_identity"] == linked - 1


# ---------------------------------------------------------------------------------- placing

def _jobs(entry) -> list[Copy]:
    return [Copy(entry.source(m.path), m.path, m.exec, m.size) for m in entry.members]


def test_auto_links_on_one_filesystem(tmp_path: Path) -> None:
    """auto: a hardlink where the cache and the prefix share a filesystem that does not
    clone (ext4, tmpfs), a reflink where it does; never a copy there."""
    cache, entry = _entry(tmp_path)
    placer = Placer("auto")
    place_all(_jobs(entry), str(tmp_path / "prefix"), placer)
    assert set(placer.methods) in ({"hardlink"}, {"reflink"})
    if "hardlink" in placer.methods:
        assert (tmp_path / "prefix/alpha/data.bin").stat().st_ino == \
            (entry.tree / "alpha/data.bin").stat().st_ino
        assert sorted(placer.linked) == sorted(entry.source(m.path) for m in entry.members)


def test_auto_copies_across_filesystems(tmp_path: Path) -> None:
    """The prefix on another filesystem than the cache: every file copied, its own inode."""
    other = Path("/dev/shm")
    if not other.is_dir() or os.stat(other).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem (/dev/shm) beside the test's temporary folder")
    import tempfile

    cache, entry = _entry(tmp_path)
    with tempfile.TemporaryDirectory(dir=other) as prefix:
        placer = Placer("auto")
        place_all(_jobs(entry), prefix, placer)
        assert placer.methods == {"copy": nfiles(entry)} and placer.linked == []
        assert os.stat(f"{prefix}/alpha/data.bin").st_mode & 0o777 == 0o644


def test_copy_mode_never_links(tmp_path: Path) -> None:
    cache, entry = _entry(tmp_path)
    placer = Placer("copy")
    place_all(_jobs(entry), str(tmp_path / "prefix"), placer)
    assert placer.methods == {"copy": nfiles(entry)}


# --------------------------------------------------------------------------- whole installs

def samebits(*args: str, cwd: Path, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "SAMEBITS_FIND_LINKS": str(cwd.parent),
               **(env or {})}
    return subprocess.run([sys.executable, "-m", "samebits", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=600)


def small_lock(folder: Path) -> Path:
    w1 = wheel(folder / "wheels", "alpha", "1.0", FILES)
    w2 = wheel(folder / "wheels", "beta", "2.0", {"beta/__init__.py": b"from alpha import A\n"})
    return write_lock(folder / "lockfiles" / "small.conda-lock.yml",
                      [locked_wheel(w1), locked_wheel(w2)], python=LINE).path


def install(lock: Path, target: Path, cache: Path, *extra: str) -> tuple[int, dict]:
    proc = samebits("install", str(lock), "--target", str(target), "--platform", "linux-64",
                    "--python", sys.executable, "--cache-dir", str(cache), "--json", *extra,
                    cwd=lock.parent)
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def verify(target: Path, lock: Path, cache: Path, *extra: str) -> tuple[int, dict]:
    proc = samebits("verify", "env", str(lock), "--prefix", str(target), "--platform",
                    "linux-64", "--cache-dir", str(cache), "--json", "--no-linkage", *extra,
                    cwd=lock.parent)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


SITE = f"lib/python{LINE}/site-packages"


@pytest.mark.slow
def test_links_are_proven_by_identity_copies_by_hash(tmp_path: Path) -> None:
    """The default install links every package file and every pyc (their entries are sealed
    too) and its verify proves each by a stat (the counts add up); --link-mode copy hashes
    them all; a standalone verify env hashes every byte unless told --trust-seal, and says
    which."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    rc, doc = install(lock, tmp_path / "env", cache)
    assert rc == 0 and doc["identical"] is True
    bc = doc["bytecode"]
    linked = doc["placed"]["hardlink"]
    package_files = linked - bc["compiled"] - bc["reused"]  # pycs aside
    assert package_files >= len(FILES) + 1 and bc["compiled"] >= 1
    assert doc["seal"]["resealed"] == linked
    proof = doc["verify"]["proof"]
    assert proof["trust_seal"] is True and proof["by_identity"] == linked
    rc, copied = install(lock, tmp_path / "env2", cache, "--link-mode", "copy")
    assert rc == 0 and "hardlink" not in copied["placed"]
    assert copied["verify"]["proof"]["by_identity"] == 0
    assert copied["verify"]["digests"] == doc["verify"]["digests"]
    rc, hashed = verify(tmp_path / "env", lock, cache)
    assert rc == 0 and hashed["proof"]["trust_seal"] is False
    assert hashed["proof"]["by_identity"] == 0
    rc, trusted = verify(tmp_path / "env", lock, cache, "--trust-seal")
    assert rc == 0 and trusted["proof"]["by_identity"] == linked
    assert trusted["digests"] == hashed["digests"]
    text = samebits("verify", "env", str(lock), "--prefix", str(tmp_path / "env"),
                    "--platform", "linux-64", "--cache-dir", str(cache), "--no-linkage",
                    cwd=lock.parent).stdout
    assert "every byte read (the cache's seal not trusted)" in text


@pytest.mark.slow
def test_a_write_through_a_link_is_caught_by_every_verify(tmp_path: Path) -> None:
    """A byte changed in a linked file, the mtime set back: the shared inode's ctime moved,
    so neither install's verify mode (--trust-seal) nor the plain one accepts it, and the
    next install evicts the entry and unpacks it again."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    assert install(lock, tmp_path / "env", cache)[0] == 0
    placed = tmp_path / "env" / SITE / "alpha" / "data.bin"
    st = placed.stat()
    os.chmod(placed, 0o644)
    data = bytearray(placed.read_bytes())
    data[0] ^= 1
    with open(placed, "r+b") as f:
        f.write(data)
    os.chmod(placed, 0o444)
    _restore_times(placed, st)
    for extra in ((), ("--trust-seal",)):
        rc, doc = verify(tmp_path / "env", lock, cache, *extra)
        assert rc == 1
        assert ("modified", f"{SITE}/alpha/data.bin") in {
            (f["kind"], f.get("path")) for f in doc["findings"]}
    rc, again = install(lock, tmp_path / "env2", cache)
    assert rc == 0 and again["identical"] is True
    assert again["cache"]["unpacked"] == ["alpha-1.0-py3-none-any.whl"]
    assert any("differs from the archive" in n for n in again["notes"])


@pytest.mark.slow
def test_replace_keeps_the_identity_proof(tmp_path: Path) -> None:
    """--replace removes the old linked prefix after the new one is placed: the link count
    drops under the new seal, which still vouches (links went)."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    assert install(lock, tmp_path / "env", cache)[0] == 0
    rc, doc = install(lock, tmp_path / "env", cache, "--replace")
    assert rc == 0 and doc["verify"]["proof"]["by_identity"] == doc["seal"]["resealed"] > 0


@pytest.mark.slow
def test_a_removed_prefix_and_a_new_install_keep_the_identity_proof(tmp_path: Path) -> None:
    """rm -rf of a linked prefix, then an install into the same path: the link count drops and
    comes back to what was sealed (only the ctime moved); the install that links re-seals
    every file, so its verify still proves them all by a stat."""
    import shutil

    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    rc, first = install(lock, tmp_path / "env", cache)
    assert rc == 0
    shutil.rmtree(tmp_path / "env")
    rc, doc = install(lock, tmp_path / "env", cache)
    assert rc == 0 and doc["seal"]["relinked"] > 0 and doc["seal"]["hashed"] == 0
    assert doc["verify"]["proof"]["by_identity"] == first["verify"]["proof"]["by_identity"] > 0


@pytest.mark.slow
def test_cache_verify_command(tmp_path: Path) -> None:
    """`samebits cache verify`: exit 0 and JSON when sound; exit 1 naming the entry when a
    cached file changed; the entry is gone and the next install is identical."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    assert install(lock, tmp_path / "env", cache)[0] == 0
    proc = samebits("cache", "verify", "--cache-dir", str(cache), "--json", cwd=lock.parent)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sound"] == 2
    from samebits.lock.model import parse_lock

    p = next(p for p in parse_lock(lock).packages if p.name == "alpha")
    content_in_place(read_entry(cache, cache_key(p), p.filename))
    proc = samebits("cache", "verify", "--cache-dir", str(cache), cwd=lock.parent)
    assert proc.returncode == 1
    assert "evicted    alpha-1.0-py3-none-any.whl: alpha/data.bin: differs from the " \
        "archive" in proc.stdout
    rc, doc = install(lock, tmp_path / "env2", cache)
    assert rc == 0 and doc["cache"]["unpacked"] == ["alpha-1.0-py3-none-any.whl"]


@pytest.mark.slow
def test_a_pyc_rewritten_through_its_link(tmp_path: Path) -> None:
    """The pycs are linked from sealed entries too: one rewritten in place through its link,
    its size and mtime kept, is named by verify env with and without --trust-seal, and the
    next install compiles that package's bytecode again instead of placing it (the other
    packages' pycs are placed from their entries)."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    rc, doc = install(lock, tmp_path / "env", cache)
    assert rc == 0 and doc["bytecode"]["compiled"] >= 1
    pyc = next(p for p in sorted((tmp_path / "env").rglob("*.pyc")) if p.stat().st_nlink > 1)
    rel = pyc.relative_to(tmp_path / "env").as_posix()
    st = pyc.stat()
    os.chmod(pyc, 0o644)
    data = bytearray(pyc.read_bytes())
    data[-2] ^= 0x01  # in the code object's body, the 16-byte header left alone
    pyc.write_bytes(bytes(data))
    os.chmod(pyc, st.st_mode & 0o777)
    _restore_times(pyc, st)
    for extra in ((), ("--trust-seal",)):
        rc, found = verify(tmp_path / "env", lock, cache, *extra)
        assert rc == 1, extra
        assert ("bytecode", rel) in {(f["kind"], f.get("path")) for f in found["findings"]}
    rc, again = install(lock, tmp_path / "env2", cache)
    assert rc == 0 and again["identical"] is True
    assert again["bytecode"]["compiled"] >= 1  # that package's entry, evicted
    assert (tmp_path / "env2" / rel).read_bytes() != bytes(data)
