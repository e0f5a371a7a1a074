"""samebits bundle: one reproducible tar of a lock and its archives, checked and installed
offline (the small real locks of tests/fixtures/render.py; the cpu lock in test_bundle_cpu)."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from samebits.lock.model import parse_lock
from tests.fixtures.programs import no_network
from tests.fixtures.render import (  # noqa: F401  (fixtures)
    RenderProject,
    module_package_cache,
    package_cache,
    render_project,
    render_wheel_dir,
)

ROOT = "gpu.bundle"


@pytest.fixture(scope="module")
def gpu_bundle(tmp_path_factory: pytest.TempPathFactory, render_project: RenderProject,
               module_package_cache: Path) -> Path:
    """`samebits bundle gpu --platform linux-64` from the shared cache."""
    out = tmp_path_factory.mktemp("bundle") / "gpu.bundle.tar"
    proc = render_project.samebits("bundle", "gpu", "--platform", "linux-64", "--out", str(out),
                                   "--cache-dir", str(module_package_cache))
    assert proc.returncode == 0, proc.stderr
    return out


def _error(stderr: str) -> str:
    """stderr from its error line on: piped, the steps begun before it come first, one
    ``STEP ...`` line each (samebits.ui), and what a step says of its work (the archives a cold
    cache lacks), no other error."""
    lines = stderr.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("error: ")), 0)
    assert all(line.endswith(" ...\n") or line.startswith("fetching ")
               for line in lines[:start]), stderr
    return "".join(lines[start:])


def members(path: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(path) as tf:
        return tf.getmembers()


def locked(render_project: RenderProject, env: str, platform: str) -> list:
    return [p for p in parse_lock(render_project.lockfile(env)).packages_for(platform)
            if not p.name.startswith("__")]


def test_bundle_holds_lock_archives_and_metadata_first(
        render_project: RenderProject, gpu_bundle: Path) -> None:
    """Metadata first, then every locked archive by its hash; modes, owners, times fixed."""
    got = members(gpu_bundle)
    names = [m.name for m in got]
    files = [n for n, m in zip(names, got, strict=True) if m.isfile()]
    assert files[:4] == [f"{ROOT}/bundle.json", f"{ROOT}/README.txt", f"{ROOT}/SHA256SUMS",
                         f"{ROOT}/gpu.conda-lock.yml"]
    assert f"{ROOT}/containers/gpu/linux-64.explicit.txt" in files
    assert f"{ROOT}/containers/gpu/linux-64.environment.yml" in files
    assert f"{ROOT}/offline/linux-64.requirements.txt" in files
    archives = {f"{ROOT}/archives/{p.sha256 or p.md5}/{p.filename}"
                for p in locked(render_project, "gpu", "linux-64")}
    assert {n for n in files if "/archives/" in n} == archives
    first_archive = min(files.index(a) for a in archives)
    assert all("/archives/" in n for n in files[first_archive:])
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in got} == {(0, 0, 0, "", "")}
    assert {m.mode for m in got} == {0o755, 0o644}
    with tarfile.open(gpu_bundle) as tf:
        lock = tf.extractfile(f"{ROOT}/gpu.conda-lock.yml").read()  # type: ignore[union-attr]
        manifest = json.loads(tf.extractfile(f"{ROOT}/bundle.json").read())  # type: ignore
    assert lock == render_project.lockfile("gpu").read_bytes()
    assert manifest["lockfile"] == {"path": "gpu.conda-lock.yml",
                                    "sha256": hashlib.sha256(lock).hexdigest()}
    assert (manifest["format"], manifest["kind"], manifest["platforms"]) == (
        1, "samebits.bundle", ["linux-64"])


def test_extracted_bundle_checks_with_sha256sum(gpu_bundle: Path, tmp_path: Path) -> None:
    """GNU tar extracts it and coreutils' sha256sum -c accepts every line of SHA256SUMS."""
    subprocess.run(["tar", "-xf", str(gpu_bundle), "-C", str(tmp_path)], check=True)
    proc = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=tmp_path / ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    files = [p for p in (tmp_path / ROOT).rglob("*") if p.is_file() and p.name != "SHA256SUMS"]
    assert len(lines) == len(files) > 10
    assert all(line.endswith(": OK") for line in lines)


def test_check_accepts_a_good_bundle(render_project: RenderProject, gpu_bundle: Path) -> None:
    """bundle check: exit 0, the lock named, every archive counted."""
    proc = render_project.samebits("bundle", "check", str(gpu_bundle), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["ok"], doc["problems"], doc["environment"], doc["platforms"]) == (
        True, [], "gpu", ["linux-64"])
    assert doc["archives"] == len({(p.sha256, p.filename)
                                   for p in locked(render_project, "gpu", "linux-64")})


def _bundle(project: RenderProject, out: Path, *, cwd: Path, cache: Path, umask: int,
            tz: str) -> subprocess.CompletedProcess[str]:
    return project.samebits("bundle", "gpu", "--platform", "linux-64", "--platform",
                            "linux-aarch64", "--out", str(out), "--cache-dir", str(cache),
                            "--root", str(project.root), "--json", cwd=cwd, umask=umask,
                            env={"TZ": tz, "SOURCE_DATE_EPOCH": "1700000000"})


def test_same_bytes_from_any_folder_umask_tz_and_cache(render_project: RenderProject,
                                                       package_cache: Path,
                                                       tmp_path: Path) -> None:
    """Two bundles written from different folders, umasks, time zones and caches (one empty,
    so it fetches) are byte-identical."""
    a, b = tmp_path / "a", tmp_path / "deeper" / "b"
    a.mkdir()
    b.mkdir(parents=True)
    first = _bundle(render_project, a / "x.tar", cwd=a, cache=package_cache, umask=0o022,
                    tz="UTC")
    second = _bundle(render_project, b / "y.tar", cwd=b, cache=tmp_path / "empty-cache",
                     umask=0o077, tz="Pacific/Kiritimati")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "fetching" in second.stderr
    assert (a / "x.tar").read_bytes() == (b / "y.tar").read_bytes()
    assert json.loads(first.stdout)["sha256"] == json.loads(second.stdout)["sha256"] == (
        hashlib.sha256((a / "x.tar").read_bytes()).hexdigest())


def _rewrite(src: Path, dest: Path, change: dict[str, bytes | None]) -> None:
    """A copy of the tar ``src`` with members replaced (bytes) or dropped (None)."""
    with tarfile.open(src) as tin, tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tout:
        for m in tin.getmembers():
            rel = m.name.removeprefix(f"{ROOT}/")
            data = tin.extractfile(m).read() if m.isfile() else None  # type: ignore[union-attr]
            if rel in change:
                data = change[rel]
                if data is None:
                    continue
                m.size = len(data)
            tout.addfile(m, io.BytesIO(data) if data is not None else None)


def _flip_in(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1:]


def tinyapp(render_project: RenderProject) -> tuple[str, str]:
    """(bundle path, locked sha256) of the tinyapp wheel."""
    p = next(p for p in locked(render_project, "gpu", "linux-64") if p.name == "tinyapp")
    return f"archives/{p.sha256}/{p.filename}", str(p.sha256)


def test_check_names_every_problem(render_project: RenderProject, gpu_bundle: Path,
                                   tmp_path: Path) -> None:
    """A corrupted archive, an edited README, a dropped archive: exit 1, each one named."""
    app, app_sha = tinyapp(render_project)
    dropped = next(f"archives/{p.sha256}/{p.filename}"
                   for p in locked(render_project, "gpu", "linux-64") if p.name == "tinylib")
    with tarfile.open(gpu_bundle) as tf:
        wheel = tf.extractfile(f"{ROOT}/{app}").read()  # type: ignore[union-attr]
        text = tf.extractfile(f"{ROOT}/README.txt").read()  # type: ignore[union-attr]
    bad = tmp_path / "bad.tar"
    _rewrite(gpu_bundle, bad, {app: _flip_in(wheel), "README.txt": text + b"edited\n",
                               dropped: None})
    proc = render_project.samebits("bundle", "check", str(bad))
    assert proc.returncode == 1, proc.stderr
    got = hashlib.sha256(_flip_in(wheel)).hexdigest()
    readme = hashlib.sha256(text + b"edited\n").hexdigest()
    assert proc.stdout.splitlines()[1:] == [
        "3 problem(s):",
        f"  {app}: sha256 is {got}, the lock says {app_sha} (pip:tinyapp 1.0)",
        f"  {dropped}: missing (pip:tinylib 1.2)",
        f"  README.txt: sha256 is {readme}, SHA256SUMS says {hashlib.sha256(text).hexdigest()}",
    ]


@pytest.mark.parametrize(("case", "message"), [
    ("not-a-tar", "{path}: not a tar archive"),
    ("no-manifest", "{path}: not a samebits bundle: bundle.json is not its first file "
                    "(README.txt is)"),
    ("bad-manifest", "{path}: bundle.json: kind = 'x', format = 1: not a samebits bundle of "
                     "format 1"),
    ("missing", "{path}: no such bundle"),
])
def test_unreadable_bundles_exit_2(render_project: RenderProject, gpu_bundle: Path,
                                   tmp_path: Path, case: str, message: str) -> None:
    """Not a tar, no bundle.json first, another kind of file: exit 2, the file named."""
    path = tmp_path / f"{case}.tar"
    if case == "not-a-tar":
        path.write_bytes(b"plain text, not a tar\n" * 100)
    elif case == "no-manifest":
        _rewrite(gpu_bundle, path, {"bundle.json": None})
    elif case == "bad-manifest":
        _rewrite(gpu_bundle, path, {"bundle.json": b'{"kind": "x", "format": 1}'})
    proc = render_project.samebits("bundle", "check", str(path))
    assert proc.returncode == 2
    assert _error(proc.stderr).startswith("error: " + message.format(path=path)), proc.stderr


def test_links_and_escaping_paths_are_problems(render_project: RenderProject, gpu_bundle: Path,
                                               tmp_path: Path) -> None:
    """A symlink member and a '..' path in a bundle: named problems, exit 1."""
    bad = tmp_path / "links.tar"
    shutil.copyfile(gpu_bundle, bad)
    with tarfile.open(bad, "a") as tf:
        link = tarfile.TarInfo(f"{ROOT}/containers/gpu/evil")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
        up = tarfile.TarInfo(f"{ROOT}/../escape.txt")
        tf.addfile(up, io.BytesIO(b""))
    proc = render_project.samebits("bundle", "check", str(bad))
    assert proc.returncode == 1
    assert "  containers/gpu/evil: a link or special file: a bundle holds files only" in (
        proc.stdout.splitlines())
    assert f"  {ROOT}/../escape.txt: an absolute or '..' path" in proc.stdout.splitlines()


def _digest(report: dict) -> str:
    return report["verify"]["digests"]["environment"]


def _offline_lock(render_project: RenderProject, folder: Path) -> Path:
    """The gpu lock with every URL pointing at a host that does not exist."""
    lock = folder / "gpu.conda-lock.yml"
    lock.write_text(render_project.lockfile("gpu").read_text()
                    .replace(render_project.channel.as_uri(), "https://samebits.invalid/channel")
                    .replace(render_project.wheels.as_uri(), "https://samebits.invalid/wheels"))
    return lock


def test_install_from_bundle_offline_gives_the_network_digest(
        render_project: RenderProject, package_cache: Path, tmp_path: Path) -> None:
    """With no network at all (unshare -n) and URLs that resolve nowhere, install --from-bundle
    gives the environment an install of that lock from a cache the network filled gives,
    verified identical (the same packages as the original lock: only the URLs each wheel's
    direct_url.json records differ)."""
    netless = no_network()
    prefix = tmp_path / "env"
    fetched = render_project.samebits("install", "gpu", "--target", str(prefix), "--platform",
                                      "linux-64", "--cache-dir", str(package_cache), "--json")
    assert fetched.returncode == 0, fetched.stderr
    shutil.rmtree(prefix)
    lock = _offline_lock(render_project, tmp_path)
    online = render_project.samebits("install", str(lock), "--target", str(prefix),
                                     "--platform", "linux-64", "--cache-dir", str(package_cache),
                                     "--json")
    assert online.returncode == 0, online.stderr
    assert (json.loads(online.stdout)["verify"]["digests"]["packages"]
            == json.loads(fetched.stdout)["verify"]["digests"]["packages"])
    shutil.rmtree(prefix)
    bundle = tmp_path / "paper.bundle.tar"
    made = render_project.samebits("bundle", str(lock), "--platform", "linux-64", "--out",
                                   str(bundle), "--cache-dir", str(package_cache))
    assert made.returncode == 0, made.stderr
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.run([*netless, sys.executable, "-m", "samebits", "install",
                           "--from-bundle", str(bundle), "--target", str(prefix), "--platform",
                           "linux-64", "--cache-dir", str(tmp_path / "fresh-cache"), "--json"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    offline = json.loads(proc.stdout)
    assert offline["identical"] is True
    assert _digest(offline) == _digest(json.loads(online.stdout))
    assert offline["lockfile"].startswith(str(tmp_path / "fresh-cache" / "bundles"))


def test_extracted_bundle_is_an_install_cache(render_project: RenderProject,
                                             module_package_cache: Path, gpu_bundle: Path,
                                             tmp_path: Path) -> None:
    """Extracted with tar, the bundle's folder serves `samebits install --cache-dir` for its
    own lock, whose URLs resolve nowhere: identical. (gpu_bundle filled the module's cache,
    which the offline lock is bundled from.)"""
    lock = _offline_lock(render_project, tmp_path)
    bundle = tmp_path / "paper.bundle.tar"
    made = render_project.samebits("bundle", str(lock), "--platform", "linux-64", "--out",
                                   str(bundle), "--cache-dir", str(module_package_cache))
    assert made.returncode == 0, made.stderr
    subprocess.run(["tar", "-xf", str(bundle), "-C", str(tmp_path)], check=True)
    root = tmp_path / "gpu.bundle"
    proc = render_project.samebits("install", str(root / "gpu.conda-lock.yml"), "--target",
                                   str(tmp_path / "env"), "--platform", "linux-64",
                                   "--cache-dir", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "result: identical (exit 0)" in proc.stdout.splitlines()


def test_install_from_bundle_refuses_a_corrupted_archive(render_project: RenderProject,
                                                         gpu_bundle: Path,
                                                         tmp_path: Path) -> None:
    """One flipped byte in one archive inside the bundle: refused by name, nothing installed,
    and the bad archive never reaches the cache."""
    app, app_sha = tinyapp(render_project)
    with tarfile.open(gpu_bundle) as tf:
        wheel = tf.extractfile(f"{ROOT}/{app}").read()  # type: ignore[union-attr]
    bad = tmp_path / "bad.tar"
    _rewrite(gpu_bundle, bad, {app: _flip_in(wheel)})
    prefix, cache = tmp_path / "env", tmp_path / "cache"
    proc = render_project.samebits("install", "--from-bundle", str(bad), "--target",
                                   str(prefix), "--platform", "linux-64", "--cache-dir",
                                   str(cache))
    assert proc.returncode == 2
    got = hashlib.sha256(_flip_in(wheel)).hexdigest()
    assert _error(proc.stderr).splitlines()[:2] == [
        f"error: {bad}: refused: {app}: sha256 is {got}, the lock says {app_sha} "
        "(pip:tinyapp 1.0)",
        f"hint: nothing was installed; `samebits bundle check {bad}` lists the problems"]
    assert not prefix.exists()
    assert not (cache / app).exists()


@pytest.mark.slow
def test_pip_installs_the_pypi_part_without_samebits(render_project: RenderProject,
                                                     package_cache: Path,
                                                     tmp_path: Path) -> None:
    """The README's fallback: the extracted bundle's offline requirements install with plain
    pip --no-index, and the console script runs."""
    bundle = tmp_path / "venv.bundle.tar"
    made = render_project.samebits("bundle", "venv", "--platform", "linux-64", "--out",
                                   str(bundle), "--cache-dir", str(package_cache))
    assert made.returncode == 0, made.stderr
    subprocess.run(["tar", "-xf", str(bundle), "-C", str(tmp_path)], check=True)
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", "--no-deps",
                           "--require-hashes", "-r", "offline/linux-64.requirements.txt"],
                          cwd=tmp_path / "venv.bundle", capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = subprocess.run([str(venv / "bin" / "tinyapp")], capture_output=True, text=True)
    assert run.stdout == "tinyapp 42\n"


def _project_copy(render_project: RenderProject, tmp_path: Path) -> Path:
    """The gpu lock and its spec in a project of their own (the spec names the channel and
    wheel folders the lock's file:// URLs point into: bundle reads from them when the cache
    lacks an archive, as with --cold-cache)."""
    root = tmp_path / "project"
    for part in ("lockfiles/gpu.conda-lock.yml", "environments/gpu.toml"):
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(render_project.root / part, root / part)
    return root


def test_project_containers_files_go_in(render_project: RenderProject, package_cache: Path,
                                        tmp_path: Path) -> None:
    """The project's rendered containers/<env>/ files (Containerfile, requirements) go in as
    they are, beside the conda files rendered for the bundled platform."""
    root = _project_copy(render_project, tmp_path)
    rendered = render_project.samebits("render", "containerfile", "gpu", "--root", str(root))
    assert rendered.returncode == 0, rendered.stderr
    (root / "containers" / "gpu" / "gpu.nix").write_text("{ }: {}  # a Nix file\n")
    out = tmp_path / "b.tar"
    proc = render_project.samebits("bundle", "gpu", "--platform", "linux-64", "--root",
                                   str(root), "--out", str(out), "--cache-dir",
                                   str(package_cache))
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(out) as tf:
        for name in ("Containerfile", "linux-64.requirements.txt", "gpu.nix"):
            data = tf.extractfile(f"{ROOT}/containers/gpu/{name}").read()  # type: ignore
            assert data == (root / "containers" / "gpu" / name).read_bytes(), name


@pytest.mark.parametrize(("name", "text", "problem"), [
    ("linux-64.explicit.txt", "@EXPLICIT\n",
     "linux-64.explicit.txt: differs from a fresh render of lockfiles/gpu.conda-lock.yml"),
    ("Containerfile", "# from lockfiles/gpu.conda-lock.yml (sha256 " + "ab" * 32 + ")\n",
     "Containerfile: names the lock with sha256 abababababab…, lockfiles/gpu.conda-lock.yml is "
     "{digest}…"),
])
def test_stale_containers_are_refused(render_project: RenderProject, package_cache: Path,
                                      tmp_path: Path, name: str, text: str,
                                      problem: str) -> None:
    """containers/<env>/ files rendered from another lock: refused, each named, nothing
    written."""
    root = _project_copy(render_project, tmp_path)
    (root / "containers" / "gpu").mkdir(parents=True)
    (root / "containers" / "gpu" / name).write_text(text)
    out = tmp_path / "b.tar"
    proc = render_project.samebits("bundle", "gpu", "--platform", "linux-64", "--root",
                                   str(root), "--out", str(out), "--cache-dir",
                                   str(package_cache))
    assert proc.returncode == 2
    digest = hashlib.sha256((root / "lockfiles" / "gpu.conda-lock.yml").read_bytes()).hexdigest()
    assert _error(proc.stderr).splitlines()[:2] == [
        f"error: {root}/containers/gpu was not rendered from lockfiles/gpu.conda-lock.yml:",
        "  " + problem.format(digest=digest[:12])]
    assert not out.exists()


@pytest.mark.parametrize(("args", "message"), [
    ([], "bundle needs LOCK (or `samebits bundle check FILE`)"),
    (["--platform", "linux-64", "check", "x.tar"], "bundle check FILE reads a bundle: pass no "
                                                   "--platform or --out"),
    (["gpu", "--platform", "win-64"], "lockfiles/gpu.conda-lock.yml: no platform 'win-64' in "
                                      "this lock (it has linux-64, linux-aarch64)"),
])
def test_bundle_usage_errors(render_project: RenderProject, args: list[str],
                             message: str) -> None:
    """Wrong arguments: exit 2 and what to pass."""
    proc = render_project.samebits("bundle", *args)
    assert (proc.returncode, proc.stderr.splitlines()[0]) == (2, f"error: {message}")


def test_install_from_bundle_usage_errors(render_project: RenderProject, gpu_bundle: Path,
                                          tmp_path: Path) -> None:
    """install takes ENV or --from-bundle (not both), and a platform the bundle has."""
    both = render_project.samebits("install", "gpu", "--from-bundle", str(gpu_bundle),
                                   "--target", str(tmp_path / "e"))
    assert _error(both.stderr).splitlines()[0] == (
        "error: pass LOCK (gpu) or --from-bundle, not both: the bundle holds its lock")
    other = render_project.samebits("install", "--from-bundle", str(gpu_bundle), "--target",
                                    str(tmp_path / "e"), "--platform", "linux-aarch64",
                                    "--cache-dir", str(tmp_path / "c"))
    assert _error(other.stderr).splitlines()[0] == (
        f"error: {gpu_bundle}: no platform 'linux-aarch64' in this bundle (it has linux-64)")
    assert (both.returncode, other.returncode) == (2, 2)
    assert not (tmp_path / "e").exists()


def test_bundle_takes_archives_from_find_links(render_project: RenderProject, gpu_bundle: Path,
                                               module_package_cache: Path,
                                               tmp_path: Path) -> None:
    """A lock away from its project names file:// archives no folder it may read holds: the
    bundle is refused, saying no bundle was written (not "nothing was installed"); with
    --find-links DIR holding the archives by sha256 it is written, from an empty cache."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lock = elsewhere / "gpu.conda-lock.yml"
    shutil.copyfile(render_project.lockfile("gpu"), lock)
    args = ["bundle", str(lock), "--platform", "linux-64", "--root", str(elsewhere),
            "--cache-dir", str(tmp_path / "empty-cache")]
    refused = render_project.samebits(*args, "--out", str(tmp_path / "a.tar"), cwd=elsewhere)
    assert refused.returncode == 2, refused.stderr
    assert "hint: no bundle was written" in refused.stderr
    assert not (tmp_path / "a.tar").exists()
    written = render_project.samebits(*args, "--out", str(tmp_path / "b.tar"), "--find-links",
                                      str(module_package_cache / "archives"), cwd=elsewhere)
    assert written.returncode == 0, written.stderr
    assert "/archives/" in "".join(m.name for m in members(tmp_path / "b.tar"))
