"""Where a project keeps things: environments/<id>.toml -> lockfiles/<id>.conda-lock.yml.

An environment's id is its spec's path under environments/ without ``.toml``: ``hopper``, or
``conda-forge/hopper`` for a flavour kept in a subfolder. ``samebits lock`` with no names takes
every top-level spec that is not ``abstract``; flavours are locked by naming them.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from samebits.errors import UsageError, clip
from samebits.lock.model import LOCK_SUFFIX


@dataclass(frozen=True, slots=True, kw_only=True)
class Project:
    root: Path
    environments: Path
    lockfiles: Path

    @classmethod
    def at(cls, root: Path, *, environments: Path | None = None,
           lockfiles: Path | None = None) -> Project:
        root = Path(root)
        return cls(root=root, environments=environments or root / "environments",
                   lockfiles=lockfiles or root / "lockfiles")

    def spec_path(self, env_id: str) -> Path:
        return self.environments / f"{env_id}.toml"

    def lock_path(self, env_id: str) -> Path:
        return self.lockfiles / f"{env_id}{LOCK_SUFFIX}"

    def default_ids(self) -> list[str]:
        if not self.environments.is_dir():
            raise UsageError(f"{self.environments}: no such folder",
                             hint="run samebits from the project root or pass --environments")
        from samebits.spec.read import is_abstract  # the specs' reader: only when listing them

        return sorted(p.stem for p in self.environments.glob("*.toml") if not is_abstract(p))

    def all_ids(self) -> list[str]:
        from samebits.spec.read import is_abstract

        return sorted(str(p.relative_to(self.environments).with_suffix(""))
                      for p in self.environments.rglob("*.toml") if not is_abstract(p))

    def lock_ids(self) -> list[str]:
        """The id of every lockfile under ``lockfiles`` (flavours in subfolders included)."""
        if not self.lockfiles.is_dir():
            return []
        return sorted(p.relative_to(self.lockfiles).as_posix().removesuffix(LOCK_SUFFIX)
                      for p in self.lockfiles.rglob(f"*{LOCK_SUFFIX}"))

    def resolve(self, names: list[str]) -> list[str]:
        """Environment ids for ``names`` (ids, or paths to spec files); all defaults if none."""
        if not names:
            return self.default_ids()
        out = []
        for name in names:
            cand = Path(name)
            hint = init_hint(cand)
            if hint is not None:
                raise UsageError(f"{clip(name, 120)}: an author's {hint[1]}, not a spec: a "
                                 "spec is drafted from it first", hint=hint[0])
            if cand.suffix == ".toml" and cand.exists():
                try:
                    name = str(cand.resolve().relative_to(self.environments.resolve())
                               .with_suffix(""))
                except ValueError:
                    raise UsageError(f"{cand}: not under {self.environments}") from None
            if not self.spec_path(name).exists():
                raise unknown_environment(name, self.all_ids(), self.spec_path(name))
            out.append(name)
        return out


def init_hint(path: Path) -> tuple[str, str] | None:
    """(``samebits init NAME --from FILE``, the file's kind) when ``path`` is a file
    ``samebits init`` reads rather than a spec; None otherwise."""
    if not path.is_file():
        return None
    from samebits.foreign.sources import source_format

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fmt = source_format(path.name, text)
    if fmt is None:
        return None
    folder = path.absolute().parent.name
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in folder.lower())
    name = name.strip("._-") or "paper"
    return f"samebits init {name} --from {path}", fmt


def unknown_environment(name: str, known: Sequence[str], looked: Path,
                        hint: str | None = None) -> UsageError:
    """``unknown environment 'hoper' (no environments/hoper.toml); known: ada, ...; did you
    mean hopper?``: every known id, and the closest one when one is close; ``hint`` is the
    error's hint (what else the argument may be)."""
    text = f"unknown environment '{clip(name, 80)}' (no {clip(str(looked), 120)}); known: " \
        + (", ".join(known) or "none")
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower()[:200], list(lowered), n=1, cutoff=0.7)
    if close:
        return UsageError(f"{text}; did you mean {lowered[close[0]]}?", hint=hint)
    return UsageError(text, hint=hint)
