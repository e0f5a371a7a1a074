"""conda explicit files (``@EXPLICIT``): what ``conda list --explicit --md5``,
``conda-lock render --kind explicit`` and ``samebits render conda`` write.

The format (conda's ``conda.misc.explicit``): comment lines, one ``@EXPLICIT`` line, then one
package URL per line, its fragment the archive hash: ``#<md5>`` (32 hex), ``#sha256:<hex>`` or
``#<sha256>`` (64 hex). ``# platform: linux-64`` names the subdir. conda-lock adds the PyPI
part as comments, ``# pip NAME @ URL#sha256=HEX``; they are read too. Name, version and build
come from the archive's file name (``name-version-build.conda``), as conda reads them.

Not carried: dependencies (an explicit file has none; the packages are the whole set).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from samebits.errors import LockfileError
from samebits.foreign.model import Conversion, Converted, ReadOptions
from samebits.lock.model import Lock, LockedPackage, sort_packages

FORMAT = "conda explicit"
HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")
HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
PIP_LINE = re.compile(r"^#\s*pip\s+(?P<name>[A-Za-z0-9._-]+)\s*@\s*(?P<url>\S+)\s*$")
ARCHIVE_SUFFIXES = (".conda", ".tar.bz2")


def is_explicit(text: str) -> bool:
    return any(line.strip() == "@EXPLICIT" for line in text.splitlines())


def _quote(value: str) -> str:
    return value if len(value) <= 80 else value[:77] + "..."


def _split_archive(filename: str) -> tuple[str, str, str] | None:
    """``name-version-build.conda`` -> (name, version, build)."""
    for suffix in ARCHIVE_SUFFIXES:
        if filename.endswith(suffix):
            stem = filename[: -len(suffix)]
            parts = stem.rsplit("-", 2)
            if len(parts) == 3 and all(parts):
                return parts[0], parts[1], parts[2]
    return None


def _hashes(fragment: str) -> tuple[str | None, str | None] | None:
    """(md5, sha256) from a URL fragment; None when it is not a hash."""
    if not fragment:
        return None, None
    if fragment.startswith("sha256:") and HEX64.match(fragment[7:]):
        return None, fragment[7:].lower()
    if fragment.startswith("md5:") and HEX32.match(fragment[4:]):
        return fragment[4:].lower(), None
    if HEX32.match(fragment):
        return fragment.lower(), None
    if HEX64.match(fragment):
        return None, fragment.lower()
    return None


def read_explicit(text: str, *, source: str, options: ReadOptions) -> Converted:
    platform: str | None = None
    seen_marker = False
    problems: list[str] = []
    conda: list[tuple[int, str, str, str, str, str | None, str | None]] = []
    pip: list[tuple[str, str, str, str | None]] = []
    unhashed: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = re.match(r"^#\s*platform:\s*(\S+)", line)
            if m:
                platform = m.group(1)
            pm = PIP_LINE.match(line)
            if pm:
                url, _, frag = pm.group("url").partition("#")
                sha = frag[7:] if frag.startswith("sha256=") and HEX64.match(frag[7:]) else None
                try:
                    _, version, _, _ = parse_wheel_filename(PurePosixPath(urlsplit(url).path)
                                                            .name)
                except InvalidWheelFilename:
                    problems.append(f"line {n}: {_quote(line)!r}: not a wheel URL")
                    continue
                if sha is None:
                    unhashed.append(pm.group("name"))
                pip.append((str(canonicalize_name(pm.group("name"))), str(version), url, sha))
            continue
        if line == "@EXPLICIT":
            seen_marker = True
            continue
        if not seen_marker:
            problems.append(f"line {n}: {_quote(line)!r}: before @EXPLICIT")
            continue
        url, _, frag = line.partition("#")
        hashes = _hashes(frag)
        filename = unquote(PurePosixPath(urlsplit(url).path).name)
        parts = _split_archive(filename)
        if not urlsplit(url).scheme or parts is None or hashes is None:
            why = ("not a hash (expected #<md5>, #sha256:<hex>)" if hashes is None and parts
                   else "not a conda package URL (…/name-version-build.conda or .tar.bz2)")
            problems.append(f"line {n}: {_quote(line)!r}: {why}")
            continue
        md5, sha = hashes
        if not md5 and not sha:
            unhashed.append(parts[0])
        subdir = PurePosixPath(urlsplit(url).path).parent.name
        conda.append((n, *parts, url, md5, sha))
        if platform is None and subdir not in ("noarch", ""):
            platform = subdir if subdir.count("-") == 1 else None
    if problems:
        head = problems[0] if len(problems) == 1 else (
            f"{len(problems)} problems:\n  " + "\n  ".join(problems))
        raise LockfileError(f"{source}: {head}", hint="a conda explicit file lists one "
                            "package URL per line after @EXPLICIT")
    if platform is None:
        if len(options.platforms) != 1:
            raise LockfileError(f"{source}: no '# platform:' line and no package names one",
                                hint="pass --platform")
        platform = options.platforms[0]
    packages = [LockedPackage(name=name, version=version, manager="conda", platform=platform,
                              url=url, md5=md5, sha256=sha, build=build)
                for _, name, version, build, url, md5, sha in conda]
    packages += [LockedPackage(name=name, version=version, manager="pip", platform=platform,
                               url=url, sha256=sha) for name, version, url, sha in pip]
    channels = tuple(dict.fromkeys(url.rsplit("/", 2)[0] for _, _, _, _, url, _, _ in conda))
    notes = ["an explicit file records no dependencies: the packages are the whole set"]
    if unhashed:
        notes.append(f"no hash for {', '.join(unhashed)}: install refuses them")
    python = next((v for _, name, v, *_ in conda if name == "python"), None)
    custom = {"samebits.converted-from": FORMAT}
    if python:
        custom["samebits.python"] = ".".join(python.split(".")[:2])
    lock = Lock(platforms=(platform,), channels=channels, sources=(source,), content_hash={},
                custom=custom, packages=sort_packages(packages))
    return Converted(lock=lock, conversion=Conversion(
        format=FORMAT, source=source, choices=(("platform", platform),), notes=tuple(notes)))
