"""Real prefixes for ``verify env`` tests: a local conda channel whose packages carry ELF files
compiled here with gcc, symlinks and a prefix placeholder, installed with py-rattler, plus a
wheel installed with pip.

Session fixtures build the channel, the wheel and one pristine prefix with a lockfile;
``fresh_env`` copies the pristine prefix (every file a real copy, never a hardlink into the
rattler cache) so each test may break its own copy.
"""

from __future__ import annotations

import asyncio
import bz2
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from samebits.lock.model import Lock, LockedPackage, render_lock
from tests.fakechannel import Pkg, _tar_add
from tests.fakewheels import Wheel, wheel_bytes_to

PLACEHOLDER = "/opt/samebits-placeholder-prefix-0123456789abcdef"
PLATFORM = "linux-64"
SP_REL = "lib/python3.11/site-packages"


# ------------------------------------------------------------------------------ ELF payloads

C_LIB = "int vfa_answer(void) { return 42; }\n"
C_TOOL = "int vfa_answer(void);\nint main(void) { return vfa_answer() == 42 ? 0 : 1; }\n"
C_NEEDY = "int cudart_stub(void);\nint needy(void) { return cudart_stub(); }\n"
C_STUB = "int cudart_stub(void) { return 0; }\n"


def gcc(*args: str, cwd: Path) -> None:
    from tests.conftest import require  # skips, saying so, where gcc is missing

    subprocess.run([require("gcc"), *args], cwd=cwd, check=True, capture_output=True)


def build_elves(work: Path) -> dict[str, bytes]:
    """libvfa.so.1, vfa-tool (needs it through $ORIGIN/../lib), libneedy.so (needs
    libcudart.so.11.0, which ships nowhere) and that stub (for linking only)."""
    work.mkdir(parents=True, exist_ok=True)
    for name, text in (("vfa.c", C_LIB), ("tool.c", C_TOOL), ("needy.c", C_NEEDY),
                       ("stub.c", C_STUB)):
        (work / name).write_text(text)
    gcc("-shared", "-fPIC", "-O1", "-Wl,-soname,libvfa.so.1", "-o", "libvfa.so.1", "vfa.c",
        cwd=work)
    gcc("-O1", "-o", "vfa-tool", "tool.c", "-L.", "-l:libvfa.so.1",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib", cwd=work)
    gcc("-shared", "-fPIC", "-Wl,-soname,libcudart.so.11.0", "-o", "libcudart.so.11.0",
        "stub.c", cwd=work)
    gcc("-shared", "-fPIC", "-o", "libneedy.so", "needy.c", "-L.", "-l:libcudart.so.11.0",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN", cwd=work)
    return {n: (work / n).read_bytes()
            for n in ("libvfa.so.1", "vfa-tool", "libneedy.so", "libcudart.so.11.0")}


# ------------------------------------------------------------------------- conda packages

@dataclass(frozen=True)
class VPkg:
    """A conda package that may hold symlinks and explicit modes (fakechannel's Pkg cannot)."""

    pkg: Pkg
    modes: Mapping[str, int] = field(default_factory=dict)
    links: Mapping[str, str] = field(default_factory=dict)   # path -> link target


def vpkg_bytes(v: VPkg) -> bytes:
    pkg = v.pkg
    paths = []
    for path in sorted([*pkg.files, *v.links]):
        if path in v.links:
            target = pkg.files.get(str(Path(path).parent / v.links[path]), b"")
            paths.append({"_path": path, "path_type": "softlink",
                          "sha256": hashlib.sha256(target).hexdigest(),
                          "size_in_bytes": len(target)})
            continue
        data = pkg.files[path]
        entry = {"_path": path, "path_type": "hardlink",
                 "sha256": hashlib.sha256(data).hexdigest(), "size_in_bytes": len(data)}
        if path in pkg.prefix_placeholder:
            entry.update(prefix_placeholder=pkg.prefix_placeholder[path], file_mode="text")
        paths.append(entry)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted([*pkg.files, *v.links]):
            if name in v.links:
                info = tarfile.TarInfo(name)
                info.type = tarfile.SYMTYPE
                info.linkname = v.links[name]
                info.mtime = 0
                info.mode = 0o777
                tar.addfile(info)
            else:
                _tar_add(tar, name, pkg.files[name], v.modes.get(name, 0o644))
        _tar_add(tar, "info/index.json",
                 json.dumps(pkg.index_json(), indent=2, sort_keys=True).encode())
        _tar_add(tar, "info/paths.json",
                 json.dumps({"paths": paths, "paths_version": 1}, indent=2,
                            sort_keys=True).encode())
    return bz2.compress(buf.getvalue(), 9)


def vfa(build: str, elves: Mapping[str, bytes]) -> VPkg:
    files = {
        "bin/vfa-tool": elves["vfa-tool"],
        "bin/vfa-script": b"#!/bin/sh\necho vfa\n",
        "lib/libvfa.so.1": elves["libvfa.so.1"],
        "share/vfa/config.txt": f"prefix = {PLACEHOLDER}\n".encode(),
        "share/vfa/data.txt": f"data of build {build}\n".encode(),
    }
    return VPkg(pkg=Pkg(name="vfa", version="1.0", build=build, subdir=PLATFORM,
                        depends=("python 3.11.*",), files=files,
                        prefix_placeholder={"share/vfa/config.txt": PLACEHOLDER}),
                modes={"bin/vfa-tool": 0o755, "bin/vfa-script": 0o755,
                       "lib/libvfa.so.1": 0o755},
                links={"lib/libvfa.so": "libvfa.so.1"})


def channel_packages(elves: Mapping[str, bytes]) -> list[VPkg]:
    return [
        VPkg(pkg=Pkg(name="python", version="3.11.9", build="h0_0_cpython", subdir=PLATFORM,
                     files={"bin/python3.11": b"#!/bin/sh\necho python 3.11.9\n",
                            "lib/python3.11/os.py": b"# os\n",
                            "lib/python3.11/site-packages/README.txt": b"site-packages\n"}),
             modes={"bin/python3.11": 0o755}),
        vfa("h0_0", elves),
        vfa("h1_1", elves),
        VPkg(pkg=Pkg(name="needy", version="1.0", build="h0_0", subdir=PLATFORM,
                     files={"lib/libneedy.so": elves["libneedy.so"]}),
             modes={"lib/libneedy.so": 0o755}),
        VPkg(pkg=Pkg(name="typing-extensions", version="4.12.2", build="pyh0_0",
                     noarch="python", depends=("python >=3.8",),
                     files={"site-packages/typing_extensions.py": b"# typing_extensions\n"})),
    ]


def write_vchannel(root: Path, packages: Sequence[VPkg]) -> Path:
    from rattler.index import index_fs

    for sd in ("noarch", PLATFORM):
        (root / sd).mkdir(parents=True, exist_ok=True)
    for v in packages:
        (root / v.pkg.subdir / v.pkg.filename).write_bytes(vpkg_bytes(v))
    asyncio.run(index_fs(root, write_zst=False, write_shards=False, force=True))
    return root


# --------------------------------------------------------------------------- installing

def rattler_install(channel: Path, specs: Sequence[str], prefix: Path, cache: Path) -> list:
    """Solve ``specs`` against ``channel`` for linux-64 and install them into ``prefix``."""
    import rattler
    from rattler import (
        BuildString,
        Channel,
        Gateway,
        GenericVirtualPackage,
        PackageName,
        Subdir,
        Version,
    )

    virtual = [GenericVirtualPackage(PackageName(n), Version(v), BuildString(b))
               for n, v, b in (("__unix", "0", "0"), ("__linux", "5.10", "0"),
                               ("__glibc", "2.28", "0"), ("__archspec", "1", "x86_64"))]

    async def go() -> list:
        records = await rattler.solve(sources=[Channel(channel.as_uri())], specs=list(specs),
                                      gateway=Gateway(), platforms=[PLATFORM, "noarch"],
                                      virtual_packages=virtual)
        await rattler.install(records, target_prefix=prefix, cache_dir=cache,
                              platform=Subdir(PLATFORM), execute_link_scripts=False)
        return list(records)

    return asyncio.run(go())


def pip_install(wheel: Path, prefix: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--no-warn-script-location", "-q",
                    "--prefix", str(prefix), str(wheel)], check=True, capture_output=True)


def sbtest_wheel(folder: Path) -> Path:
    w = Wheel(name="sbtest", version="1.0", files={
        "sbtest/__init__.py": b"__version__ = '1.0'\n",
        "sbtest/data.bin": bytes(range(256)) * 4,
        "sbtest-1.0.data/scripts/sbtool": b"#!python\nimport sbtest\n",
    })
    folder.mkdir(parents=True, exist_ok=True)
    return wheel_bytes_to(folder, w)


def locked_conda(rec) -> LockedPackage:
    """A py-rattler record as the lock has it."""
    def hexed(v):
        return v.hex() if isinstance(v, bytes) else v

    return LockedPackage(name=rec.name.normalized, version=str(rec.version), manager="conda",
                         platform=PLATFORM, url=str(rec.url), md5=hexed(rec.md5),
                         sha256=hexed(rec.sha256), build=str(rec.build))


def make_lock(records: Sequence, wheel: Path) -> Lock:
    conda = [locked_conda(r) for r in records]
    pip = LockedPackage(name="sbtest", version="1.0", manager="pip", platform=PLATFORM,
                        url=wheel.as_uri(), sha256=hashlib.sha256(wheel.read_bytes()).hexdigest())
    return Lock(platforms=(PLATFORM,), channels=("file:///channel",), sources=("test",),
                content_hash={PLATFORM: "0" * 64}, custom={}, packages=(*conda, pip))


@dataclass(frozen=True)
class Installed:
    prefix: Path
    lockfile: Path
    records: tuple


ENV_SPECS = ("python 3.11.*", "vfa ==1.0 h0_0", "typing-extensions")


def install_env(channel: Path, wheel: Path, prefix: Path, cache: Path,
                specs: Sequence[str] = ENV_SPECS) -> Installed:
    records = rattler_install(channel, specs, prefix, cache)
    pip_install(wheel, prefix)
    lockfile = prefix.parent / f"{prefix.name}.conda-lock.yml"
    lockfile.write_text(render_lock(make_lock(records, wheel)))
    return Installed(prefix=prefix, lockfile=lockfile, records=tuple(records))


# ------------------------------------------------------------------------------ fixtures
# Each test module imports these fixtures, and pytest then keeps one instance per module even
# for session scope; _once makes the expensive ones once per test session instead.

_built: dict[tuple[str, str], object] = {}


def _once(factory: pytest.TempPathFactory, name: str, make):  # -> the value make() returned
    key = (str(factory.getbasetemp()), name)
    if key not in _built:
        _built[key] = make()
    return _built[key]


@pytest.fixture(scope="session")
def elves(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """ELF files compiled with gcc for this test session."""
    return _once(tmp_path_factory, "elves",
                 lambda: build_elves(tmp_path_factory.mktemp("elves")))


@pytest.fixture(scope="session")
def vchannel(tmp_path_factory: pytest.TempPathFactory, elves: dict[str, bytes]) -> Path:
    """A file:// channel: python, vfa (two builds), needy, typing-extensions."""
    return _once(tmp_path_factory, "vchannel", lambda: write_vchannel(
        tmp_path_factory.mktemp("vchannel"), channel_packages(elves)))


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sbtest-1.0-py3-none-any.whl: a package, a data file and a script."""
    return _once(tmp_path_factory, "wheel",
                 lambda: sbtest_wheel(tmp_path_factory.mktemp("wheels")))


@pytest.fixture(scope="session")
def rattler_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _once(tmp_path_factory, "cache", lambda: tmp_path_factory.mktemp("rattler-cache"))


@pytest.fixture(scope="session")
def pristine(tmp_path_factory: pytest.TempPathFactory, vchannel: Path, wheel: Path,
             rattler_cache: Path) -> Installed:
    """python + vfa + typing-extensions from the channel, sbtest from a wheel, and its lock.
    Never modify it: use ``fresh_env``."""
    return _once(tmp_path_factory, "pristine", lambda: install_env(
        vchannel, wheel, tmp_path_factory.mktemp("pristine") / "env", rattler_cache))


@pytest.fixture
def fresh_env(pristine: Installed, tmp_path: Path) -> Installed:
    """A private copy of the pristine prefix (real copies: breaking it breaks nothing else)."""
    prefix = tmp_path / "env"
    shutil.copytree(pristine.prefix, prefix, symlinks=True)
    return Installed(prefix=prefix, lockfile=pristine.lockfile, records=pristine.records)
