"""Built sdists in a lock, and what ``samebits install`` can place at all.

A PyPI package with no wheel that fits the target is locked as its sdist: the lock's ``url``
and ``sha256`` are the sdist's, the artifact everyone can check. ``samebits lock`` builds it
into a wheel (``samebits.solve.sdist``) and records the build. conda-lock v1 has no field for
it (its package entries are strict), so each build is one string in
``metadata.custom_metadata``, keyed by platform and package, its value canonical JSON:

    samebits.build.linux-64.tinypkg: '{"backend":"flit_core.buildapi","format":1,
      "frontend":"uv 0.13.9","python":"3.12","requires":[["flit-core","3.9.0",
      "https://files.pythonhosted.org/.../flit_core-3.9.0-py3-none-any.whl","7aad..."]],
      "sdist":"<sha256 of the sdist>","sha256":"<sha256 of the built wheel>",
      "source-date-epoch":1700000000,"wheel":"tinypkg-1.0-py3-none-any.whl"}'

``requires`` is the whole build environment, every wheel by URL and sha256: the
``[build-system] requires`` and what the backend's ``get_requires_for_build_wheel`` asked for
(PEP 517's dynamic requirements, ``samebits.install.buildhooks``), resolved together.
``dynamic`` lists what the backend asked for, as it said it, and is left out when it asked for
nothing (so such a record reads and hashes as before the field existed; a record without it
reads as one that asked for nothing):

    samebits.build.linux-64.lit: '{"backend":"setuptools.build_meta","dynamic":["wheel"],
      "format":1,...,"requires":[["setuptools","68.0.0",...],["wheel","0.40.0",...]],...}'

``source-date-epoch`` is the ``SOURCE_DATE_EPOCH`` the backend ran with; ``python`` the
interpreter line it ran on. ``samebits install`` builds it again from exactly these
(``samebits.install.build``: uv installs the static requirements, asks the backend, then
installs what it asked for, every one of them found in ``requires`` or the build fails), or
takes the wheel from the cache, where it is filed by its sha256, and refuses a wheel of other
bytes.

``placement_problems`` says, from file names and records alone (before anything is
downloaded), which locked packages install cannot place: a pip package must be a wheel, or an
sdist with a build of it recorded (never a VCS checkout); a conda package a ``.conda`` or
``.tar.bz2``.

    InputError (samebits.errors)
    ├── UnplaceableError    locked packages install cannot place, every one named
    └── BuildDiffersError   an sdist built here into other bytes than the lock recorded
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from samebits.errors import InputError, LockfileError, Problem, plural
from samebits.lock.model import META, LockedPackage

BUILD_PREFIX = META + "build."
BUILD_FORMAT = 1
SDIST_SUFFIXES = (".tar.gz", ".zip")
CONDA_SUFFIXES = (".conda", ".tar.bz2")
DEFAULT_EPOCH = 315532800  # 1980-01-01T00:00:00Z, the oldest instant a zip entry can hold
RELOCK = "re-lock it with `samebits lock`, which builds sdists and records the builds"


class UnplaceableError(InputError):
    """Locked packages that install has no way to place; found before anything downloads."""


class BuildDiffersError(InputError):
    """An sdist whose wheel, built here from the recorded inputs, is not the recorded one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildRequirement:
    """One wheel of a build environment."""

    name: str
    version: str
    url: str
    sha256: str

    @property
    def filename(self) -> str:
        from urllib.parse import unquote

        return unquote(self.url.rsplit("/", 1)[-1].split("#", 1)[0])


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildRecord:
    """How one sdist of one platform was built into a wheel, and the wheel's hash."""

    platform: str
    name: str
    sdist: str                 # sha256 of the sdist (the lock's package hash)
    wheel: str                 # file name of the built wheel
    sha256: str                # sha256 of the built wheel
    python: str                # X.Y the backend ran on
    source_date_epoch: int
    backend: str
    requires: tuple[BuildRequirement, ...] = ()
    dynamic: tuple[str, ...] = ()  # what get_requires_for_build_wheel asked for (in requires)
    frontend: str = ""         # the uv that built it (informative: not an input)

    @property
    def key(self) -> str:
        return f"{BUILD_PREFIX}{self.platform}.{self.name}"

    def inputs(self) -> dict[str, Any]:
        """Everything the wheel's bytes are a function of, as recorded."""
        doc: dict[str, Any] = {
            "sdist": self.sdist, "python": self.python,
            "source-date-epoch": self.source_date_epoch, "backend": self.backend,
            "requires": [[r.name, r.version, r.url, r.sha256] for r in self.requires]}
        if self.dynamic:  # absent when empty: the records written before it read the same
            doc["dynamic"] = list(self.dynamic)
        return doc

    def to_text(self) -> str:
        doc = {"format": BUILD_FORMAT, **self.inputs(), "wheel": self.wheel,
               "sha256": self.sha256, "frontend": self.frontend}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_text(cls, key: str, text: str, *, file: str) -> BuildRecord:
        """The record at ``key``; a LockfileError naming the file, key and value if it is
        not one this samebits wrote."""
        platform, _, name = key.removeprefix(BUILD_PREFIX).partition(".")
        doc, bad = record_doc(key, text, file=file, what="build record", fmt=BUILD_FORMAT,
                              hint=RELOCK)
        try:
            requires = tuple(BuildRequirement(name=str(n), version=str(v), url=str(u),
                                              sha256=_hex(s)) for n, v, u, s in doc["requires"])
            dynamic = doc.get("dynamic", [])
            if not isinstance(dynamic, list) or not all(isinstance(d, str) for d in dynamic):
                raise ValueError(f"dynamic = {dynamic!r}: not a list of requirement strings")
            return cls(platform=platform, name=name, sdist=_hex(doc["sdist"]),
                       wheel=str(doc["wheel"]), sha256=_hex(doc["sha256"]),
                       python=str(doc["python"]),
                       source_date_epoch=int(doc["source-date-epoch"]),
                       backend=str(doc["backend"]), requires=requires,
                       dynamic=tuple(dynamic), frontend=str(doc.get("frontend", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise bad(f"incomplete build record ({type(exc).__name__}: {exc})") from None


def record_doc(key: str, text: str, *, file: str, what: str, fmt: int, hint: str
               ) -> tuple[dict[str, Any], Callable[[str], LockfileError]]:
    """A samebits record kept in ``metadata.custom_metadata`` (a build, the shared paths):
    (its JSON document, how to refuse it), after the checks every record takes: JSON, an
    object, this format. The error names the file, the key and the value."""
    def bad(message: str) -> LockfileError:
        return LockfileError([Problem(file=file, key=f"metadata.custom_metadata.{key}",
                                      value=text, message=message)], hint=hint)

    try:
        doc = json.loads(text)
    except ValueError:
        raise bad("not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise bad(f"not a {what} of format {fmt}")
    return doc, bad


def _hex(value: object) -> str:
    text = str(value).lower()
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ValueError(f"not a sha256: {value!r}")
    return text


def build_metadata(records: Iterable[BuildRecord]) -> dict[str, str]:
    """The custom_metadata entries of these builds."""
    return {r.key: r.to_text() for r in sorted(records, key=lambda r: r.key)}


def builds_of(custom: Mapping[str, str], *, file: str) -> dict[tuple[str, str], BuildRecord]:
    """(platform, package name) -> its build, for every build a lock's metadata records."""
    out = {}
    for key, text in custom.items():
        if key.startswith(BUILD_PREFIX):
            record = BuildRecord.from_text(key, text, file=file)
            out[(record.platform, record.name)] = record
    return out


def is_sdist(filename: str) -> bool:
    return filename.endswith(SDIST_SUFFIXES)


def placement_problem(p: LockedPackage,
                      builds: Mapping[tuple[str, str], BuildRecord]) -> str | None:
    """Why install cannot place ``p``, or None. Decided from names and records alone."""
    if p.vcs:  # conda-lock's git+https://...@<commit>: a checkout, no archive to prove
        return f"{p.url}: a VCS checkout, which install cannot build yet"
    name = p.filename
    if p.manager == "conda":
        return None if name.endswith(CONDA_SUFFIXES) else \
            f"{name}: not a conda package (.conda, .tar.bz2)"
    if name.endswith(".whl"):
        return None
    if not is_sdist(name):
        return f"{name}: neither a wheel (.whl) nor an sdist (.tar.gz, .zip)"
    record = builds.get((p.platform, p.name))
    if record is None:
        return f"{name}: an sdist, and the lock records no build of it"
    if p.sha256 is None or record.sdist != p.sha256.lower():
        return (f"{name}: the lock's build record {record.key} is of the sdist with sha256 "
                f"{record.sdist}, not of this one ({p.sha256})")
    return None


def check_placeable(packages: Iterable[LockedPackage],
                    builds: Mapping[tuple[str, str], BuildRecord], *, origin: str,
                    hint: str | None = None) -> None:
    """Raise one UnplaceableError naming every package install cannot place (the lock uses
    the same rule before it writes, so a lock it writes passes)."""
    problems = sorted(f"{p.platform}: {p.name} {p.version}: {why}" for p in packages
                      if (why := placement_problem(p, builds)) is not None)
    if not problems:
        return
    head = problems[0] if len(problems) == 1 else (
        f"{plural(len(problems), 'locked package')} install cannot place:\n  "
        + "\n  ".join(problems))
    raise UnplaceableError(f"{origin}: {head}", hint=hint or (
        "nothing was downloaded; " + RELOCK + " (a lock of another tool's format: lock its "
        "requirements with samebits)"))
