"""Small, byte-stable sdists and the PEP 517 backend that builds them, for a local PyPI part.

``BACKEND`` is a real build backend (standard library only), shipped as the wheel
``tinyback-1.0``: an sdist built by it lists ``tinyback==1.0`` in ``[build-system] requires``,
so its build environment is locked like any other. It reads ``backend.json`` in the source tree:

    name, version       the distribution
    tag                 the wheel tag it writes (default py3-none-any)
    stamp_env           a variable whose value it writes into the wheel: a build that depends
                        on the machine
    stamp_random        random bytes in the wheel: a build that never repeats

Its zip entries carry ``SOURCE_DATE_EPOCH`` (as setuptools, flit and hatchling do).
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tests.fakewheels import Wheel, wheel_bytes_to

BACKEND = '''\
import base64, hashlib, json, os, time, zipfile


def _conf():
    with open("backend.json") as f:
        return json.load(f)


def _dist(c):
    return c["name"].replace("-", "_")


def _meta(c):
    return "Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n" % (c["name"], c["version"])


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(d, config_settings=None):
    c = _conf()
    info = os.path.join(d, "%s-%s.dist-info" % (_dist(c), c["version"]))
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(_meta(c))
    return os.path.basename(info)


def build_wheel(d, config_settings=None, metadata_directory=None):
    c = _conf()
    dist, tag = _dist(c), c.get("tag", "py3-none-any")
    info = "%s-%s.dist-info" % (dist, c["version"])
    files = {}
    for root, dirs, names in os.walk(dist):
        dirs.sort()
        for n in sorted(names):
            with open(os.path.join(root, n), "rb") as f:
                files[os.path.join(root, n).replace(os.sep, "/")] = f.read()
    if c.get("stamp_env"):
        files[dist + "/_stamp.py"] = ("STAMP = %r\\n" % os.environ.get(c["stamp_env"], "")).encode()
    if c.get("stamp_random"):
        files[dist + "/_stamp.py"] = ("STAMP = %r\\n" % os.urandom(8).hex()).encode()
    files[info + "/METADATA"] = _meta(c).encode()
    files[info + "/WHEEL"] = ("Wheel-Version: 1.0\\nGenerator: tinyback\\nRoot-Is-Purelib: "
                              "true\\nTag: %s\\n" % tag).encode()
    rows = ""
    for n in sorted(files):
        digest = base64.urlsafe_b64encode(hashlib.sha256(files[n]).digest()).rstrip(b"=")
        rows += "%s,sha256=%s,%d\\n" % (n, digest.decode(), len(files[n]))
    files[info + "/RECORD"] = (rows + info + "/RECORD,,\\n").encode()
    when = time.gmtime(max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800))
    name = "%s-%s-%s.whl" % (dist, c["version"], tag)
    with zipfile.ZipFile(os.path.join(d, name), "w") as z:
        for n in sorted(files):
            zi = zipfile.ZipInfo(n, when[:6])
            zi.external_attr = 0o644 << 16
            z.writestr(zi, files[n])
    return name


def build_sdist(d, config_settings=None):
    raise NotImplementedError("tinyback builds wheels only")
'''

BACKEND_WHEEL = Wheel(name="tinyback", version="1.0",
                      files={"tinyback/__init__.py": BACKEND.encode()})


@dataclass(frozen=True)
class Sdist:
    name: str
    version: str
    tag: str = "py3-none-any"
    stamp_env: str | None = None
    stamp_random: bool = False
    requires: tuple[str, ...] = ("tinyback==1.0",)

    @property
    def dist(self) -> str:
        return self.name.replace("-", "_")

    @property
    def filename(self) -> str:
        return f"{self.dist}-{self.version}.tar.gz"

    def files(self) -> dict[str, bytes]:
        reqs = ", ".join(json.dumps(r) for r in self.requires)
        conf = {"name": self.name, "version": self.version, "tag": self.tag,
                "stamp_env": self.stamp_env, "stamp_random": self.stamp_random}
        top = f"{self.dist}-{self.version}"
        return {
            f"{top}/pyproject.toml": (f'[build-system]\nrequires = [{reqs}]\n'
                                      'build-backend = "tinyback"\n').encode(),
            f"{top}/backend.json": json.dumps(conf, sort_keys=True).encode(),
            f"{top}/PKG-INFO": (f"Metadata-Version: 2.1\nName: {self.name}\n"
                                f"Version: {self.version}\n").encode(),
            f"{top}/{self.dist}/__init__.py": f"__version__ = '{self.version}'\n".encode(),
        }


def write_sdist(folder: Path, s: Sdist) -> Path:
    """``s`` as a byte-stable .tar.gz in ``folder`` (mtime 0, root-owned, sorted)."""
    folder.mkdir(parents=True, exist_ok=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        dirs = sorted({str(Path(n).parent) for n in s.files()} - {"."}, key=len)
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tf.addfile(info)
        for name, data in sorted(s.files().items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tf.addfile(info, io.BytesIO(data))
    path = folder / s.filename
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0,
                                               filename="") as gz:
        gz.write(raw.getvalue())
    return path


def write_index(folder: Path, *sdists: Sdist) -> Path:
    """A find-links folder: the tinyback backend wheel and these sdists."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel_bytes_to(folder, BACKEND_WHEEL)
    for s in sdists:
        write_sdist(folder, s)
    return folder
