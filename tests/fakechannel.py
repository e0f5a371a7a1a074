"""A local conda channel of small synthetic packages that mimic the CUDA stack.

Packages are real conda ``.tar.bz2`` archives (``info/index.json``, ``info/paths.json`` and
payload files), byte-stable (mtime 0, uid/gid 0, sorted members), indexed with py-rattler's
``index_fs``. Tests, the benchmarks and helpers all build channels here.
"""

from __future__ import annotations

import asyncio
import bz2
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

DAY_MS = 86_400_000
T0 = 1_700_000_000_000  # 2023-11-14, the timestamp of the oldest synthetic package


@dataclass(frozen=True)
class Pkg:
    name: str
    version: str
    build: str = "0"
    build_number: int = 0
    subdir: str = "noarch"
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    files: Mapping[str, bytes] = field(default_factory=dict)
    noarch: str | None = None
    timestamp: int = T0
    track_features: str = ""
    prefix_placeholder: Mapping[str, str] = field(default_factory=dict)  # path -> placeholder

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build}.tar.bz2"

    def index_json(self) -> dict:
        out = {
            "name": self.name,
            "version": self.version,
            "build": self.build,
            "build_number": self.build_number,
            "depends": list(self.depends),
            "constrains": list(self.constrains),
            "subdir": self.subdir,
            "timestamp": self.timestamp,
            "license": "MIT",
        }
        if self.subdir != "noarch":
            out["platform"] = "linux"
            out["arch"] = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}[self.subdir]
        if self.noarch:
            out["noarch"] = self.noarch
        if self.track_features:
            out["track_features"] = self.track_features
        return out


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = mode
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def package_bytes(pkg: Pkg) -> bytes:
    """The package archive, identical bytes for an identical Pkg."""
    paths = []
    for path in sorted(pkg.files):
        data = pkg.files[path]
        entry = {"_path": path, "path_type": "hardlink",
                 "sha256": hashlib.sha256(data).hexdigest(), "size_in_bytes": len(data)}
        if path in pkg.prefix_placeholder:
            entry["prefix_placeholder"] = pkg.prefix_placeholder[path]
            entry["file_mode"] = "text"
        paths.append(entry)
    meta = {
        "info/index.json": json.dumps(pkg.index_json(), indent=2, sort_keys=True).encode(),
        "info/paths.json": json.dumps({"paths": paths, "paths_version": 1}, indent=2,
                                      sort_keys=True).encode(),
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(pkg.files):
            mode = 0o755 if name.startswith("bin/") or ".so" in name else 0o644
            _tar_add(tar, name, pkg.files[name], mode)
        for name, data in meta.items():
            _tar_add(tar, name, data)
    return bz2.compress(buf.getvalue(), 9)


def write_channel(root: Path, packages: Iterable[Pkg], *, subdirs: Iterable[str] = ()) -> Path:
    """Write every package under ``root/<subdir>/`` and index the channel with py-rattler."""
    from rattler.index import index_fs

    root.mkdir(parents=True, exist_ok=True)
    for sd in {"noarch", *subdirs}:
        (root / sd).mkdir(exist_ok=True)
    for pkg in packages:
        (root / pkg.subdir).mkdir(exist_ok=True)
        (root / pkg.subdir / pkg.filename).write_bytes(package_bytes(pkg))
    asyncio.run(index_fs(root, write_zst=False, write_shards=False, force=True))
    for repodata in root.glob("*/repodata.json"):
        # index_fs stamps each record with the time of indexing, which rattler prefers over
        # `timestamp` for exclude-newer; drop it so the channel is byte-stable and its records
        # carry the upload times the tests give them.
        data = json.loads(repodata.read_text())
        for section in ("packages", "packages.conda"):
            for rec in data.get(section, {}).values():
                rec.pop("indexed_timestamp", None)
        repodata.write_text(json.dumps(data, indent=2, sort_keys=True))
    return root


# ------------------------------------------------------------------ the CUDA-stack channel

PLATFORMS = ("linux-64", "linux-aarch64")


def _py(ver: str) -> str:
    return "".join(ver.split(".")[:2])


def _pin_minor(name: str, ver: str) -> str:
    """'python 3.12.7' -> 'python >=3.12,<3.13.0a0', as conda-forge pins a minor line."""
    major, minor = ver.split(".")[:2]
    return f"{name} >={major}.{minor},<{major}.{int(minor) + 1}.0a0"


def cuda_stack(*, pythons: tuple[str, ...] = ("3.11.9", "3.12.7")) -> list[Pkg]:
    """python; cuda-version 11.8/12.4/12.8 constraining __cuda; cuda-cudart, cudnn and nccl with
    cuda builds; pytorch with cuda and cpu builds; numpy; a noarch python package."""
    pkgs: list[Pkg] = []
    cuda_lines = {"11.8": "11.8.89", "12.4": "12.4.127", "12.8": "12.8.90"}
    for i, (line, cudart) in enumerate(cuda_lines.items()):
        major = line.split(".")[0]
        pkgs.append(Pkg(name="cuda-version", version=line, build="h0_3", build_number=3,
                        constrains=(f"__cuda >={line}", f"cudatoolkit {line}|{line}.*"),
                        timestamp=T0 + i * DAY_MS))
        for sd in PLATFORMS:
            if sd == "linux-aarch64" and major == "11":
                continue  # like conda-forge: no CUDA 11 builds on aarch64
            pkgs.append(Pkg(
                name="cuda-cudart", version=cudart, build="h0_0", subdir=sd,
                depends=(_pin_minor("cuda-version", line), "__glibc >=2.17"),
                files={f"lib/libcudart.so.{major}" + (".0" if major == "11" else ""):
                       f"cudart {cudart} {sd}\n".encode()},
                timestamp=T0 + i * DAY_MS))
    for sd in PLATFORMS:
        for j, py in enumerate(pythons):
            short = ".".join(py.split(".")[:2])
            pkgs.append(Pkg(
                name="python", version=py, build="h0_0_cpython", subdir=sd,
                depends=("__glibc >=2.17",),
                files={f"bin/python{short}": f"#!/bin/sh\necho python {py}\n".encode(),
                       f"lib/python{short}/os.py": b"# os\n"},
                timestamp=T0 + j * DAY_MS))
            pkgs.append(Pkg(
                name="numpy", version="1.26.4", build=f"py{_py(py)}h0_0", subdir=sd,
                depends=(_pin_minor("python", py), "__glibc >=2.17"),
                files={f"lib/python{short}/site-packages/numpy/__init__.py":
                       f"__version__ = '1.26.4'  # {sd}\n".encode()}))
            for k, (cuda_major, line) in enumerate((("11", "11.8"), ("12", "12.4"))):
                if sd == "linux-aarch64" and cuda_major == "11":
                    continue
                nxt = f"{int(cuda_major) + 1}"
                for name, version in (("cudnn", "9.1.0"), ("nccl", "2.21.5")):
                    if j == 0:
                        pkgs.append(Pkg(
                            name=name, version=version, build=f"cuda{cuda_major}_0", subdir=sd,
                            depends=(f"cuda-version >={cuda_major},<{nxt}",
                                     "__glibc >=2.17"),
                            files={f"lib/lib{name}.so.{version.split('.')[0]}":
                                   f"{name} {version} cuda{cuda_major} {sd}\n".encode()}))
                pkgs.append(Pkg(
                    name="pytorch", version="2.4.0",
                    build=f"cuda{line.replace('.', '')}_py{_py(py)}h0_{100 + k}",
                    build_number=100 + k, subdir=sd,
                    depends=(_pin_minor("python", py), f"cuda-version >={line},<{nxt}",
                             "cuda-cudart", "cudnn", "nccl",
                             "numpy", "__cuda", "__glibc >=2.17"),
                    files={f"lib/python{short}/site-packages/torch/__init__.py":
                           f"cuda = '{line}'\n".encode()}))
            pkgs.append(Pkg(
                name="pytorch", version="2.4.0", build=f"cpu_py{_py(py)}h0_0", subdir=sd,
                depends=(_pin_minor("python", py), "numpy",
                         "__glibc >=2.17"),
                track_features="pytorch-cpu",
                files={f"lib/python{short}/site-packages/torch/__init__.py": b"cuda = None\n"}))
    pkgs.append(Pkg(name="typing-extensions", version="4.12.2", build="pyh0_0", noarch="python",
                    depends=("python >=3.8",),
                    files={"site-packages/typing_extensions.py": b"# typing_extensions\n"}))
    return pkgs


def build_cuda_channel(root: Path) -> Path:
    return write_channel(root, cuda_stack(), subdirs=PLATFORMS)
