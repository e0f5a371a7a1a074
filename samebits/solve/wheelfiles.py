"""The files a locked wheel writes, read at lock time without downloading the wheel.

For the shared-paths record (``samebits.lock.shared``) the lock needs, of every wheel of a
platform's PyPI part, its file list and what pip's installation order is computed from. All of
it is in the wheel's ``.dist-info/``, which wheel builders write at the zip's end:

    RECORD              every member with its ``sha256=`` hash (the RECORD's own row left out)
    METADATA            Requires-Python, Requires-Dist, Provides-Extra (``pipordering.Dist``)
    entry_points.txt    console and GUI scripts: ``bin/<name>`` files install generates

A wheel at an http(s) URL is read as uv and pip read metadata from an index without PEP 658
files (``samebits.solve.wheelmeta.RangeReader``): the zip's last 64 KiB (the central directory
and, mostly, these members) and then whatever member lies before it; a ``file://`` wheel, one
already in the install cache's ``archives/`` and a built sdist's wheel are read from disk.

What is read is kept in ``CACHE/wheelfiles-v1/<sha256 of the wheel>.json``: a wheel's bytes fix
its members, so a re-lock reads nothing again, whatever index or instant it goes through.
Nothing read here is trusted at install: ``samebits install`` unpacks the proved archive and
checks every member against its own RECORD, and the lock's record of shared paths against the
wheels it really places (``samebits.install.overwrite``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from samebits import __version__, net
from samebits._io import atomic_write, compact_json
from samebits.archives import record_hash
from samebits.lock.pipordering import Dist
from samebits.solve.wheelmeta import TAIL, BadWheel, RangeReader, metadata_member

CACHE = "wheelfiles-v1"
FORMAT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class WheelFiles:
    """One wheel's members, scripts and dependency metadata."""

    name: str                               # canonical project name
    dist_info: str                          # "<name>-<version>.dist-info"
    files: tuple[tuple[str, str], ...]      # (member path, sha256 hex, "" when RECORD has none)
    scripts: tuple[tuple[str, str], ...]    # (script name, "<section> <module>:<attr>")
    dist: Dist

    @property
    def data_dir(self) -> str:
        return self.dist_info.removesuffix(".dist-info") + ".data"

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "name": self.name, "dist-info": self.dist_info,
                "files": [list(f) for f in self.files],
                "scripts": [list(s) for s in self.scripts],
                "requires-python": self.dist.requires_python,
                "requires-dist": list(self.dist.requires_dist),
                "provides-extra": list(self.dist.provides_extra)}

    @classmethod
    def from_json(cls, doc: Any) -> WheelFiles:
        """The cached form; ValueError for anything else (a torn or foreign file)."""
        try:
            if doc["format"] != FORMAT:
                raise ValueError(f"format {doc['format']!r}")
            name = str(doc["name"])
            return cls(name=name, dist_info=str(doc["dist-info"]),
                       files=tuple((str(p), str(h)) for p, h in doc["files"]),
                       scripts=tuple((str(n), str(v)) for n, v in doc["scripts"]),
                       dist=Dist(name=name, requires_python=str(doc["requires-python"]),
                                 requires_dist=tuple(map(str, doc["requires-dist"])),
                                 provides_extra=tuple(map(str, doc["provides-extra"]))))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a wheel file list: {exc}") from None


def read_wheel_zip(zf: zipfile.ZipFile, name: str, filename: str) -> WheelFiles:
    """The file list and metadata of an open wheel; BadWheel when its dist-info is not
    readable."""
    from installer.utils import parse_entrypoints

    try:
        metadata = metadata_member(zf.namelist(), filename)
        info = metadata.split("/", 1)[0]
        record = zf.read(f"{info}/RECORD").decode("utf-8")
        meta = zf.read(metadata)
        names = set(zf.namelist())
        entry_points = zf.read(f"{info}/entry_points.txt").decode("utf-8") \
            if f"{info}/entry_points.txt" in names else ""
    except (KeyError, UnicodeDecodeError, zipfile.BadZipFile, EOFError) as exc:
        raise BadWheel(f"{filename}: its RECORD cannot be read: {exc}") from None
    files = []
    for row in csv.reader(io.StringIO(record)):
        if not row or not row[0] or row[0] == f"{info}/RECORD":
            continue
        files.append((row[0], _hex(row[1] if len(row) > 1 else "")))
    scripts = sorted((script, f"{section} {module}:{attr}")
                     for script, module, attr, section in parse_entrypoints(entry_points))
    return WheelFiles(name=name, dist_info=info, files=tuple(sorted(files)),
                      scripts=tuple(scripts), dist=Dist.from_metadata(name, meta))


def _hex(value: str) -> str:
    """A RECORD hash column as sha256 hex; "" for none, another algorithm or a bad value
    (such a file is never taken as equal to another)."""
    try:
        got = record_hash(value)
    except ValueError:
        return ""
    return got[1].hex() if got is not None and got[0] == "sha256" else ""


def cache_path(cache: Path, sha256: str) -> Path:
    return cache / CACHE / f"{sha256.lower()}.json"


def cached(cache: Path, sha256: str) -> WheelFiles | None:
    try:
        return WheelFiles.from_json(json.loads(cache_path(cache, sha256).read_bytes()))
    except (OSError, ValueError):
        return None


def local_path(url: str) -> Path | None:
    """The file a ``file://`` URL names, else None."""
    if not url.startswith("file://"):
        return None
    return Path(url2pathname(unquote(urlparse(url).path)))


def wheel_files(*, name: str, url: str, filename: str, sha256: str, cache: Path,
                local: Path | None = None, timeout: float, offline: bool) -> WheelFiles:
    """The file list of the wheel with ``sha256``: from the cache, else from ``local`` (a copy
    on disk) or a ``file://`` URL, else read from ``url`` by range requests (never with
    ``offline``: an OSError saying so). BadWheel or OSError when it cannot be read."""
    known = cached(cache, sha256)
    if known is not None:
        return known
    path = local if local is not None and local.is_file() else local_path(url)
    if path is not None:
        with zipfile.ZipFile(path) as zf:
            got = read_wheel_zip(zf, name, filename)
    elif offline:
        raise OSError("--offline, and the cache does not hold its file list")
    else:
        headers = {"User-Agent": f"samebits/{__version__}", **net.auth_header(url)}
        reader = RangeReader(net.public_url(url), timeout=timeout, headers=headers)
        try:
            with zipfile.ZipFile(io.BufferedReader(reader, buffer_size=TAIL)) as zf:
                got = read_wheel_zip(zf, name, filename)
        except (zipfile.BadZipFile, EOFError) as exc:
            raise BadWheel(f"{filename}: not a readable wheel: {exc}") from None
    with contextlib.suppress(OSError):  # a read-only cache: read from the wheel next time
        atomic_write(cache_path(cache, sha256), compact_json(got.to_json()))
    return got

