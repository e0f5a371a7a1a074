"""Which file the PyPI part locks when uv lists several: the wheel the target's tags rank
first (packaging's order for the spec's Python, platform and glibc floor, as pip chooses),
whatever order uv wrote them in; the sdist only when no wheel fits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.foreign.target import Target
from samebits.lock.model import parse_lock
from samebits.solve.pypi import choose_artifact
from tests.fixtures.fakewheels import Wheel, write_wheels

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
CP = f"cp{sys.version_info[0]}{sys.version_info[1]}"
TAGS = (f"{CP}-{CP}-manylinux_2_17_x86_64.manylinux2014_x86_64",
        f"{CP}-{CP}-manylinux_2_28_x86_64", "py3-none-any",
        f"{CP}-{CP}-manylinux_2_28_aarch64", f"{CP}-{CP}-musllinux_1_2_x86_64")


def _file(name: str) -> dict[str, object]:
    return {"url": f"https://files.example/{name}", "hashes": {"sha256": "0" * 64}}


def _pkg(*wheels: str, sdist: bool = True, **extra: object) -> dict[str, object]:
    out: dict[str, object] = {"name": "pillow", "version": "11.1.0",
                              "wheels": [_file(w) for w in wheels], **extra}
    if sdist:
        out["sdist"] = _file("pillow-11.1.0.tar.gz")
    return out


W17 = "pillow-11.1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
W28 = "pillow-11.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
ANY = "pillow-11.1.0-py3-none-any.whl"
CHOICES = [
    ("pillow's two manylinux wheels, glibc 2.28: the newer", _pkg(W17, W28), "2.28", W28),
    ("the same, listed the other way round", _pkg(W28, W17), "2.28", W28),
    ("glibc 2.17 floor: 2_28 does not fit", _pkg(W28, W17), "2.17", W17),
    ("a platform wheel before py3-none-any", _pkg(ANY, W17), "2.28", W17),
    ("no wheel fits: the sdist", _pkg(W28), "2.17", "pillow-11.1.0.tar.gz"),
    ("a direct URL is that file", _pkg(archive=_file("torch-2.13.0+cpu-cp312-cp312-linux_x86_64"
                                                    ".whl")), "2.28",
     "torch-2.13.0+cpu-cp312-cp312-linux_x86_64.whl"),
    ("a VCS checkout: nothing install can place", _pkg(sdist=False, vcs={"url": "git+x"}),
     "2.28", None),
]


@pytest.mark.parametrize(("pkg", "glibc", "expected"), [c[1:] for c in CHOICES],
                         ids=[c[0] for c in CHOICES])
def test_choose_artifact(pkg: dict[str, object], glibc: str, expected: str | None) -> None:
    """The file locked for one pylock package: pip's choice of wheel, else the sdist."""
    got = choose_artifact(pkg, Target(platform="linux-64", python="3.12", glibc=glibc))
    assert (str(got["url"]).rsplit("/", 1)[-1] if got else None) == expected


def _lock(root: Path, specs: dict[str, str], index: Path | None,
          reqs: str) -> subprocess.CompletedProcess[str]:
    """`samebits lock` of one spec per name, each with these platforms tables."""
    (root / "environments").mkdir(exist_ok=True)
    pypi = f'index = "{index.as_uri()}"\n' if index else ""
    for name, platforms in specs.items():
        (root / "environments" / f"{name}.toml").write_text(
            f'generation = "cpu"\npython = "{PY}"\nexclude-newer = "2026-11-01T00:00:00Z"\n'
            f'{platforms}[pypi]\n{pypi}requirements = [{reqs}]\n')
    return subprocess.run([sys.executable, "-m", "samebits", "lock"], cwd=root,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "XDG_CACHE_HOME": str(root / "cache")})


def _files(root: Path, name: str) -> dict[str, str]:
    lock = parse_lock(root / "lockfiles" / f"{name}.conda-lock.yml")
    return {p.platform: p.filename for p in lock.packages}


BOTH = '[platforms.linux-64]\nglibc = "2.28"\n[platforms.linux-aarch64]\nglibc = "2.28"\n'


def test_lock_takes_the_best_of_several_wheels_uv_lists(tmp_path: Path) -> None:
    """Real uv on a folder with five wheels of one release: for x86_64 it lists three
    (py3-none-any first); the lock takes manylinux_2_28 at glibc 2.28, manylinux_2_17 at
    2.17, and for aarch64 the one aarch64 wheel."""
    index = write_wheels(tmp_path / "index", [Wheel(name="multi", version="1.0", tag=t)
                                              for t in TAGS])
    res = _lock(tmp_path, {"new": BOTH, "old": '[platforms.linux-64]\nglibc = "2.17"\n'},
                index, '"multi==1.0"')
    assert res.returncode == 0, res.stderr
    assert _files(tmp_path, "new") == {
        "linux-64": f"multi-1.0-{CP}-{CP}-manylinux_2_28_x86_64.whl",
        "linux-aarch64": f"multi-1.0-{CP}-{CP}-manylinux_2_28_aarch64.whl"}
    assert _files(tmp_path, "old") == {"linux-64": f"multi-1.0-{TAGS[0]}.whl"}


@pytest.mark.network
def test_real_pypi_pillow_matplotlib_fonttools_get_wheels(tmp_path: Path) -> None:
    """pillow, fonttools and matplotlib from the real PyPI, where uv lists several wheels of
    one release: every package is locked as a wheel, pillow's the manylinux_2_28 one."""
    res = _lock(tmp_path, {"env": BOTH}, None,
                '"pillow==11.1.0", "fonttools==4.55.3", "matplotlib==3.10.0"')
    assert res.returncode == 0, res.stderr
    lock = parse_lock(tmp_path / "lockfiles" / "env.conda-lock.yml")
    assert [p.filename for p in lock.packages if not p.filename.endswith(".whl")] == []
    pillow = {p.platform: p.filename for p in lock.packages if p.name == "pillow"}
    assert pillow == {"linux-64": f"pillow-11.1.0-{CP}-{CP}-manylinux_2_28_x86_64.whl",
                      "linux-aarch64": f"pillow-11.1.0-{CP}-{CP}-manylinux_2_28_aarch64.whl"}
