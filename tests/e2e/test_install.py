"""samebits install: exactly the locked archives, hash-checked, then verify env."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import bz2
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from samebits.errors import InputError
from samebits.install import fetch_all
from samebits.install.sources import Sources
from samebits.lock.model import LockedPackage
from tests.fixtures.render import (  # noqa: F401  (fixtures)
    RenderProject,
    package_cache,
    render_project,
    render_wheel_dir,
    run_cli,
)


def test_install_conda_and_pypi(render_project: RenderProject, package_cache: Path,
                                tmp_path: Path) -> None:
    """conda part by py-rattler, PyPI part by hash; verify env says identical; no host paths."""
    prefix = tmp_path / "env"
    proc = render_project.samebits("install", "gpu", "--target", str(prefix), "--platform",
                                   "linux-64", "--cache-dir", str(package_cache), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["identical"] is True and report["verify"]["identical"] is True
    assert report["pip"] == ["nvidia-cudnn-cu12==9.1.0.70", "tinyapp==1.0", "tinylib==1.2"]
    assert "pytorch=2.4.0=cuda124_py312h0_101" in report["conda"]
    assert (prefix / "lib/python3.12/site-packages/typing_extensions.py").exists()  # noarch
    script = (prefix / "bin" / "tinyapp").read_text()
    assert script.startswith(f"#!{prefix}/bin/python3.12\n")
    lockfile = render_project.lockfile("gpu").read_text()
    for record in (prefix / "conda-meta").glob("*.json"):
        doc = json.loads(record.read_text())
        assert doc["url"] in lockfile
        assert not {"extracted_package_dir", "link", "package_tarball_full_path"} & set(doc)
        assert str(package_cache) not in record.read_text()
    installer = prefix / "lib/python3.12/site-packages/tinyapp-1.0.dist-info/INSTALLER"
    assert installer.read_text() == "samebits\n"


@pytest.mark.slow
def test_install_venv_runs(render_project: RenderProject, package_cache: Path,
                           tmp_path: Path) -> None:
    """A PyPI-only lock becomes a venv on this interpreter whose console script really runs."""
    prefix = tmp_path / "venv"
    proc = render_project.samebits("install", "venv", "--target", str(prefix), "--platform",
                                   "linux-64", "--python", sys.executable,
                                   "--cache-dir", str(package_cache))
    assert proc.returncode == 0, proc.stderr
    assert "result: identical (exit 0)" in proc.stdout
    assert (prefix / "bin" / "python").resolve() == Path(sys.executable).resolve()
    run = subprocess.run([str(prefix / "bin" / "tinyapp")], capture_output=True, text=True)
    assert run.stdout == "tinyapp 42\n", run.stderr


def test_install_offline_from_cache(render_project: RenderProject, package_cache: Path,
                                    tmp_path: Path) -> None:
    """With every archive in the cache, the lock's URLs are not read at all."""
    ok = render_project.samebits("install", "gpu", "--target", str(tmp_path / "a"),
                                 "--platform", "linux-aarch64",
                                 "--cache-dir", str(package_cache))
    assert ok.returncode == 0, ok.stderr
    gone = tmp_path / "gone.conda-lock.yml"
    text = render_project.lockfile("gpu").read_text()
    gone.write_text(text.replace(render_project.channel.as_uri(), "file:///nonexistent/channel")
                    .replace(render_project.wheels.as_uri(), "file:///nonexistent/wheels"))
    proc = render_project.samebits("install", str(gone), "--target", str(tmp_path / "b"),
                                   "--platform", "linux-aarch64",
                                   "--cache-dir", str(package_cache))
    assert proc.returncode == 0, proc.stderr


def test_install_refuses_changed_archive(render_project: RenderProject, tmp_path: Path) -> None:
    """An archive whose hash differs from the lock is refused by name; no prefix appears."""
    wheels = tmp_path / "wheels"
    shutil.copytree(render_project.wheels, wheels)
    text = render_project.lockfile("gpu").read_text()
    lock = tmp_path / "changed.conda-lock.yml"
    lock.write_text(text.replace(render_project.wheels.as_uri(), wheels.as_uri()))
    target = wheels / "tinylib-1.2-py3-none-any.whl"
    locked = hashlib.sha256(target.read_bytes()).hexdigest()
    with zipfile.ZipFile(target, "a") as zf:
        zf.writestr("tinylib/evil.py", "print('not the locked wheel')\n")
    got = hashlib.sha256(target.read_bytes()).hexdigest()
    prefix = tmp_path / "env"
    proc = render_project.samebits("install", str(lock), "--target", str(prefix), "--platform",
                                   "linux-64", "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode == 2
    assert (f"error: linux-64: tinylib 1.2: sha256 of tinylib-1.2-py3-none-any.whl is {got}, "
            f"the lock says {locked} ({target.as_uri()})") in proc.stderr
    assert "hint: nothing was installed" in proc.stderr
    assert not prefix.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".env")] == []


def test_install_refuses_existing_prefix(render_project: RenderProject, tmp_path: Path) -> None:
    """An existing, non-empty prefix is left alone unless --replace is given."""
    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / "keep").write_text("mine\n")
    proc = render_project.samebits("install", "venv", "--target", str(prefix))
    assert proc.returncode == 2
    assert f"error: {prefix}: already exists" in proc.stderr
    assert (prefix / "keep").read_text() == "mine\n"


# ---------------------------------------------------------------- unsafe archives, one by one

def _tar_bz2(members: list[tuple[str, str, bytes | str]]) -> bytes:
    """A conda-like .tar.bz2; members are (name, 'file'|'symlink'|'hardlink', data|target)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                assert isinstance(payload, bytes)
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
                continue
            info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
            info.linkname = str(payload)
            tar.addfile(info)
    return bz2.compress(buf.getvalue())


def _wheel(names: list[str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in names:
            zf.writestr(name, b"x\n")
    return buf.getvalue()


INFO = [("info/index.json", "file", b"{}"), ("info/paths.json", "file", b"{}")]
UNSAFE = {
    "absolute member": ("bad-1-0.tar.bz2", _tar_bz2([*INFO, ("/etc/evil", "file", b"x")]),
                        "/etc/evil: absolute path"),
    "dotdot member": ("bad-1-0.tar.bz2", _tar_bz2([*INFO, ("lib/../../evil", "file", b"x")]),
                      "lib/../../evil: '..' in path"),
    "escaping symlink": ("bad-1-0.tar.bz2",
                         _tar_bz2([*INFO, ("lib/libc.so", "symlink", "../../../lib/libc.so.6")]),
                         "lib/libc.so: link escaping the prefix (../../../lib/libc.so.6)"),
    "absolute symlink": ("bad-1-0.tar.bz2",
                         _tar_bz2([*INFO, ("lib/libcuda.so", "symlink", "/usr/lib/libcuda.so")]),
                         "lib/libcuda.so: link to an absolute path (/usr/lib/libcuda.so)"),
    "escaping hardlink": ("bad-1-0.tar.bz2",
                          _tar_bz2([*INFO, ("lib/x", "hardlink", "../outside")]),
                          "lib/x: hardlink to '../outside': '..' in path"),
    "wheel dotdot": ("bad-1.0-py3-none-any.whl", _wheel(["bad/__init__.py", "../../evil.py"]),
                     "../../evil.py: '..' in path"),
    "wheel absolute": ("bad-1.0-py3-none-any.whl", _wheel(["/usr/lib/evil.py"]),
                       "/usr/lib/evil.py: absolute path"),
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_unsafe_archive_refused(case: str, tmp_path: Path) -> None:
    """Absolute or '..' members and links out of the prefix are refused before installing."""
    filename, data, expected = UNSAFE[case]
    (tmp_path / filename).write_bytes(data)
    pkg = LockedPackage(name="bad", version="1", platform="linux-64",
                        manager="pip" if filename.endswith(".whl") else "conda",
                        url=(tmp_path / filename).as_uri(),
                        sha256=hashlib.sha256(data).hexdigest(),
                        md5=hashlib.md5(data).hexdigest())
    with pytest.raises(InputError) as err:
        fetch_all([pkg], tmp_path / "cache", sources=Sources(file_roots=(tmp_path,)))
    assert err.value.message == f"linux-64: bad 1: {filename}: {expected}"


def test_every_problem_listed(tmp_path: Path) -> None:
    """Several bad archives: every problem of every archive in one error, sorted."""
    pkgs = []
    for case in ("absolute member", "wheel dotdot"):
        filename, data, _ = UNSAFE[case]
        path = tmp_path / case.replace(" ", "-") / filename
        path.parent.mkdir()
        path.write_bytes(data)
        pkgs.append(LockedPackage(name=case.replace(" ", "-"), version="1", platform="linux-64",
                                  manager="pip" if filename.endswith(".whl") else "conda",
                                  url=path.as_uri(), sha256=hashlib.sha256(data).hexdigest()))
    pkgs.append(LockedPackage(name="gone", version="2", platform="linux-64", manager="pip",
                              url=(tmp_path / "gone-2-py3-none-any.whl").as_uri(),
                              sha256="0" * 64))
    with pytest.raises(InputError) as err:
        fetch_all(pkgs, tmp_path / "cache", sources=Sources(file_roots=(tmp_path,)))
    assert err.value.message.splitlines() == [
        "3 problems with the locked archives:",
        "  linux-64: absolute-member 1: bad-1-0.tar.bz2: /etc/evil: absolute path",
        f"  linux-64: gone 2: {(tmp_path / 'gone-2-py3-none-any.whl').as_uri()}: no such file",
        "  linux-64: wheel-dotdot 1: bad-1.0-py3-none-any.whl: ../../evil.py: '..' in path",
    ]


def test_install_without_an_interpreter(tmp_path: Path) -> None:
    """A PyPI-only lock and no Python of its line that runs: exit 2 naming every path tried,
    before anything is fetched."""
    from tests.fixtures.install import locked_wheel, wheel, write_lock

    whl = wheel(tmp_path / "wheels", "w", "1.0", {"w/__init__.py": b""})
    env = write_lock(tmp_path / "lockfiles" / "w.conda-lock.yml", [locked_wheel(whl)],
                     python="3.99")
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "python3.99").write_text("#!/bin/sh\necho 'pyenv: python3.99: command not "
                                      "found' >&2\nexit 127\n")
    (shims / "python3.99").chmod(0o755)
    proc = run_cli("install", str(env.path), "--target", str(tmp_path / "env"), "--platform",
                   "linux-64", "--cache-dir", str(tmp_path / "cache"), cwd=tmp_path,
                   env={"PATH": str(shims), "PYENV_ROOT": str(tmp_path / "none"),
                        "HOME": str(tmp_path)})
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    start = lines.index("error: no working Python 3.99 interpreter here; tried:")
    assert lines[start + 1:start + 4] == [
        f"  {shims / 'python3.99'}: exit 127: pyenv: python3.99: command not found (PATH)",
        "  /usr/local/bin/python3.99: not there",
        "  /usr/bin/python3.99: not there",
    ]
    assert lines[-1] == "hint: pass --python /path/to/python3.99, or install one " \
        "(uv python install 3.99)"
    assert not (tmp_path / "env").exists() and not (tmp_path / "cache").exists()


# ------------------------------------------------------------------------------- feedback

def _venv_install(render_project: RenderProject, package_cache: Path, prefix: Path,
                  *flags: str) -> subprocess.CompletedProcess[str]:
    return render_project.samebits("install", "venv", "--target", str(prefix), "--platform",
                                   "linux-64", "--python", sys.executable,
                                   "--cache-dir", str(package_cache), *flags)


@pytest.mark.slow
def test_progress_when_piped(render_project: RenderProject, tmp_path: Path) -> None:
    """Piped: one line per phase on stderr, in order; stdout has only the result."""
    proc = _venv_install(render_project, tmp_path / "cold-cache", tmp_path / "env")
    assert proc.returncode == 0, proc.stderr
    phases = [line.split(" ", 1)[0] for line in proc.stderr.splitlines()]
    assert phases[:6] == ["finding", "fetching", "unpacking", "placing", "compiling", "verify"]
    assert proc.stderr.splitlines()[1:3] == ["fetching 2 archives ...",
                                             "unpacking 2 archives ..."]
    assert all(line.endswith(" ...") for line in proc.stderr.splitlines())
    assert proc.stdout.startswith(f"{tmp_path / 'env'}: venv (linux-64) installed: 0 conda, "
                                  "2 PyPI packages\n")


@pytest.mark.slow
def test_quiet_and_json_are_clean(render_project: RenderProject, package_cache: Path,
                                  tmp_path: Path) -> None:
    """--quiet prints no progress; --json prints one JSON document and nothing on stderr."""
    quiet = _venv_install(render_project, package_cache, tmp_path / "q", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == ""
    as_json = _venv_install(render_project, package_cache, tmp_path / "j", "--json")
    assert as_json.returncode == 0 and as_json.stderr == ""
    doc = json.loads(as_json.stdout)
    assert (doc["identical"], doc["ok"], doc["exit_code"]) == (True, True, 0)
    assert doc["bytecode"]["compiled"] + doc["bytecode"]["reused"] == 2


def test_progress_on_a_terminal(render_project: RenderProject, package_cache: Path,
                                tmp_path: Path) -> None:
    """On a terminal the phases are drawn by rich on stderr (and cleared), not printed as
    lines."""
    import pty

    main, sub = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), "COLUMNS": "120",
           "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "samebits", "install", "venv", "--target", str(tmp_path / "t"),
         "--platform", "linux-64", "--python", sys.executable, "--cache-dir",
         str(package_cache)], cwd=render_project.root, env=env, stdout=subprocess.PIPE,
        stderr=sub, text=True)
    os.close(sub)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    out = proc.communicate()[0]
    os.close(main)
    assert proc.returncode == 0
    assert b"placing" in seen and b"\x1b[" in seen          # drawn with escape codes
    assert b"placing 18 files (3.1 kB) ...\n" not in seen  # not the piped lines
    assert "result: identical (exit 0)" in out


# ------------------------------------------------------------------------------ sources

@pytest.mark.parametrize(("args", "message"), [
    (("--store", "/nix/store"), "--store goes with --from-nix"),
    (("--from-nix", "--from-bundle", "b.tar"),
     "--from-bundle and --from-nix: choose one source of archives"),
    ((), "install needs LOCK (an environment id or a lockfile) or --from-bundle"),
], ids=["store-without-nix", "nix-and-bundle", "no-env"])
def test_install_source_usage_errors(args: tuple[str, ...], message: str,
                                     tmp_path: Path) -> None:
    """Where the archives come from: one source at a time, and a lock to install; exit 2,
    nothing created."""
    proc = run_cli("install", "--target", str(tmp_path / "env"), "--platform", "linux-64",
                   *args, cwd=tmp_path)
    assert (proc.returncode, proc.stderr.splitlines()[0]) == (2, f"error: {message}")
    assert not (tmp_path / "env").exists()


# ------------------------------------------------------------------------------ one verdict

@pytest.mark.slow
def test_install_verdict_is_verify_envs(tmp_path: Path) -> None:
    """A wheel whose library needs one that ships nowhere, and that `import needy` loads:
    install exits 1 with exactly the verdict, digests, findings and linkage a standalone
    `verify env` gives the prefix."""
    from tests.fixtures.install import locked_wheel, wheel, write_lock
    from tests.fixtures.verify import build_elves

    elves = build_elves(tmp_path / "elves")
    line = f"{sys.version_info[0]}.{sys.version_info[1]}"
    whl = wheel(tmp_path / "wheels", "needy", "1.0",
                {"needy/__init__.py": b"import ctypes, os\nctypes.CDLL(os.path.join("
                 b"os.path.dirname(__file__), 'libneedy.so'))\n",
                 "needy/libneedy.so": elves["libneedy.so"]},
                executables=("needy/libneedy.so",), tag="py3-none-manylinux_2_17_x86_64",
                purelib=False)
    env = write_lock(tmp_path / "lockfiles" / "n.conda-lock.yml", [locked_wheel(whl)],
                     python=line)
    prefix = tmp_path / "env"
    proc = run_cli("install", str(env.path), "--target", str(prefix), "--platform", "linux-64",
                   "--python", sys.executable, "--cache-dir", str(tmp_path / "cache"),
                   "--find-links", str(tmp_path / "wheels"), "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    mine = json.loads(proc.stdout)
    alone = subprocess.run([sys.executable, "-m", "verify", "env", "--prefix", str(prefix),
                            str(env.path), "--platform", "linux-64", "--json"],
                           capture_output=True, text=True, cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert alone.returncode == 1
    theirs = json.loads(alone.stdout)
    assert (mine["identical"], mine["ok"]) == (theirs["identical"], theirs["ok"]) == (True, False)
    for key in ("digests", "findings", "linkage", "summary"):
        assert mine["verify"][key] == theirs[key], key
    assert [u["needed"] for u in theirs["linkage"]["unresolved"]] == ["libcudart.so.11.0"]


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.heavy
def test_real_cpu_lock(tmp_path: Path) -> None:
    """The committed cpu lock from real PyPI (about 3 GB the first time, into the user's
    cache): every file the lock's, direct_url.json on each wheel, bytecode for every source,
    torch imports in the venv, and a warm reinstall into the same path is the same environment
    with the same pycs."""
    from samebits.install import default_cache_dir, host_interpreter

    python = host_interpreter("3.12")
    if python is None:
        pytest.skip("no Python 3.12 interpreter here (the cpu lock's line)")
    repo = Path(__file__).parents[2]
    prefix = tmp_path / "cpu"
    common = ["install", "cpu", "--target", str(prefix), "--platform", "linux-64", "--python",
              python, "--cache-dir", str(default_cache_dir()), "--json"]
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "samebits", *args], cwd=repo,
                              capture_output=True, text=True, timeout=3600,
                              env={**os.environ, "PYTHONPATH": str(repo)})

    first = cli(*common)
    assert first.returncode == 0, first.stderr[-3000:]
    doc = json.loads(first.stdout)
    assert doc["identical"] is True, doc["verify"]["findings"]
    assert len(doc["pip"]) == 32 and doc["bytecode"]["skipped"] is None
    site = prefix / "lib" / "python3.12" / "site-packages"
    assert len(list(site.glob("*.dist-info/direct_url.json"))) == 32
    pycs = {p: p.read_bytes() for p in site.rglob("*.pyc")}
    assert len(pycs) == doc["bytecode"]["compiled"] + doc["bytecode"]["reused"] > 5000
    run = subprocess.run([str(prefix / "bin" / "python"), "-c",
                          "import torch; print(torch.__version__, torch.ones(3).sum().item())"],
                         capture_output=True, text=True, timeout=600)
    version, total = run.stdout.split()
    assert version.split("+")[0] == "2.13.0" and total == "3.0", run.stderr[-2000:]
    second = cli(*common, "--replace")
    again = json.loads(second.stdout)
    assert again["cache"]["reused"] == 32 and again["bytecode"]["compiled"] == 0
    assert again["verify"]["digests"] == doc["verify"]["digests"]
    assert {p: p.read_bytes() for p in site.rglob("*.pyc")} == pycs
