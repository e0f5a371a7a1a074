"""Builders for the install tests: conda packages with every feature the linker handles, and
locks written straight from archives (no solver), so a test names exactly what it installs.

``CondaPkg`` writes a real ``.tar.bz2`` or ``.conda`` (``info/index.json``, ``info/paths.json``
with sha256 and size per file, ``info/link.json``): regular and executable files, softlinks,
text and binary prefix placeholders, noarch: python with ``site-packages/`` and
``python-scripts/`` members and entry points. py-rattler installs the same archives in the
tests that compare its prefix with samebits'.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from samebits.lock.model import Lock, LockedPackage, render_lock
from samebits.lock.read import LockedEnv, load_lock

PLACEHOLDER = "/opt/conda-bld/placehold_" + "p" * 80   # 104 characters, like conda-build's


@dataclass(frozen=True)
class CondaPkg:
    name: str
    version: str
    build: str = "h0_0"
    subdir: str = "linux-64"
    depends: tuple[str, ...] = ()
    files: Mapping[str, bytes] = field(default_factory=dict)
    executables: tuple[str, ...] = ()
    symlinks: Mapping[str, str] = field(default_factory=dict)
    placeholders: Mapping[str, str] = field(default_factory=dict)   # path -> text | binary
    noarch: str | None = None
    entry_points: tuple[str, ...] = ()
    fmt: str = ".tar.bz2"

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build}{self.fmt}"

    def index(self) -> dict:
        doc = {"name": self.name, "version": self.version, "build": self.build,
               "build_number": 0, "depends": list(self.depends), "license": "MIT",
               "subdir": self.subdir, "timestamp": 1700000000000}
        if self.subdir != "noarch":
            doc.update(platform="linux", arch="x86_64")
        if self.noarch:
            doc["noarch"] = self.noarch
        return doc

    def info(self) -> dict[str, bytes]:
        paths = []
        for path in sorted({*self.files, *self.symlinks}):
            if path in self.symlinks:
                paths.append({"_path": path, "path_type": "softlink"})
                continue
            data = self.files[path]
            e = {"_path": path, "path_type": "hardlink",
                 "sha256": hashlib.sha256(data).hexdigest(), "size_in_bytes": len(data)}
            if path in self.placeholders:
                e["prefix_placeholder"] = PLACEHOLDER
                e["file_mode"] = self.placeholders[path]
            paths.append(e)
        out = {"info/index.json": json.dumps(self.index(), indent=2, sort_keys=True).encode(),
               "info/paths.json": json.dumps({"paths": paths, "paths_version": 1},
                                             indent=2, sort_keys=True).encode()}
        if self.noarch == "python":
            link = {"noarch": {"type": "python", "entry_points": list(self.entry_points)},
                    "package_metadata_version": 1}
            out["info/link.json"] = json.dumps(link, indent=2, sort_keys=True).encode()
        return out

    def bytes(self) -> bytes:
        pkg = _tar({**{p: (d, p in self.executables) for p, d in self.files.items()}},
                   self.symlinks)
        info = _tar({p: (d, False) for p, d in self.info().items()}, {})
        if self.fmt == ".conda":
            import zstandard

            stem = self.filename[: -len(".conda")]
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
                zf.writestr("metadata.json", b'{"conda_pkg_format_version": 2}')
                zf.writestr(f"info-{stem}.tar.zst", zstandard.compress(info))
                zf.writestr(f"pkg-{stem}.tar.zst", zstandard.compress(pkg))
            return buf.getvalue()
        import bz2

        return bz2.compress(_tar({**{p: (d, p in self.executables)
                                     for p, d in self.files.items()},
                                  **{p: (d, False) for p, d in self.info().items()}},
                                 self.symlinks))


def _tar(files: Mapping[str, tuple[bytes, bool]], links: Mapping[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted({*files, *links}):
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if name in links:
                info.type, info.linkname = tarfile.SYMTYPE, links[name]
                tar.addfile(info)
                continue
            data, executable = files[name]
            info.size, info.mode = len(data), 0o755 if executable else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_channel(root: Path, pkgs: Sequence[CondaPkg]) -> dict[str, Path]:
    """Each package's archive under ``root/<subdir>/``; name -> path."""
    out = {}
    for p in pkgs:
        path = root / p.subdir / p.filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(p.bytes())
        out[p.name] = path
    return out


def locked_conda(path: Path, platform: str = "linux-64") -> LockedPackage:
    data = path.read_bytes()
    name, version, build = path.name.rsplit(".tar.bz2" if path.name.endswith(".tar.bz2")
                                            else ".conda", 1)[0].rsplit("-", 2)
    return LockedPackage(name=name, version=version, manager="conda", platform=platform,
                         url=path.as_uri(), md5=hashlib.md5(data).hexdigest(),
                         sha256=hashlib.sha256(data).hexdigest(), build=build)


def locked_wheel(path: Path, platform: str = "linux-64") -> LockedPackage:
    name, version = path.name.split("-")[:2]
    return LockedPackage(name=name.replace("_", "-"), version=version, manager="pip",
                         platform=platform, url=path.as_uri(),
                         sha256=hashlib.sha256(path.read_bytes()).hexdigest())


def write_lock(path: Path, packages: Sequence[LockedPackage], *, python: str | None = None,
               platforms: Sequence[str] = ("linux-64",)) -> LockedEnv:
    """A lockfile of exactly ``packages`` (conda-lock v1, read back by samebits' reader)."""
    custom = {"samebits.lock-format": "1", "samebits.environment": path.stem.split(".")[0]}
    if python:
        custom["samebits.python"] = python
    lock = Lock(platforms=tuple(platforms), channels=(), sources=("test",),
                content_hash={p: "0" * 64 for p in platforms}, custom=custom,
                packages=tuple(packages))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_lock(lock))
    return load_lock(path, name=path.name.split(".")[0], root=path.parent)


def wheel(folder: Path, name: str, version: str, files: Mapping[str, bytes], *,
          executables: Sequence[str] = (), tag: str = "py3-none-any",
          purelib: bool = True) -> Path:
    """A wheel with RECORD (sha256 + size per file) and real modes in the zip."""
    import base64

    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {**files,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 .encode(),
             f"{info}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: samebits-tests\n"
                               f"Root-Is-Purelib: {str(purelib).lower()}\nTag: {tag}\n"
                               ).encode()}
    rows = []
    for n, d in sorted(files.items()):
        digest = base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
        rows.append(f"{n},sha256={digest},{len(d)}\n")
    files[f"{info}/RECORD"] = ("".join(rows) + f"{info}/RECORD,,\n").encode()
    path = folder / f"{dist}-{version}-{tag}.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n in sorted(files):
            zi = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = (0o100755 if n in executables else 0o100644) << 16
            zf.writestr(zi, files[n])
    return path
