"""Lockfiles: ``lockfiles/<env>.conda-lock.yml`` in conda-lock's v1 format.

``Lock`` is samebits' own frozen view. ``render_lock`` turns it into YAML text, validated by
conda-lock's own v1 model on the way out; ``parse_lock`` reads a file with conda-lock's own
parser (``conda_lock.lockfile.parse_conda_lock_file``), the judge of the format. The bytes are a
function of the Lock alone: packages sorted by (platform, manager, name), dependency maps
sorted, no timestamps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from samebits._io import sha256_hex
from samebits.errors import LockfileError

Manager = Literal["conda", "pip"]
LOCK_SUFFIX = ".conda-lock.yml"
META = "samebits."  # prefix of our keys in metadata.custom_metadata
LOCK_FORMAT = "1"  # bump when samebits writes different bytes for the same solve


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedPackage:
    name: str
    version: str
    manager: Manager
    platform: str
    url: str
    md5: str | None = None
    sha256: str | None = None
    build: str | None = None
    dependencies: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.platform, self.manager, self.name)

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1].split("#", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "manager": self.manager,
            "platform": self.platform,
            "dependencies": dict(self.dependencies),
            "url": self.url,
            "hash": {k: v for k, v in (("md5", self.md5), ("sha256", self.sha256)) if v},
        }
        if self.build is not None:
            out["build"] = self.build
        out["category"] = "main"
        out["optional"] = False
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Lock:
    platforms: tuple[str, ...]
    channels: tuple[str, ...]
    sources: tuple[str, ...]
    content_hash: Mapping[str, str]
    custom: Mapping[str, str]
    packages: tuple[LockedPackage, ...]
    header: str = field(default="", compare=False)

    def packages_for(self, platform: str, manager: Manager | None = None) -> list[LockedPackage]:
        return [p for p in self.packages
                if p.platform == platform and (manager is None or p.manager == manager)]

    def meta(self, key: str, default: str | None = None) -> str | None:
        return self.custom.get(META + key, default)

    @property
    def spec_digest(self) -> str | None:
        return self.meta("spec-digest")


def conda_dependencies(depends: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """conda ``depends`` strings ("python >=3.12,<3.13") as conda-lock's name -> spec map."""
    out: dict[str, str] = {}
    for dep in depends:
        name, _, rest = dep.strip().partition(" ")
        out[name] = rest.strip() or "*"
    return tuple(sorted(out.items()))


def sort_packages(packages: Iterable[LockedPackage]) -> tuple[LockedPackage, ...]:
    return tuple(sorted(packages, key=lambda p: p.key))


def lock_to_dict(lock: Lock) -> dict[str, Any]:
    """The v1 document, in conda-lock's key order."""
    meta: dict[str, Any] = {
        "content_hash": dict(sorted(lock.content_hash.items())),
        "channels": [{"url": c, "used_env_vars": []} for c in lock.channels],
        "platforms": list(lock.platforms),
        "sources": list(lock.sources),
        "custom_metadata": dict(sorted(lock.custom.items())),
    }
    return {
        "version": 1,
        "metadata": meta,
        "package": [p.to_dict() for p in sort_packages(lock.packages)],
    }


def render_lock(lock: Lock) -> str:
    """The lockfile's text; conda-lock's v1 model validates it first."""
    validate_lock(lock)
    return lock_text(lock)


def lock_text(lock: Lock) -> str:
    """The lockfile's text, not validated (``render_lock`` validates)."""
    return lock.header + dump_yaml(lock_to_dict(lock))


def validate_lock(lock: Lock) -> None:
    """conda-lock's v1 model accepts the document or this raises (a samebits bug)."""
    from conda_lock.lockfile.v1.models import Lockfile as LockfileV1

    try:
        LockfileV1.model_validate(lock_to_dict(lock))
    except Exception as exc:  # pydantic.ValidationError; a bug in samebits if it happens
        raise LockfileError(f"samebits built a lock conda-lock rejects: {exc}") from exc


def dump_yaml(doc: Any, *, dumper: Any = None) -> str:
    """PyYAML's safe dump with libyaml's emitter when PyYAML has it (several times faster on
    a large lock). Both emit the same bytes for what a lock holds; a test keeps it so, because
    the bytes must not depend on which one a machine has."""
    dumper = dumper or getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False, width=4096,
                     allow_unicode=True)


def _header_lines(text: str) -> str:
    lines = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        lines.append(line)
    return "".join(lines)


def parse_lock(path: Path) -> Lock:
    """Read a conda-lock v1 (or v2) file with conda-lock's own parser."""
    from conda_lock.lockfile import parse_conda_lock_file

    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise LockfileError(f"{path}: no such lockfile",
                            hint="run `samebits lock` to create it") from None
    except OSError as exc:
        raise LockfileError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise LockfileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        parsed = parse_conda_lock_file(path)
    except yaml.YAMLError as exc:
        raise LockfileError(f"{path}: not YAML: {exc}") from None
    except Exception as exc:  # conda-lock raises pydantic/ValueError subclasses
        msg = re.sub(r"\s+For further information visit \S+", "", str(exc)).strip()
        raise LockfileError(f"{path}: not a conda-lock file: {msg}",
                            hint="samebits reads conda-lock v1/v2 files") from None
    packages = []
    for p in parsed.package:
        packages.append(LockedPackage(
            name=p.name,
            version=p.version,
            manager=p.manager,
            platform=p.platform,
            url=p.url,
            md5=p.hash.md5,
            sha256=p.hash.sha256,
            build=p.build,
            dependencies=tuple(sorted(p.dependencies.items())),
        ))
    m = parsed.metadata
    return Lock(
        platforms=tuple(m.platforms),
        channels=tuple(c.url for c in m.channels),
        sources=tuple(m.sources),
        content_hash=dict(m.content_hash),
        custom=dict(m.custom_metadata or {}),
        packages=sort_packages(packages),
        header=_header_lines(text),
    )


def lock_digest(path: Path) -> str:
    """sha256 of the lockfile's bytes: what attestations and images name."""
    return sha256_hex(Path(path).read_bytes())


def lockfile_path(lockfiles: Path, name: str) -> Path:
    return Path(lockfiles) / f"{name}{LOCK_SUFFIX}"
