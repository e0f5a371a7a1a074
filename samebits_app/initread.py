"""The I/O of ``samebits init``: the file and what it includes, and what the indexes offer.

    read_source(path, ...)      the file, by format (``samebits.foreign.sources.source_format``;
                                a lock through ``samebits.lock.read``), as a ``Declared``
    offers(indexes, names)      every file each index lists for each pinned name (PEP 691
                                JSON or PEP 503 HTML): tags, requires-python, upload-time; an
                                index that does not answer is noted unless none answers
    torch_requires(...)         the pinned torch wheel's Requires-Dist (PEP 658 metadata, else
                                the wheel's own METADATA by range requests, as uv reads it)
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from samebits import net
from samebits.errors import InputError, SamebitsError, SourceError, UnreachableError, UsageError
from samebits.foreign.model import ReadOptions
from samebits.foreign.simpleindex import IndexFile, project_files
from samebits.foreign.sources import Declared, read_requirements, source_format
from samebits.foreign.sources_files import (
    declared_from_lock,
    read_environment_yml,
    read_pyproject,
)
from samebits.foreign.target import Target
from samebits.spec.draft import PinWheels, fits

METADATA_TIMEOUT = 30.0


def read_source(path: Path, *, extras: list[str], platform: str,
                python: str | None) -> Declared:
    """The file at ``path`` (and what it includes) as a ``Declared``."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--from {source}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"--from {source}: is a folder, not a file",
                         hint="name the requirements.txt, environment.yml or pyproject.toml") \
            from None
    except UnicodeDecodeError as exc:
        raise SourceError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{source}: cannot read: {exc.strerror}") from None
    fmt = source_format(path.name, text)
    if extras and fmt != "pyproject.toml":
        raise UsageError(f"--extra {extras[0]}: only a pyproject.toml has optional groups")
    if fmt == "requirements.txt":
        return read_requirements(text, source=source, include=_include)
    if fmt == "environment.yml":
        return read_environment_yml(text, source=source, include=_include)
    if fmt == "pyproject.toml":
        return read_pyproject(text, source=source, extras=extras)
    from samebits.lock.read import load_lock

    loaded = load_lock(path, ReadOptions(platforms=(platform,), python=python))
    dropped = loaded.conversion.dropped if loaded.conversion else ()
    got = declared_from_lock(loaded.lock, platform=platform, source=source, fmt=loaded.format,
                             dropped=dropped)
    if not got.pypi and not got.conda:
        raise SourceError(f"{source}: the {loaded.format} has no packages for {platform}",
                          hint="pass --platform with one it has")
    return got


def _include(including: str, value: str) -> tuple[str, str]:
    path = Path(os.path.normpath(Path(including).parent / value))
    try:
        return str(path), path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SourceError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"{path}: cannot read: {getattr(exc, 'strerror', exc)}") from None


# ------------------------------------------------------------------ asking the indexes

@dataclass(frozen=True, slots=True, kw_only=True)
class Offers:
    files: dict[str, list[IndexFile]]
    unreachable: dict[str, str]  # index -> why


def offers(indexes: list[str], names: list[str]) -> Offers:
    """Every file each index offers for each name; an index that does not answer is noted
    (its pins are judged by the others), unless none answers at all."""
    jobs = [(i, n) for n in names for i in indexes]

    def ask(job: tuple[str, str]) -> list[IndexFile] | SamebitsError:
        try:
            return project_files(*job)
        except (UnreachableError, InputError) as exc:
            return exc

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(ask, jobs))
    files: dict[str, list[IndexFile]] = {n: [] for n in names}
    unreachable: dict[str, str] = {}
    for (index, name), got in zip(jobs, results, strict=True):
        if isinstance(got, SamebitsError):
            unreachable.setdefault(index, got.message)
        else:
            files[name].extend(got)
    if names and len(unreachable) == len(indexes):
        first = next(iter(unreachable.values()))
        raise UnreachableError(f"no index answered: {first}",
                               hint="check the network, or pass --index with a mirror")
    return Offers(files=files, unreachable=unreachable)


def torch_requires(wheels: list[PinWheels], python: str, platform: str,
                   glibc: str) -> list[str] | None:
    """The Requires-Dist of the pinned torch wheel for ``python`` on ``platform`` (PEP 658
    metadata beside the wheel), or None when the index has none."""
    target = Target(platform=platform, python=python, glibc=glibc)
    torch = next((w for w in wheels if w.pin.name == "torch"), None)
    if torch is None:
        return None
    wheel = target.best((f, f.filename) for f in torch.files
                        if fits(f.filename, f.requires_python, target))
    if wheel is None:
        return None
    try:
        reply = net.get(wheel.url + ".metadata", timeout=METADATA_TIMEOUT)
        if reply.status != 200:
            raise FileNotFoundError(wheel.url + ".metadata")
        body = reply.body
    except OSError:
        # no PEP 658 file: the wheel's own METADATA, by range requests (what uv does)
        from samebits.solve.wheelmeta import BadWheel, wheel_metadata

        try:
            body = wheel_metadata(wheel.url, wheel.filename, timeout=METADATA_TIMEOUT,
                                  headers={})
        except (BadWheel, OSError):
            return None
    head = body.decode("utf-8", "replace").split("\n\n", 1)[0]
    return [line.split(":", 1)[1].strip() for line in head.splitlines()
            if line.lower().startswith("requires-dist:")]
