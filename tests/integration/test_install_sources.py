"""Content-addressed sources: `--find-links DIR` and `--mirror FROM=TO` for install and
audit's install. A local file with the lock's sha256 is used whatever host the URL names; one
of the locked name with another hash is refused, named; a host that does not answer is exit 4
with a hint naming both flags. Locks here name a host on a closed port (unreachable, at once).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.errors import InputError, UnreachableError
from samebits.install import install_prefix
from samebits.install.sources import Sources, sources_from, user_sources
from samebits.lock.model import LockedPackage
from samebits.lock.read import LockedEnv
from tests.fixtures.install import wheel, write_lock

ROOT = Path(__file__).resolve().parents[2]
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
NAME = "plus-1.0+cpu-py3-none-any.whl"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _setup(tmp_path: Path, salt: str) -> tuple[LockedEnv, Path, str]:
    """A lock of one wheel at an official-looking URL on a host that refuses connections,
    the wheel itself in ``tmp_path/made``; (env, wheel, url). ``salt`` makes its bytes (and
    so its cache entry) this test's own."""
    made = wheel(tmp_path / "made", "plus", "1.0+cpu", {"plus/__init__.py": salt.encode()})
    assert made.name == NAME
    url = f"http://127.0.0.1:{_closed_port()}/whl/cpu/plus-1.0%2Bcpu-py3-none-any.whl"
    pkg = LockedPackage(name="plus", version="1.0+cpu", manager="pip", platform="linux-64",
                        url=url, sha256=hashlib.sha256(made.read_bytes()).hexdigest())
    env = write_lock(tmp_path / "lockfiles" / "env.conda-lock.yml", [pkg], python=PY)
    return env, made, url


def _install(env: LockedEnv, tmp_path: Path, sources: Sources) -> Path:
    prefix = tmp_path / "env"
    install_prefix(env, "linux-64", prefix, final=str(prefix), cache=tmp_path / "cache",
                   interpreter=sys.executable, sources=sources)
    return prefix / "lib" / f"python{PY}" / "site-packages"


LAYOUTS = [
    ("by its name", lambda d, sha: d / NAME),
    ("by its name as the URL spells it", lambda d, sha: d / "plus-1.0%2Bcpu-py3-none-any.whl"),
    ("by its hash (a samebits cache's archives/)", lambda d, sha: d / sha / NAME),
]


@pytest.mark.parametrize("place", [x[1] for x in LAYOUTS], ids=[x[0] for x in LAYOUTS])
def test_find_links_takes_the_locked_file_whatever_its_url(tmp_path: Path, place) -> None:
    """The host never answers; the file in the folder has the lock's sha256, so it is
    installed, and direct_url.json still names the lock's URL (verify env checks it)."""
    env, made, url = _setup(tmp_path, f"place {place}")
    (pkg,) = env.pip("linux-64")
    target = place(tmp_path / "links", pkg.sha256)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(made, target)
    site = _install(env, tmp_path, Sources(find_links=(tmp_path / "links",)))
    assert (site / "plus" / "__init__.py").read_text().startswith("place")
    direct = json.loads((site / "plus-1.0+cpu.dist-info" / "direct_url.json").read_text())
    assert direct["url"] == url


def test_find_links_file_of_the_locked_name_and_another_hash_is_refused(tmp_path: Path) -> None:
    """A file named as the locked one but of other bytes: refused, its path named, and the
    network not tried instead (that would be 'unreachable' here)."""
    env, made, _ = _setup(tmp_path, "wrong-hash")
    other = wheel(tmp_path / "links", "plus", "1.0+cpu", {"plus/__init__.py": b"other\n"})
    with pytest.raises(InputError) as err:
        _install(env, tmp_path, Sources(find_links=(tmp_path / "links",)))
    (pkg,) = env.pip("linux-64")
    assert type(err.value) is InputError
    assert err.value.message == (
        f"linux-64: plus 1.0+cpu: {other}: sha256 of {pkg.filename} is "
        f"{hashlib.sha256(other.read_bytes()).hexdigest()}, the lock says {pkg.sha256} "
        "(not used: remove it or pass another --find-links folder)")
    assert not (tmp_path / "env").exists() or not any((tmp_path / "env").iterdir())


def test_mirror_rewrites_the_url_prefix_and_still_checks_the_hash(tmp_path: Path) -> None:
    """--mirror FROM=TO fetches FROM... from TO... (here a file:// folder); a mirror holding
    other bytes is a hash mismatch naming the mirror's URL and the lock's."""
    env, made, url = _setup(tmp_path, "mirror")
    host = url.split("/whl/")[0] + "/whl/"
    good, bad = tmp_path / "good" / "cpu", tmp_path / "bad" / "cpu"
    good.mkdir(parents=True)
    shutil.copyfile(made, good / "plus-1.0+cpu-py3-none-any.whl")
    wheel(bad, "plus", "1.0+cpu", {"plus/__init__.py": b"tampered\n"})
    mirror = sources_from(mirrors=[f"{host}={(tmp_path / 'bad').as_uri()}/"])
    with pytest.raises(InputError) as err:
        _install(env, tmp_path, mirror)
    assert f"({(tmp_path / 'bad').as_uri()}/cpu/plus-1.0%2Bcpu-py3-none-any.whl, for {url})" \
        in err.value.message
    good_url = (tmp_path / "good").as_uri()
    site = _install(env, tmp_path, sources_from(mirrors=[f"{host}={good_url}/"]))
    assert (site / "plus" / "__init__.py").read_text() == "mirror"


def test_unreachable_host_is_exit_4_with_a_hint_naming_find_links_and_mirror(
        tmp_path: Path) -> None:
    """Without either, the install says the host did not answer (exit 4, not 'bad input')
    and what to pass instead of waiting for the network."""
    env, _, url = _setup(tmp_path, "unreachable")
    with pytest.raises(UnreachableError) as err:
        _install(env, tmp_path, Sources())
    assert err.value.message.startswith(f"linux-64: plus 1.0+cpu: {url}: ")
    host = url.split("/whl/")[0] + "/"
    assert err.value.hint == (
        f"nothing was installed; check the network; or, where the files are at hand, "
        f"--find-links DIR (a folder holding {NAME}: any file with the locked sha256 is used) "
        f"or --mirror {host}=URL; or fill --cache-dir where the host is reachable")


@pytest.mark.parametrize(("kind", "values", "message"), [
    ("find-links", ["nowhere"], '--find-links "nowhere": no such folder'),
    ("mirror", ["https://a.example/"], '--mirror "https://a.example/": expected FROM=TO'),
    ("mirror", ["a=https://b.example/"], '--mirror "a=https://b.example/": "a" is not an '
     "http(s):// or file:// URL"),
])
def test_bad_source_flags_are_usage_errors(kind: str, values: list[str], message: str,
                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """A folder that is not there or a mirror that is not FROM=TO: named, before anything."""
    from samebits.errors import UsageError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as err:
        sources_from(**{"find_links" if kind == "find-links" else "mirrors": values})
    assert err.value.message.startswith(message)


SPEC = """\
generation = "cpu"
python = "{py}"
[platforms.linux-64]
glibc = "2.28"
[pypi]
requirements = ["plus"]
{install}
"""


def test_install_cli_takes_find_links(tmp_path: Path) -> None:
    """`samebits install ENV --find-links DIR`: the host never answers, the folder's file is
    installed and verify env finds the prefix identical to the lock (exit 0)."""
    env, made, _ = _setup(tmp_path, "from the command line")
    res = subprocess.run([sys.executable, "-m", "samebits", "install", str(env.path),
                          "--target", str(tmp_path / "env"), "--platform", "linux-64",
                          "--python", sys.executable, "--no-bytecode", "--json",
                          "--find-links", str(made.parent)],
                         capture_output=True, text=True, timeout=300)  # the session's cache
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["pip"] == ["plus==1.0+cpu"] and doc["verify"]["identical"] is True


SPEC = """\
generation = "cpu"
python = "{py}"
[platforms.linux-64]
glibc = "2.28"
[pypi]
requirements = ["plus"]
[install]
find-links = ["spec-wheels"]
mirrors = {{ "https://a.example/" = "file:///mirror/" }}
"""


def test_sources_flags_then_spec_then_user(tmp_path: Path) -> None:
    """The folders searched, in order: --find-links, the spec's [install] find-links
    (relative to the project root), SAMEBITS_FIND_LINKS; mirrors: the flags', then the
    spec's. [install] leaves the spec's digest (so the lock's freshness) as it was."""
    import argparse

    from samebits.project import Project
    from samebits.spec.model import spec_digest
    from samebits_app.sourceflags import sources_for

    for d in ("flag", "spec-wheels", "user"):
        (tmp_path / d).mkdir()
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "env.toml").write_text(SPEC.format(py=PY))
    args = argparse.Namespace(find_links=[str(tmp_path / "flag")],
                              mirror=["https://b.example/=https://c.example/"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAMEBITS_FIND_LINKS", str(tmp_path / "user"))
        got = sources_for(args, Project.at(tmp_path), "env")
    assert got.find_links == (tmp_path / "flag", tmp_path / "spec-wheels", tmp_path / "user")
    assert got.mirrors == (("https://b.example/", "https://c.example/"),
                           ("https://a.example/", "file:///mirror/"))
    assert spec_digest({"python": PY, "install": {"find-links": ["x"]}}) == \
        spec_digest({"python": PY})


def test_user_sources_reads_the_variable(tmp_path: Path) -> None:
    """SAMEBITS_FIND_LINKS: folders separated by os.pathsep, in order."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    got = user_sources({"SAMEBITS_FIND_LINKS": f"{a}{os.pathsep}{b}"})
    assert got.find_links == (a, b) and user_sources({}) == Sources()


def test_audit_install_takes_the_sources(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """audit --target installs through the same sources (envcheck.install); --find-links
    without --target is a usage error."""
    from samebits_app.audit.envcheck import install
    from samebits_app.cli import main

    env, made, _ = _setup(tmp_path, "audit")
    where, step = install(env.path, tmp_path / "audited", platform="linux-64",
                          cache=tmp_path / "cache", replace=False,
                          sources=Sources(find_links=(made.parent,)))
    assert step.status == "ok" and where.how == "installed"
    assert (where.prefix / "lib" / f"python{PY}" / "site-packages" / "plus").is_dir()
    assert main(["audit", str(env.path), "--attestation", "x.json",
                 "--find-links", str(made.parent)]) == 2
    assert "error: --find-links and --mirror go with --target" in capsys.readouterr().err


def test_audit_install_of_an_unreachable_host_says_what_to_pass(tmp_path: Path) -> None:
    """audit --install where a host does not answer: the environment step fails, and the
    text report shows the hint naming --find-links and --mirror under it."""
    from samebits_app.audit.pipeline import AuditRequest, _environment
    from samebits_app.cmd_audit import audit_text

    env, _, url = _setup(tmp_path, "audit unreachable")
    req = AuditRequest(lockfile=env.path, attestation=tmp_path / "a.json", out=tmp_path,
                       install=tmp_path / "audited", cache=tmp_path / "cache")
    step, where = _environment(req, "linux-64")
    assert where is None and step.status == "failed"
    assert step.summary.startswith(f"install into {tmp_path / 'audited'}: linux-64: plus "
                                   f"1.0+cpu: {url}: ")
    doc = {"verdict": {"level": "not-reproduced", "title": "t", "reasons": [], "notes": []},
           "steps": [step.to_json()], "workloads": []}
    assert "\n     hint: nothing was installed; check the network; or, where the files are " \
        "at hand, --find-links DIR" in audit_text(doc, {}, 1)


def _opt_torch() -> Path | None:
    found = sorted(Path("/opt/wheels").glob("torch-2.13.0+cpu-cp311-*.whl"))
    return found[0] if found else None


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.skipif(_opt_torch() is None, reason="no /opt/wheels/torch-2.13.0+cpu-cp311-*.whl")
def test_paper_lock_installs_with_find_links_opt_wheels(tmp_path: Path) -> None:
    """The acceptance case: examples/paper's lock names torch at download.pytorch.org, which
    does not resolve here; /opt/wheels holds that very file. Without --find-links the install
    is 'unreachable' (exit 4) with the hint; with it, it installs and verify env is
    identical (the rest comes from PyPI)."""
    from samebits.lock.model import parse_lock

    lock = ROOT / "examples" / "paper" / "conda-lock.yml"
    assert lock.read_bytes() == (ROOT / "lockfiles" / "examples" /
                                 "paper-cpu.conda-lock.yml").read_bytes()
    (torch,) = [p for p in parse_lock(lock).packages if p.name == "torch"]
    assert torch.url.startswith("https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-")
    opt = _opt_torch()
    assert opt is not None and hashlib.sha256(opt.read_bytes()).hexdigest() == torch.sha256
    cmd = [sys.executable, "-m", "samebits", "install", str(lock), "--platform", "linux-64",
           "--no-bytecode", "--cache-dir", str(tmp_path / "cache")]
    res = subprocess.run([*cmd, "--target", str(tmp_path / "a")], capture_output=True,
                         text=True, timeout=600)
    if res.returncode != 4:
        pytest.skip("download.pytorch.org answered: nothing to prove here")
    assert "hint: nothing was installed; check the network; or, where the files are at " \
        "hand, --find-links DIR" in res.stderr
    res = subprocess.run([*cmd, "--target", str(tmp_path / "b"), "--find-links",
                          str(opt.parent), "--json"], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verify"]["identical"] is True
