"""What the machine refuses is said, never a traceback: a full disk (ENOSPC) or a read-only
file system (EROFS) under the folder a command writes, one command of each family. A real small
file system is mounted for it (tmpfs, filled to the last block, or read-only) in a mount
namespace of the command's own; without the right to mount the test is skipped. Issue 45:
`samebits check` on a full disk ended in `OSError: [Errno 28] No space left on device` and
exit 1 ("does not run")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.install import locked_wheel, wheel, write_lock

LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
MOUNT = """
set -e
mount -t tmpfs -o "size=256k$2" tmpfs "$1"
if [ "$3" = full ]; then dd if=/dev/zero of="$1/filler" bs=4096 2>/dev/null || true; fi
shift 3
exec "$@"
"""


def on_refusing(kind: str, where: Path, argv: list[str], *, cwd: Path,
                env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``argv`` run with a real small file system at ``where`` that refuses every write
    (``kind``: "full", filled to the last block; "read-only"), in a mount namespace of its
    own: the mount ends with the command, whatever happens to the test."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run(
            [unshare, "-m", "--propagation", "private", "mount", "-t", "tmpfs", "tmpfs",
             str(where)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs in a mount namespace here (needs root or user "
                    "namespaces)")
    return subprocess.run([unshare, "-m", "--propagation", "private", "sh", "-c", MOUNT, "sh",
                           str(where), ",ro" if kind == "read-only" else "", kind, *argv],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


@pytest.fixture
def small_lock(tmp_path: Path) -> Path:
    # a platform wheel: check reads archives that can hold native code
    whl = wheel(tmp_path / "wheels", "demo", "1.0", {"demo/__init__.py": b"x = 1\n" * 2000},
                tag=f"cp{LINE.replace('.', '')}-cp{LINE.replace('.', '')}-manylinux_2_28_x86_64")
    return write_lock(tmp_path / "demo.conda-lock.yml", [locked_wheel(whl)], python=LINE).path


COMMANDS = {  # command family -> its arguments: {lock}, {dir} (the refusing folder), {tmp}
    "install (cache)": ["install", "{lock}", "--target", "{tmp}/env", "--cache-dir", "{dir}"],
    "install (target)": ["install", "{lock}", "--target", "{dir}/env", "--cache-dir",
                         "{tmp}/cache"],
    "check (cache)": ["check", "{lock}", "--cache-dir", "{dir}"],
    "bundle (out)": ["bundle", "{lock}", "--platform", "linux-64", "--out", "{dir}/b.tar",
                     "--cache-dir", "{tmp}/cache"],
    "render (out)": ["render", "conda", "{lock}", "--out", "{dir}"],
    # the lock's own caches are kept where they can be (a read-only one is read, not written);
    # the lockfile is what it must write
    "lock (lockfile)": ["lock", "--root", "{tmp}/project", "--lockfiles", "{dir}"],
}


@pytest.mark.parametrize("kind", ["full", "read-only"])
@pytest.mark.parametrize("family", list(COMMANDS))
def test_a_refusing_disk_is_an_error_not_a_traceback(small_lock: Path, tmp_path: Path,
                                                     family: str, kind: str) -> None:
    where = tmp_path / "mnt"
    where.mkdir()
    (tmp_path / "project" / "environments").mkdir(parents=True)
    (tmp_path / "project" / "environments" / "p.toml").write_text(
        f'format = 1\npython = "{LINE}"\ngeneration = "cpu"\n[platforms.linux-64]\n'
        'glibc = "2.28"\n'
        '[pypi]\nrequirements = ["six==1.16.0"]\n')
    args = [a.format(lock=small_lock, dir=where, tmp=tmp_path) for a in COMMANDS[family]]
    proc = on_refusing(kind, where, [sys.executable, "-m", "samebits", *args, "--json"],
                       cwd=tmp_path, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = json.loads(proc.stdout)["error"]
    said = "No space left on device" if kind == "full" else "Read-only file system"
    assert said in err["message"], err
    assert err["hint"], err
