"""The unpack cache: warm installs are the same environment, a changed entry never passes."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from samebits.install.cache import UNPACKED, read_entry
from samebits.install.entryfiles import check_tree
from samebits.install.fetch import cache_key
from tests.fixtures.install import (
    CondaPkg,
    locked_conda,
    locked_wheel,
    wheel,
    write_channel,
    write_lock,
)

# whole installs into fresh prefixes: slow, left out of CI's `nox -s tests`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"


def samebits(*args: str, cwd: Path, umask: int | None = None,
             tz: str | None = None) -> subprocess.CompletedProcess[str]:
    # the tests' locks name file:// archives beside their lockfiles/ folder: the user's own
    # folder, as SAMEBITS_FIND_LINKS names it (file:// is read only from named folders)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAMEBITS_FIND_LINKS": str(cwd.parent),
           **({"TZ": tz} if tz else {})}
    return subprocess.run([sys.executable, "-m", "samebits", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def small_lock(folder: Path, *, big: int = 0) -> Path:
    """A PyPI-only lock of two wheels (one with ``big`` extra random bytes) on this Python."""
    files = {"alpha/__init__.py": b"A = 1\n", "alpha/data.bin": os.urandom(big) or b"x"}
    w1 = wheel(folder / "wheels", "alpha", "1.0", files)
    w2 = wheel(folder / "wheels", "beta", "2.0", {"beta/__init__.py": b"from alpha import A\n"})
    env = write_lock(folder / "lockfiles" / "small.conda-lock.yml",
                     [locked_wheel(w1), locked_wheel(w2)], python=LINE)
    return env.path


def install(lock: Path, prefix: Path, cache: Path, *extra: str, umask: int | None = None,
            tz: str | None = None) -> tuple[int, dict]:
    proc = samebits("install", str(lock), "--target", str(prefix), "--platform", "linux-64",
                    "--python", sys.executable, "--cache-dir", str(cache), "--json", *extra,
                    cwd=lock.parent, umask=umask, tz=tz)
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    return proc.returncode, json.loads(proc.stdout)


def entry_of(cache: Path, lock: Path, name: str):
    from samebits.lock.model import parse_lock

    p = next(p for p in parse_lock(lock).packages if p.name == name)
    return read_entry(cache, cache_key(p), p.filename)


def test_warm_install_is_the_same_environment(tmp_path: Path) -> None:
    """The second install, every package from the cache, has the first one's environment
    digest; both verify identical."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    rc, first = install(lock, tmp_path / "env", cache)
    assert rc == 0 and first["identical"] is True
    assert first["cache"] == {"reused": 0, "unpacked": ["alpha-1.0-py3-none-any.whl",
                                                        "beta-2.0-py3-none-any.whl"]}
    rc, second = install(lock, tmp_path / "env", cache, "--replace")
    assert rc == 0 and second["cache"] == {"reused": 2, "unpacked": []}
    assert second["verify"]["digests"] == first["verify"]["digests"]


def _files(prefix: Path) -> dict[str, tuple]:
    out = {}
    for d, _, names in os.walk(prefix):
        for n in names:
            p = Path(d) / n
            st = p.lstat()
            out[p.relative_to(prefix).as_posix()] = (
                os.readlink(p) if p.is_symlink() else p.read_bytes(), st.st_mode & 0o7777)
    return out


def test_same_bytes_and_modes_whatever_the_umask(tmp_path: Path) -> None:
    """Two cold installs of one lock into one path, under umask 022 and 077 and two time
    zones, write the same files with the same bytes and modes, bytecode included."""
    lock = small_lock(tmp_path)
    trees = []
    for i, (umask, tz) in enumerate(((0o022, "UTC"), (0o077, "Asia/Kolkata"))):
        prefix = tmp_path / "env"
        if prefix.exists():
            subprocess.run(["rm", "-rf", str(prefix)], check=True)
        rc, doc = install(lock, prefix, tmp_path / f"cache{i}", umask=umask, tz=tz)
        assert rc == 0 and doc["bytecode"]["compiled"] == 2
        trees.append(_files(prefix))
    assert trees[0] == trees[1]
    # 0444: package files and pycs hardlinked from the read-only cache; 0644: the files
    # install writes (RECORD, INSTALLER, direct_url.json, pyvenv.cfg); 0777: the venv links
    assert {mode for _, mode in trees[0].values()} == {0o444, 0o644, 0o777}


CHANGES = {
    "a file": ("alpha/__init__.py",),
    "a file and its RECORD": ("alpha/__init__.py", "alpha-1.0.dist-info/RECORD"),
}


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_changed_cache_entry_is_found_before_placing(case: str, tmp_path: Path) -> None:
    """A cached file rewritten in place (with or without a RECORD to match) no longer stats as
    its seal says: the next install evicts the entry before placing anything, unpacks the
    archive again, and is identical, with a note naming the file."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    assert install(lock, tmp_path / "env", cache)[0] == 0
    entry = entry_of(cache, lock, "alpha")
    _rewrite(entry, CHANGES[case])
    rc, doc = install(lock, tmp_path / "env2", cache)
    assert rc == 0 and doc["identical"] is True
    assert doc["cache"]["unpacked"] == ["alpha-1.0-py3-none-any.whl"]
    assert [n.split(": ")[1] for n in doc["notes"]] == [CHANGES[case][-1]]
    site = f"lib/python{LINE}/site-packages"
    assert (tmp_path / "env2" / site / "alpha" / "__init__.py").read_bytes() == b"A = 1\n"


EVIL = b"A = 2\n"  # the same size as the real one: only the contents tell


def _rewrite(entry, rels: tuple[str, ...], *, keep_times: bool = False) -> None:
    """Rewrite ``rels`` of the entry in place (a RECORD to match the evil bytes), mode as it
    was, and with ``keep_times`` mtime set back to the nanosecond."""
    import base64

    for rel in rels:
        path = entry.tree / rel
        st = path.stat()
        os.chmod(path, 0o644)
        if rel.endswith("RECORD"):
            h = base64.urlsafe_b64encode(hashlib.sha256(EVIL).digest()).rstrip(b"=").decode()
            text = path.read_text().replace(
                next(r for r in path.read_text().splitlines()
                     if r.startswith("alpha/__init__.py,")),
                f"alpha/__init__.py,sha256={h},{len(EVIL)}")
            with open(path, "r+") as f:
                f.truncate()
                f.write(text)
        else:
            with open(path, "r+b") as f:
                f.write(EVIL)
        os.chmod(path, st.st_mode & 0o7777)
        if keep_times:
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_what_the_seal_cannot_see_the_verify_of_a_copy_does(tmp_path: Path) -> None:
    """The seal's documented window (a write in place that keeps size and mtime while the
    link count changes) passes the check before placing; a copy is proven by its hash, so
    the install's verify names the file and evicts the entry it came from."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    assert install(lock, tmp_path / "env", cache, "--link-mode", "copy")[0] == 0
    entry = entry_of(cache, lock, "alpha")
    _rewrite(entry, ("alpha/__init__.py",), keep_times=True)
    os.link(entry.tree / "alpha/__init__.py", tmp_path / "another-link")
    rc, doc = install(lock, tmp_path / "env2", cache, "--link-mode", "copy")
    site = f"lib/python{LINE}/site-packages"
    assert rc == 1 and doc["identical"] is False
    assert [(f["kind"], f["path"]) for f in doc["verify"]["findings"]] == [
        ("modified", f"{site}/alpha/__init__.py")]
    assert doc["evicted"] == [f"unpacked/{entry.key}"] and entry_of(cache, lock, "alpha") is None
    rc, again = install(lock, tmp_path / "env3", cache)
    assert rc == 0 and again["cache"]["unpacked"] == ["alpha-1.0-py3-none-any.whl"]


def test_missing_cache_file_is_unpacked_again(tmp_path: Path) -> None:
    """A file gone from an entry (a cleaner, a full disk) is found before placing: the entry
    is unpacked again and the install is identical, with a note saying so."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    assert install(lock, tmp_path / "env", cache)[0] == 0
    entry = entry_of(cache, lock, "beta")
    (entry.tree / "beta" / "__init__.py").unlink()
    rc, doc = install(lock, tmp_path / "env2", cache)
    assert rc == 0 and doc["cache"]["unpacked"] == ["beta-2.0-py3-none-any.whl"]
    assert doc["notes"] == ["cache entry of beta-2.0-py3-none-any.whl: beta/__init__.py: "
                            "missing from the cache: evicted and unpacked again"]


def test_changed_conda_record_is_caught_before_placing(tmp_path: Path) -> None:
    """A conda entry's info/paths.json rewritten with a file is read proved against the
    manifest: the entry is unpacked again, and the prefix is the archive's."""
    pkg = CondaPkg(name="libx", version="1.0", files={"lib/libx.so": b"real\n"})
    archives = write_channel(tmp_path / "channel", [pkg])
    p = locked_conda(archives["libx"])
    env = write_lock(tmp_path / "lockfiles" / "c.conda-lock.yml", [p])
    cache = tmp_path / "cache"
    assert install(env.path, tmp_path / "env", cache)[0] == 0
    entry = read_entry(cache, cache_key(p), p.filename)
    for rel in ("lib/libx.so", "info/paths.json"):
        os.chmod(entry.tree / rel, 0o644)
    evil = b"evil\n"  # the same size as the real one
    (entry.tree / "lib" / "libx.so").write_bytes(evil)
    paths = entry.tree / "info" / "paths.json"
    doc = json.loads(paths.read_text())
    doc["paths"][0]["sha256"] = hashlib.sha256(evil).hexdigest()
    paths.write_text(json.dumps(doc))
    rc, doc = install(env.path, tmp_path / "env2", cache)
    assert rc == 0 and doc["identical"] is True
    assert doc["cache"]["unpacked"] == [p.filename]
    assert (tmp_path / "env2" / "lib" / "libx.so").read_bytes() == b"real\n"


def test_changed_conda_file_is_found_before_placing(tmp_path: Path) -> None:
    """A conda entry's file rewritten in place (its paths.json untouched) is found by its
    seal before placing: the entry is unpacked again and the prefix is the archive's."""
    pkg = CondaPkg(name="libx", version="1.0", files={"lib/libx.so": b"real\n"})
    archives = write_channel(tmp_path / "channel", [pkg])
    p = locked_conda(archives["libx"])
    env = write_lock(tmp_path / "lockfiles" / "c.conda-lock.yml", [p])
    cache = tmp_path / "cache"
    assert install(env.path, tmp_path / "env", cache)[0] == 0
    entry = read_entry(cache, cache_key(p), p.filename)
    os.chmod(entry.tree / "lib" / "libx.so", 0o644)
    (entry.tree / "lib" / "libx.so").write_bytes(b"evil\n")
    rc, doc = install(env.path, tmp_path / "env2", cache)
    assert rc == 0 and doc["identical"] is True and doc["cache"]["unpacked"] == [p.filename]
    assert doc["notes"] == [f"cache entry of {p.filename}: lib/libx.so: mode -rw-r--r-- in the "
                            "cache, sealed -r--r--r--: evicted and unpacked again"]
    assert (tmp_path / "env2" / "lib" / "libx.so").read_bytes() == b"real\n"


def test_hardlinks_share_the_cache_and_a_write_is_caught(tmp_path: Path) -> None:
    """--link-mode hardlink: files share the cache's (read-only) inodes; a write into one
    environment changes the cache, which the next install's check of the seal finds before
    placing: the entry is unpacked again and the new environment is the archive's."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    rc, doc = install(lock, tmp_path / "env", cache, "--link-mode", "hardlink")
    assert rc == 0 and set(doc["placed"]) == {"hardlink"}
    placed = tmp_path / "env" / "lib" / f"python{LINE}" / "site-packages" / "alpha" / \
        "__init__.py"
    cached = entry_of(cache, lock, "alpha").tree / "alpha" / "__init__.py"
    assert placed.stat().st_ino == cached.stat().st_ino
    assert placed.stat().st_mode & 0o777 == 0o444
    os.chmod(placed, 0o644)
    placed.write_bytes(b"A = 3\n")
    os.chmod(placed, 0o444)
    rc, doc = install(lock, tmp_path / "env2", cache, "--link-mode", "hardlink")
    assert rc == 0 and doc["identical"] is True
    assert doc["cache"]["unpacked"] == ["alpha-1.0-py3-none-any.whl"]
    assert doc["notes"] == ["cache entry of alpha-1.0-py3-none-any.whl: alpha/__init__.py: "
                            "differs from the archive: evicted and unpacked again"]
    again = tmp_path / "env2" / placed.relative_to(tmp_path / "env")
    assert again.read_bytes() == b"A = 1\n" and placed.read_bytes() == b"A = 3\n"


def cache_key_of(lock: Path, name: str) -> str:
    from samebits.lock.model import parse_lock

    return cache_key(next(p for p in parse_lock(lock).packages if p.name == name))


def test_copies_are_their_own_files(tmp_path: Path) -> None:
    """--link-mode copy never shares an inode with the cache: a write into the
    environment leaves the cache entry as it was unpacked."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    rc, doc = install(lock, tmp_path / "env", cache, "--link-mode", "copy")
    assert rc == 0 and set(doc["placed"]) == {"copy"}
    placed = tmp_path / "env" / "lib" / f"python{LINE}" / "site-packages" / "alpha" / \
        "__init__.py"
    assert placed.stat().st_mode & 0o777 == 0o644
    placed.write_bytes(b"A = 3\n")
    entry = entry_of(cache, lock, "alpha")
    check_tree(entry)
    assert (entry.tree / "alpha" / "__init__.py").read_bytes() == b"A = 1\n"


KILL_AFTER = (0.2, 0.5, 1.0, 1.5, 2.5)


@pytest.mark.slow
def test_kill_during_fill_leaves_a_usable_cache(tmp_path: Path) -> None:
    """kill -9 at any moment of unpacking: every entry is absent or whole, and the next
    install succeeds, identical; leftover temporary folders are swept."""
    lock = small_lock(tmp_path, big=64 << 20)
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAMEBITS_FIND_LINKS": str(tmp_path)}
    for i, delay in enumerate(KILL_AFTER):
        proc = subprocess.Popen(
            [sys.executable, "-m", "samebits", "install", str(lock), "--target",
             str(tmp_path / f"k{i}"), "--platform", "linux-64", "--python", sys.executable,
             "--cache-dir", str(cache), "--no-bytecode"], cwd=lock.parent, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for name in ("alpha", "beta"):
            entry = entry_of(cache, lock, name)
            if entry is not None:
                check_tree(entry)  # whole, or not there at all
        for e in ("alpha", "beta"):
            if entry_of(cache, lock, e) is None:
                break
        else:
            import shutil

            shutil.rmtree(cache / UNPACKED)  # the fill finished: start cold again
    rc, doc = install(lock, tmp_path / "after", cache)
    assert rc == 0 and doc["identical"] is True
    assert [n for n in os.listdir(cache / UNPACKED) if n.startswith(".")] == []


@pytest.mark.slow
def test_concurrent_installs_share_one_cache(tmp_path: Path) -> None:
    """Three installs of one lock at once, cold cache: all identical, one entry each."""
    lock = small_lock(tmp_path, big=8 << 20)
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAMEBITS_FIND_LINKS": str(tmp_path)}
    procs = [subprocess.Popen(
        [sys.executable, "-m", "samebits", "install", str(lock), "--target",
         str(tmp_path / f"c{i}"), "--platform", "linux-64", "--python", sys.executable,
         "--cache-dir", str(cache), "--json"], cwd=lock.parent, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(3)]
    docs = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        docs.append(json.loads(out))
    assert all(d["identical"] for d in docs)  # no script names its prefix: one digest
    assert len({json.dumps(d["verify"]["digests"]) for d in docs}) == 1
    assert sorted(os.listdir(cache / UNPACKED)) == sorted(
        cache_key_of(lock, n) for n in ("alpha", "beta"))


def reflinks_work(folder: Path) -> bool:
    """Whether the filesystem of ``folder`` clones files (FICLONE)."""
    import fcntl

    from samebits.install.place import FICLONE

    src, dst = folder / ".probe-a", folder / ".probe-b"
    src.write_bytes(b"x")
    try:
        with open(src, "rb") as s, open(dst, "wb") as d:
            fcntl.ioctl(d.fileno(), FICLONE, s.fileno())
        return True
    except OSError:
        return False
    finally:
        src.unlink()
        dst.unlink(missing_ok=True)


def test_reflinks_where_the_filesystem_clones(tmp_path: Path) -> None:
    """Where the filesystem clones (btrfs, XFS), auto clones every file: its own inode, so a
    write into the environment leaves the cache as it was."""
    if not reflinks_work(tmp_path):
        pytest.skip(f"the filesystem of {tmp_path} cannot clone files (FICLONE); on btrfs or "
                    "XFS this test runs")
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    rc, doc = install(lock, tmp_path / "env", cache)
    assert rc == 0 and set(doc["placed"]) == {"reflink"}
    placed = tmp_path / "env" / "lib" / f"python{LINE}" / "site-packages" / "alpha" / \
        "__init__.py"
    cached = entry_of(cache, lock, "alpha").tree / "alpha" / "__init__.py"
    assert placed.stat().st_ino != cached.stat().st_ino
    placed.write_bytes(b"A = 3\n")
    assert cached.read_bytes() == b"A = 1\n"


def test_reflink_mode_on_a_filesystem_without_it(tmp_path: Path) -> None:
    """--link-mode reflink where the filesystem cannot clone is a usage error naming the
    files; nothing is installed."""
    if reflinks_work(tmp_path):
        pytest.skip("this filesystem supports reflinks")
    lock = small_lock(tmp_path)
    proc = samebits("install", str(lock), "--target", str(tmp_path / "env"), "--platform",
                    "linux-64", "--python", sys.executable, "--cache-dir",
                    str(tmp_path / "cache"), "--link-mode", "reflink", cwd=lock.parent)
    assert proc.returncode == 2
    assert "error: --link-mode reflink: cannot clone " in proc.stderr
    assert "hint: use --link-mode auto (reflink where possible, else a hardlink or a copy)" \
        in proc.stderr
    assert not (tmp_path / "env").exists()


NO_FORK = ("import sys; import samebits.install.prefix as p; p.fork_call = lambda fn: None; "
           "from samebits_app.cli import main; sys.exit(main(sys.argv[1:]))")


def test_the_seal_check_on_the_other_core_is_the_check_made_here(tmp_path: Path) -> None:
    """A warm install checks its cache entries against their seals in a forked child while it
    plans (``samebits.install.prefix._plan``, ``samebits.forked``): its report (how each file
    was proven, the environment's digests, the verdict) is the report of an install that
    checks them in its own process; and an entry changed in place is found either way."""
    lock = small_lock(tmp_path)
    cache = tmp_path / "cache"
    assert install(lock, tmp_path / "env", cache)[0] == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAMEBITS_FIND_LINKS": str(tmp_path)}
    docs = []
    for n, forked in enumerate((True, False, True, False)):
        args = ["install", str(lock), "--target", str(tmp_path / f"env{n}"), "--platform",
                "linux-64", "--python", sys.executable, "--cache-dir", str(cache), "--json"]
        cmd = [sys.executable, *(("-m", "samebits") if forked else ("-c", NO_FORK)), *args]
        proc = subprocess.run(cmd, cwd=lock.parent, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        docs.append((doc["seal"], doc["verify"]["digests"], doc["identical"]))
    assert docs[0] == docs[1] and docs[2] == docs[3]
    assert docs[0][0]["entries"] == 4 and docs[0][0]["hashed"] == 0  # 2 archives, 2 pyc
    entry = entry_of(cache, lock, "alpha")
    _rewrite(entry, CHANGES["a file"])
    rc, doc = install(lock, tmp_path / "changed", cache)
    assert rc == 0 and doc["cache"]["unpacked"] == ["alpha-1.0-py3-none-any.whl"]
