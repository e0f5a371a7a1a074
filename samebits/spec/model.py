"""Environment specs: ``environments/<name>.toml`` read, merged along ``extends``, validated.

``read_spec(path)`` does the I/O (and follows ``extends``); ``EnvironmentSpec.from_mapping``
validates a merged mapping, purely, and raises one ``SpecError`` listing every problem, each
naming the file, the key and the value. The format, in full (docs/reference/spec.md):

    format = 1                       # spec format version
    name = "hopper"                  # defaults to the file's stem
    description = "..."
    extends = "base.toml"            # a spec, relative to this one; its keys are the defaults
    abstract = true                  # a base: never locked on its own
    generation = "hopper"            # volta | ampere | ada | hopper | blackwell | cpu
    python = "3.12"                  # the interpreter the environment runs on
    exclude-newer = 2026-11-29       # ignore releases after this instant: re-locks reproduce
    [platforms.linux-64]             # and/or [platforms.linux-aarch64]
    glibc = "2.28"                   # the oldest glibc the environment must run on
    [cuda]
    version = "13.0"                 # the CUDA line; becomes the lock's __cuda floor
    [conda]
    channels = ["conda-forge"]
    dependencies = ["pytorch 2.7.* cuda*"]
    [pypi]
    index = "https://pypi.org/simple"
    extra-indexes = ["https://download.pytorch.org/whl/cu118"]
                                     # more simple indexes, or file:// folders of wheels
                                     # (find-links); uv prefers them to `index`
    requirements = ["torch==2.13.0"] # PEP 508
    no-binary = ["opencc"]           # packages locked as their sdist, built (pip's --no-binary)
    [install]                        # where `samebits install` finds locked files; not locked
    find-links = ["wheels"]          # folders (relative: to the project root), searched first
    mirrors = { "https://download.pytorch.org/whl/" = "https://mirror.example/whl/" }

``[install]`` changes where archives come from, never which: it is left out of the spec's
digest, so adding it leaves the lock fresh.

Merging: tables merge key by key, the extending spec winning; ``conda.dependencies`` and
``pypi.requirements`` merge by package name (the extending spec's entry replaces the base's);
``platforms`` is replaced whole when the extending spec names it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from samebits._io import compact_json, sha256_hex
from samebits.spec.gpus import Generation

SPEC_FORMAT = 1
Platform = Literal["linux-64", "linux-aarch64"]
PLATFORMS: tuple[Platform, ...] = ("linux-64", "linux-aarch64")
ARCH = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}
# The manylinux floors uv can target (`uv pip compile --python-platform`).
GLIBC_FLOORS = ("2.17", "2.28", *(f"2.{n}" for n in range(31, 41)))
PYPI_DEFAULT_INDEX = "https://pypi.org/simple"

TOP_KEYS = (
    "format", "name", "description", "extends", "abstract", "generation", "python",
    "platforms", "cuda", "conda", "pypi", "exclude-newer", "install",
)
TABLE_KEYS = {
    "cuda": ("version",),
    "conda": ("channels", "dependencies"),
    "pypi": ("index", "extra-indexes", "requirements", "no-binary"),
    "install": ("find-links", "mirrors"),
}
# keys that say where install finds files, not what is locked: outside the spec's digest
UNLOCKED_KEYS = ("install",)
PLATFORM_KEYS = ("glibc",)
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformTarget:
    platform: Platform
    glibc: str

    @property
    def arch(self) -> str:
        return ARCH[self.platform]

    @property
    def uv_platform(self) -> str:
        return f"{self.arch}-manylinux_{self.glibc.replace('.', '_')}"


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentSpec:
    """A validated, merged environment spec."""

    name: str
    file: str
    sources: tuple[str, ...]
    description: str
    generation: Generation
    python: str
    platforms: tuple[PlatformTarget, ...]
    cuda: str | None
    conda_channels: tuple[str, ...]
    conda_dependencies: tuple[str, ...]
    pypi_index: str
    pypi_requirements: tuple[str, ...]
    exclude_newer: str | None
    digest: str
    find_links: tuple[str, ...] = ()                 # [install] find-links, as written
    mirrors: tuple[tuple[str, str], ...] = ()        # [install] mirrors, FROM -> TO
    pypi_extra_indexes: tuple[str, ...] = ()
    pypi_no_binary: tuple[str, ...] = ()             # canonical names: their sdist, built

    @classmethod
    def from_mapping(
        cls,
        data: Mapping[str, Any],
        *,
        file: str,
        sources: tuple[str, ...] = (),
        origins: Mapping[str, str] | None = None,
    ) -> EnvironmentSpec:
        """Validate a merged spec mapping; raise SpecError listing every problem."""
        from samebits.spec.validate import Validator

        v = Validator(file, origins or {})
        v.check_keys(data)
        fmt = data.get("format", SPEC_FORMAT)
        if fmt != SPEC_FORMAT:
            v.add("format", fmt, f"unknown spec format; this samebits reads format {SPEC_FORMAT}")
        name = v.string(data, "name", default=Path(file).stem)
        if name is not None and not NAME_RE.match(name):
            v.add("name", name, "use lower-case letters, digits, '.', '_' and '-'")
        if data.get("abstract", False) is True:
            v.add("abstract", True, "this spec is a base for others to extend; lock those")
        description = v.string(data, "description", default="") or ""
        generation = v.generation(data)
        python = v.python(data)
        platforms = v.platforms(data)
        cuda = v.cuda(data, generation)
        channels, conda_deps = v.conda(data)
        index, reqs = v.pypi(data)
        extra_indexes = v.extra_indexes(data)
        no_binary = v.no_binary(data)
        exclude_newer = v.exclude_newer(data)
        find_links, mirrors = v.install(data)
        if conda_deps == () and reqs == ():
            v.add("", None, "nothing to lock: add [conda] dependencies or [pypi] requirements")
        # with extra indexes torch may come from one of them (download.pytorch.org), not PyPI
        if generation is not None and platforms and reqs is not None and not extra_indexes:
            v.torch_facts(generation, cuda, platforms, index, reqs)
        v.raise_if_any()
        assert generation is not None and python is not None and name is not None
        return cls(
            name=name,
            file=file,
            sources=sources or (file,),
            description=description,
            generation=generation,
            python=python,
            platforms=platforms,
            cuda=cuda,
            conda_channels=channels,
            conda_dependencies=conda_deps or (),
            pypi_index=index,
            pypi_requirements=reqs or (),
            exclude_newer=exclude_newer,
            digest=spec_digest(data),
            find_links=find_links,
            mirrors=mirrors,
            pypi_extra_indexes=extra_indexes,
            pypi_no_binary=no_binary,
        )

    def target(self, platform: str) -> PlatformTarget:
        for t in self.platforms:
            if t.platform == platform:
                return t
        raise KeyError(platform)

    @property
    def compute_capabilities(self) -> tuple[str, ...]:
        return self.generation.compute_capabilities


def spec_digest(data: Mapping[str, Any]) -> str:
    """sha256 of the merged spec's canonical JSON: comments and key order do not count."""
    body = {k: v for k, v in data.items()
            if k not in ("extends", "description", *UNLOCKED_KEYS)}
    return sha256_hex(compact_json({"spec-format": SPEC_FORMAT, "spec": body}))


def parse_instant(text: str) -> dt.datetime | None:
    """``exclude-newer`` as an aware UTC datetime (a bare date means its midnight, UTC)."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc)
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.astimezone(dt.timezone.utc)


def exclude_newer_datetime(spec: EnvironmentSpec) -> dt.datetime | None:
    return parse_instant(spec.exclude_newer) if spec.exclude_newer else None


def req_name(r: str) -> str | None:
    try:
        return canonicalize_name(Requirement(r).name)
    except InvalidRequirement:
        return None


def get_dotted(data: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = data
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur
