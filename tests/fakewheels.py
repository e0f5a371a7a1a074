"""Small, valid, byte-stable wheels for a local PyPI part (read by uv with --find-links)."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    tag: str = "py3-none-any"
    requires: tuple[str, ...] = ()
    files: Mapping[str, bytes] = field(default_factory=dict)

    @property
    def dist(self) -> str:
        return self.name.replace("-", "_")

    @property
    def filename(self) -> str:
        return f"{self.dist}-{self.version}-{self.tag}.whl"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def wheel_bytes_to(path: Path, w: Wheel) -> Path:
    info = f"{w.dist}-{w.version}.dist-info"
    metadata = "".join([
        "Metadata-Version: 2.1\n", f"Name: {w.name}\n", f"Version: {w.version}\n",
        *(f"Requires-Dist: {r}\n" for r in w.requires),
    ])
    files = {
        **{k: v for k, v in w.files.items()},
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: samebits-tests\nRoot-Is-Purelib: "
                          f"{str(w.tag.endswith('any')).lower()}\nTag: {w.tag}\n").encode(),
    }
    if not w.files:
        files[f"{w.dist}/__init__.py"] = f"__version__ = '{w.version}'\n".encode()
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in sorted(files.items()))
    record += f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    target = path / w.filename
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zf.writestr(zi, files[name])
    return target


def write_wheels(folder: Path, wheels: Iterable[Wheel]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for w in wheels:
        wheel_bytes_to(folder, w)
    return folder


def _cuda_marker(arch: str) -> str:
    return f'platform_machine == "{arch}"'


def torch_like() -> list[Wheel]:
    """torch 2.13.0 (CUDA 13.0 on x86_64 and aarch64), torch 2.9.1 (CUDA 12.8 on x86_64 only,
    a CPU-only wheel on aarch64), their CUDA runtime wheels, and a pure-Python numpy."""
    out = [Wheel(name="numpy", version="2.1.0")]
    for arch in ("x86_64", "aarch64"):
        tag = f"py3-none-manylinux_2_28_{arch}"
        out.append(Wheel(name="nvidia-cuda-runtime", version="13.0.96", tag=tag))
        out.append(Wheel(name="torch", version="2.13.0", tag=tag,
                         requires=(f"nvidia-cuda-runtime==13.0.96; {_cuda_marker(arch)}",
                                   "numpy")))
    out.append(Wheel(name="nvidia-cuda-runtime-cu12", version="12.8.90",
                     tag="py3-none-manylinux_2_28_x86_64"))
    out.append(Wheel(name="torch", version="2.9.1", tag="py3-none-manylinux_2_28_x86_64",
                     requires=("nvidia-cuda-runtime-cu12==12.8.90", "numpy")))
    out.append(Wheel(name="torch", version="2.9.1", tag="py3-none-manylinux_2_28_aarch64",
                     requires=("numpy",)))
    return out
