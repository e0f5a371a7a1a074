"""verify.env.hashing and verify.env.records: parallel sha256 equals hashlib; records parse
exactly."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from verify.env.hashing import BATCH_FILES, BIG, BUFFER, FileHasher, hash_file
from verify.env.records import read_records, record_sha256

SIZES = [0, 1, 4095, BUFFER - 1, BUFFER, BUFFER + 1, 3 * BUFFER + 7, BIG + 1]


@pytest.mark.parametrize("jobs", [1, 2])
def test_hashes_equal_hashlib_for_every_size(tmp_path: Path, jobs: int) -> None:
    """Files around the buffer and batch boundaries hash exactly as hashlib does."""
    files = {}
    for i, size in enumerate(SIZES * 3):
        p = tmp_path / f"f{i}"
        p.write_bytes(os.urandom(size) if size < 64 else bytes([i % 251]) * size)
        files[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    seen: list[int] = []
    with FileHasher(jobs=jobs) as hasher:
        for p in files:
            hasher.add(p, os.path.getsize(p))
        got = hasher.wait(seen.append)
    assert [h.sha256 for h in got] == list(files.values())
    assert sum(seen) == sum(SIZES) * 3


def test_workers_start_only_for_enough_work(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Little to read (a verify whose files its seals prove) is read in this process, no
    worker started; once START_BYTES of work waits, the workers start mid-walk. The same
    hashes either way."""
    import multiprocessing

    from verify.env import hashing

    files = []
    for i in range(40):
        p = tmp_path / f"f{i}"
        p.write_bytes(os.urandom(1000 + i))
        files.append(p)
    want = [hashlib.sha256(p.read_bytes()).hexdigest() for p in files]
    for start, workers in ((1 << 30, False), (10_000, True)):
        monkeypatch.setattr(hashing, "START_BYTES", start)
        before = set(multiprocessing.active_children())
        with FileHasher(jobs=2) as hasher:
            for p in files:
                hasher.add(str(p), p.stat().st_size)
            assert bool(set(multiprocessing.active_children()) - before) is workers
            assert [h.sha256 for h in hasher.wait()] == want


def test_largest_batches_go_first(tmp_path: Path) -> None:
    """Big files are batches of their own and are hashed first; small ones share batches."""
    seen: list[int] = []
    with FileHasher(jobs=1) as hasher:
        for i in range(BATCH_FILES + 5):
            (tmp_path / f"s{i}").write_bytes(b"x" * 10)
            hasher.add(str(tmp_path / f"s{i}"), 10)
        for n, size in enumerate((BIG, 3 * BIG)):
            (tmp_path / f"b{n}").write_bytes(b"y" * size)
            hasher.add(str(tmp_path / f"b{n}"), size)
        hasher.wait(seen.append)
    assert seen == [3 * BIG, BIG, 10 * BATCH_FILES, 50]


ERRORS = [
    ("deleted after it was found", lambda p: None, "No such file or directory"),
    ("a symlink is never followed", lambda p: os.symlink("/etc/hostname", p),
     "Too many levels of symbolic links"),
]


@pytest.mark.parametrize(("name", "make", "error"), ERRORS, ids=[e[0] for e in ERRORS])
def test_unreadable_files_are_results_not_exceptions(tmp_path: Path, name: str, make,
                                                     error: str) -> None:
    """A file that cannot be opened gets an error string, and the rest still hash."""
    bad, good = tmp_path / "bad", tmp_path / "good"
    make(bad)
    good.write_bytes(b"ok")
    with FileHasher(jobs=2) as hasher:
        hasher.add(str(bad), 1)
        hasher.add(str(good), 2)
        got_bad, got_good = hasher.wait()
    assert (got_bad.sha256, got_bad.error) == (None, error)
    assert got_good.sha256 == hashlib.sha256(b"ok").hexdigest()


def test_elf_facts_come_with_the_hash(tmp_path: Path) -> None:
    """An ELF file's hash comes with its class, machine and needed libraries; text has none."""
    import sys

    elf = hash_file(os.path.realpath(sys.executable))
    text = tmp_path / "t.txt"
    text.write_text("\x7fEL")
    assert elf.elf is not None and elf.elf.elfclass in (32, 64) and elf.elf.error is None
    assert hash_file(str(text)).elf is None


@pytest.mark.parametrize(("value", "expected"), [
    ("sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU",
     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    # padded, as catboost 1.0.3's RECORD writes it: the same digest
    ("sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=",
     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("", None),
    ("sha512=abc", None),
])
def test_record_hash_values(value: str, expected: str | None) -> None:
    """RECORD's urlsafe-base64 sha256 becomes hex; no hash or another algorithm gives None."""
    assert record_sha256(value) == expected


def test_record_hash_values_decode_as_record_hash_does() -> None:
    """``record_hash`` decodes the plain form (43 urlsafe characters, padded or not) in one
    match and every other form step by step: for digests of each byte value, in either base64
    alphabet, padded or not, both give the digest's bytes, and ``record_sha256`` its hex."""
    import base64
    import hashlib

    from samebits.archives import record_hash

    for i in range(512):
        digest = hashlib.sha256(bytes([i % 256]) * (i // 256 + 1)).digest()
        for encode in (base64.urlsafe_b64encode, base64.b64encode):
            text = encode(digest).decode()
            for value in (f"sha256={text}", f"sha256={text.rstrip('=')}"):
                got = record_hash(value)
                assert got is not None and record_sha256(value) == got[1].hex() == digest.hex()


@pytest.mark.parametrize("value", ["sha256=!!!", "sha256=AAAA",
                                   "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU!!"])
def test_bad_record_hash_values_raise(value: str) -> None:
    """A sha256 that does not decode to 32 bytes is an error, not a silent pass."""
    with pytest.raises(ValueError, match="bad sha256"):
        record_sha256(value)


def _dist(prefix: Path, record: str) -> None:
    d = prefix / "lib/python3.11/site-packages/p-1.0.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: p\nVersion: 1.0\n\nbody\n")
    (d / "WHEEL").write_text("Wheel-Version: 1.0\nTag: py3-none-any\n")
    (d / "RECORD").write_text(record)


def test_record_rows(tmp_path: Path) -> None:
    """Rows become claims at prefix-relative paths; bad rows become problems; paths out of the
    prefix are skipped."""
    prefix = tmp_path / "env"
    _dist(prefix, "p/a.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
                  "../../../bin/p,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
                  "p/b.py,sha256=!!,3\n"
                  "/etc/p.conf,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
                  f"{prefix}/share/p.txt,,\n"
                  "p-1.0.dist-info/RECORD,,\n")
    rec = read_records(prefix)
    sp = "lib/python3.11/site-packages"
    assert {k: (c[0].sha256 is not None, c[0].unhashed) for k, c in rec.claims.items()} == {
        f"{sp}/p/a.py": (True, None), "bin/p": (True, None), f"{sp}/p/b.py": (False,
                                                                           "RECORD hash sha256"),
        "share/p.txt": (False, "no hash in RECORD"),
        f"{sp}/p-1.0.dist-info/RECORD": (False, "no hash in RECORD")}
    assert [(p.record, p.message) for p in rec.problems] == [
        (f"{sp}/p-1.0.dist-info/RECORD", "line 3: bad sha256 '!!'")]
    (pkg,) = rec.packages
    assert (pkg.id, pkg.tags) == ("pip:p==1.0", ("py3-none-any",))


def test_a_folders_row_claims_no_file(tmp_path: Path) -> None:
    """PyPI's cmake 3.26.3 (triton 2.0.0's requirement: every torch 2.0 environment) lists
    its folders in RECORD, ``cmake/,,`` among them, and pip copies those rows: verify env of a
    pip environment called cmake missing three times. A folder's row names no file."""
    prefix = tmp_path / "env"
    _dist(prefix, "p/a.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
                  "p-1.0.dist-info/,,\np/,,\np.libs/,,\np-1.0.dist-info/RECORD,,\n")
    rec = read_records(prefix)
    sp = "lib/python3.11/site-packages"
    assert sorted(rec.claims) == [f"{sp}/p-1.0.dist-info/RECORD", f"{sp}/p/a.py"]
    assert rec.problems == ()


CONDA_ENTRIES = [
    ("plain file", {"_path": "a", "path_type": "hardlink", "sha256": "1" * 64,
                    "size_in_bytes": 3}, ("file", "1" * 64, None)),
    ("rewritten, with sha256_in_prefix", {"_path": "a", "path_type": "hardlink",
                                          "sha256": "1" * 64, "sha256_in_prefix": "2" * 64,
                                          "prefix_placeholder": "/opt/x"},
     ("file", "2" * 64, None)),
    ("rewritten, without sha256_in_prefix", {"_path": "a", "path_type": "hardlink",
                                             "sha256": "1" * 64, "prefix_placeholder": "/x"},
     ("file", None, "prefix rewritten and no sha256_in_prefix recorded")),
    ("softlink", {"_path": "a", "path_type": "softlink", "sha256": "1" * 64,
                  "sha256_in_prefix": "3" * 64}, ("symlink", "3" * 64, None)),
    ("no hash", {"_path": "a", "path_type": "hardlink"},
     ("file", None, "no sha256 in conda-meta")),
]


@pytest.mark.parametrize(("name", "entry", "expected"), CONDA_ENTRIES,
                         ids=[c[0] for c in CONDA_ENTRIES])
def test_conda_paths_data_entries(tmp_path: Path, name: str, entry: dict,
                                  expected: tuple) -> None:
    """Each paths_data entry becomes a claim with the hash the installed file must have."""
    (tmp_path / "conda-meta").mkdir()
    (tmp_path / "conda-meta/x-1-0.json").write_text(json.dumps({
        "name": "x", "version": "1", "build": "0",
        "paths_data": {"paths_version": 1, "paths": [entry]}}))
    (claim,) = read_records(tmp_path).claims["a"]
    assert (claim.type, claim.sha256, claim.unhashed) == expected
    assert claim.package == "conda:x-1-0"
