"""render nix: real Nix realises every locked artifact by hash, refuses an altered one, and the
environment installed from the store verifies identical.

Nix is Debian's nix-bin (2.8), used as root without a daemon: ``build-users-group`` empty and
no substituters (nothing is downloaded from cache.nixos.org). Artifacts with file:// URLs
(the test project's local channel and wheels) are realised in the default store, which is
content-addressed, so runs cannot disturb each other; a store whose files a test corrupts is a
chroot store of its own.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.lock.read import load_lock
from samebits.render.nix import lock_nix_differences, nix_files, nix_string, store_name
from tests.fixtures.render import (  # noqa: F401  (fixtures)
    RenderProject,
    need,
    package_cache,
    render_project,
    render_wheel_dir,
    run_cli,
)

REPO = Path(__file__).resolve().parents[2]
CURATED = ("volta", "ampere", "ada", "hopper", "blackwell", "cpu")
NIX_CONFIG = "build-users-group =\nsubstituters =\nsandbox = false\n"


@pytest.fixture(scope="module")
def nix_env() -> dict[str, str]:
    """The environment every Nix call runs with: no build users, no binary cache."""
    need("nix-build")
    return {**os.environ, "NIX_CONFIG": NIX_CONFIG}


def nix(*args: str, env: dict[str, str], cwd: Path | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def rendered(render_project: RenderProject) -> Path:
    """containers/ of the test project, with the Nix files of every environment."""
    proc = render_project.samebits("render", "nix", "--root", str(render_project.root))
    assert proc.returncode == 0, proc.stderr
    return render_project.root / "containers"


@pytest.mark.parametrize(("filename", "name"), [
    ("six-1.17.0-py2.py3-none-any.whl", "six-1.17.0-py2.py3-none-any.whl"),
    ("torch-2.7.1%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl",
     "torch-2.7.1+cu126-cp312-cp312-manylinux_2_28_x86_64.whl"),
    (".hidden pkg~1.conda", "_hidden_pkg_1.conda"),
])
def test_store_name(filename: str, name: str) -> None:
    """Store names are file names in Nix's alphabet, URL-decoded, never with a leading dot."""
    assert store_name(filename) == name


def test_nix_string_escapes_interpolation() -> None:
    """A value can never become Nix code: quotes, backslashes and ${ are escaped."""
    assert nix_string('a"b\\c${d}') == '"a\\"b\\\\c\\${d}"'


def test_rendering_is_byte_stable(render_project: RenderProject) -> None:
    """The same lock gives the same Nix text twice, and a folder's location does not enter."""
    env = load_lock(render_project.lockfile("gpu"), name="gpu", root=render_project.root)
    assert nix_files(env, env.platforms) == nix_files(env, env.platforms)
    assert str(render_project.root) not in "".join(nix_files(env, env.platforms).values())


def test_every_url_and_hash_is_the_locks(render_project: RenderProject, rendered: Path,
                                         nix_env: dict[str, str]) -> None:
    """Nix itself reads lock.nix back: every artifact of every platform, the lock's url and
    sha256; flake.nix and default.nix parse."""
    for name in ("gpu", "venv"):
        env = load_lock(render_project.lockfile(name), name=name,
                              root=render_project.root)
        folder = rendered / name
        proc = nix("nix-instantiate", "--eval", "--strict", "--json",
                   str(folder / "lock.nix"), env=nix_env)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        for plat in env.platforms:
            assert lock_nix_differences(doc, env, plat, where="lock.nix") == []
            assert len(doc["platforms"][plat]) == len(env.conda(plat)) + len(env.pip(plat))
        for f in ("flake.nix", "default.nix"):
            proc = nix("nix-instantiate", "--parse", str(folder / f), env=nix_env)
            assert proc.returncode == 0, proc.stderr
            text = (folder / f).read_text()
            # every artifact comes from lock.nix: no URL or hash of its own
            assert "import ./lock.nix" in text
            assert "file://" not in text and "sha256 = \"" not in text


def test_nix_build_realises_every_artifact(render_project: RenderProject, rendered: Path,
                                           nix_env: dict[str, str], tmp_path: Path) -> None:
    """`nix-build -A all` fetches every conda archive and wheel of the platform; each store
    path holds the lock's sha256; verify nix-store agrees; install --from-nix, offline,
    gives an environment that verifies identical to the lock."""
    env = load_lock(render_project.lockfile("gpu"), name="gpu", root=render_project.root)
    for plat in env.platforms:
        proc = nix("nix-build", str(rendered / "gpu"), "-A", "all", "--argstr", "platform",
                   plat, "--out-link", str(tmp_path / f"all-{plat}"), env=nix_env)
        assert proc.returncode == 0, proc.stderr
        proc = nix("nix-instantiate", "--eval", "--strict", "--json", "-E",
                   f'builtins.mapAttrs (n: d: d.outPath) (import {rendered / "gpu"} '
                   f'{{ platform = "{plat}"; }}).artifacts', env=nix_env)
        paths = json.loads(proc.stdout)
        assert len(paths) == len(env.conda(plat)) + len(env.pip(plat))
        for p in [*env.conda(plat), *env.pip(plat)]:
            assert sha256(Path(paths[store_name(p.filename)])) == p.sha256, p.filename
    check = run_cli("verify", "nix-store", str(render_project.lockfile("gpu")),
                    "--platform", "linux-64", "--nix", str(rendered / "gpu"), "--json",
                    cwd=render_project.root, env=nix_env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert {a["state"] for a in json.loads(check.stdout)["artifacts"]} == {"ok"}
    # The lock's URLs point nowhere: only the store can supply the archives.
    gone = tmp_path / "gone.conda-lock.yml"
    gone.write_text(render_project.lockfile("gpu").read_text()
                    .replace(render_project.channel.as_uri(), "file:///nonexistent/channel")
                    .replace(render_project.wheels.as_uri(), "file:///nonexistent/wheels"))
    prefix = tmp_path / "env"
    proc = run_cli("install", str(gone), "--target", str(prefix), "--platform", "linux-64",
                   "--from-nix", "--cache-dir", str(tmp_path / "cache"), "--json",
                   cwd=render_project.root, env=nix_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["identical"] is True


def test_altered_hash_is_refused_by_nix_and_named_by_samebits(
        render_project: RenderProject, rendered: Path, nix_env: dict[str, str],
        tmp_path: Path) -> None:
    """One sha256 changed in the rendered file: Nix refuses the download ("hash mismatch in
    fixed-output derivation") and `verify nix-store --nix` names that artifact."""
    env = load_lock(render_project.lockfile("venv"), name="venv",
                          root=render_project.root)
    victim = env.pip("linux-64")[0]
    folder = tmp_path / "venv"
    shutil.copytree(rendered / "venv", folder)
    text = (folder / "lock.nix").read_text()
    assert text.count(str(victim.sha256)) >= 1
    (folder / "lock.nix").write_text(text.replace(str(victim.sha256), "0" * 64))
    proc = nix("nix-build", str(folder), "-A", "all", "--no-out-link", env=nix_env)
    assert proc.returncode != 0
    assert "hash mismatch in fixed-output derivation" in proc.stderr
    check = run_cli("verify", "nix-store", str(render_project.lockfile("venv")),
                    "--platform", "linux-64", "--nix", str(folder), cwd=render_project.root,
                    env=nix_env)
    assert check.returncode == 1, check.stderr
    name = store_name(victim.filename)
    assert f"NIX FILE   {folder / 'lock.nix'}: {name}: sha256 {'0' * 64}, the lock says " \
        f"{victim.sha256}" in check.stdout


def test_modified_and_missing_store_paths_are_named(render_project: RenderProject,
                                                    nix_env: dict[str, str],
                                                    tmp_path: Path) -> None:
    """In a chroot store: an artifact added by hash is ok, one whose bytes were changed after
    is MODIFIED (Nix's verify-path), one never added is MISSING; install --from-nix refuses."""
    env = load_lock(render_project.lockfile("venv"), name="venv",
                          root=render_project.root)
    store = tmp_path / "store"
    store.mkdir()
    wheels = env.pip("linux-64")
    assert len(wheels) >= 2
    added = {}
    for p in wheels[:2]:
        local = tmp_path / store_name(p.filename)
        shutil.copyfile(p.url.removeprefix("file://"), local)
        proc = nix("nix-store", "--store", str(store), "--add-fixed", "sha256", str(local),
                   env=nix_env)
        assert proc.returncode == 0, proc.stderr
        added[p.filename] = proc.stdout.strip()
    broken = store / added[wheels[1].filename].lstrip("/")
    broken.chmod(0o644)
    with open(broken, "ab") as f:
        f.write(b"tampered")
    proc = run_cli("verify", "nix-store", str(render_project.lockfile("venv")),
                   "--platform", "linux-64", "--store", str(store), "--json",
                   cwd=render_project.root, env=nix_env)
    assert proc.returncode == 1, proc.stderr
    states = {a["file"]: a["state"] for a in json.loads(proc.stdout)["artifacts"]}
    assert states[wheels[0].filename] == "ok"
    assert states[wheels[1].filename] == "modified"
    assert all(states[p.filename] == "missing" for p in wheels[2:])
    proc = run_cli("install", str(render_project.lockfile("venv")), "--target",
                   str(tmp_path / "env"), "--platform", "linux-64", "--python", sys.executable,
                   "--from-nix", "--store", str(store), "--cache-dir", str(tmp_path / "cache"),
                   cwd=render_project.root, env=nix_env)
    assert proc.returncode == 2, proc.stderr
    assert f"{wheels[1].filename}: {added[wheels[1].filename]}: modified in the store" \
        in proc.stderr
    assert not (tmp_path / "env").exists()
    assert not (tmp_path / "cache" / "archives" / str(wheels[1].sha256)).exists()


def test_committed_nix_files_are_fresh() -> None:
    """containers/<env>/*.nix of every committed lock are what render nix writes now."""
    proc = subprocess.run([sys.executable, "-m", "samebits", "render", "nix", "--check",
                           *CURATED], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.network
def test_real_pypi_wheels_through_nix(nix_env: dict[str, str], tmp_path: Path) -> None:
    """A small real lock (wheels from PyPI) rendered, realised by nix-build from PyPI, every
    store path with the lock's sha256, then installed from the store with no network."""
    root = tmp_path / "project"
    (root / "environments").mkdir(parents=True)
    (root / "environments" / "small.toml").write_text(
        f'format = 1\ngeneration = "cpu"\npython = "{sys.version_info[0]}.'
        f'{sys.version_info[1]}"\nexclude-newer = "2026-11-29T00:00:00Z"\n'
        '[platforms.linux-64]\nglibc = "2.28"\n'
        '[pypi]\nrequirements = ["six==1.17.0", "idna==3.10", "packaging==25.0"]\n')
    for args in (("lock", "--root", str(root)), ("render", "nix", "--root", str(root))):
        proc = run_cli(*args, cwd=root, env=nix_env)
        assert proc.returncode == 0, proc.stderr
    store = tmp_path / "store"
    proc = nix("nix-build", "--store", str(store), str(root / "containers" / "small"), "-A",
               "all", "--no-out-link", env=nix_env)
    assert proc.returncode == 0, proc.stderr
    lock = root / "lockfiles" / "small.conda-lock.yml"
    check = run_cli("verify", "nix-store", str(lock), "--store", str(store),
                    "--json", cwd=root, env=nix_env)
    assert check.returncode == 0, check.stdout
    rows = json.loads(check.stdout)["artifacts"]
    assert len(rows) == 3
    for row in rows:
        assert sha256(store / row["store_path"].lstrip("/")) == row["expected"]
    install = ["install", str(lock), "--target", str(tmp_path / "env"), "--python",
               sys.executable, "--from-nix", "--store", str(store), "--cache-dir",
               str(tmp_path / "cache"), "--json"]
    unshare = shutil.which("unshare")
    cmd = [sys.executable, "-m", "samebits", *install]
    if unshare and subprocess.run([unshare, "-n", "true"]).returncode == 0:
        cmd = [unshare, "-n", *cmd]  # no network at all: the store is the only source
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300,
                          env={**nix_env, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["identical"] is True
