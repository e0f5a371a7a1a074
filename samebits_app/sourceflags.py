"""``--find-links DIR`` and ``--mirror FROM=TO``: where install finds locked files by content.

The flags are ``samebits.cli.options.add_sources``'; what they give is read here, for
``samebits install`` and ``samebits audit --target``. The sources, in the order they
are searched: the flags, then the spec's ``[install]`` table (when the lock is a project
environment's; relative folders are relative to the project root), then
``SAMEBITS_FIND_LINKS`` (the user's own folders, separated by ``:``). What they mean and how
each file is checked: ``samebits.install.sources``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from samebits.install.sources import (
    Sources,
    file_roots,
    sources_from,
    user_sources,
)
from samebits.project import Project


def sources_for(args: argparse.Namespace, project: Project | None = None,
                env_name: str | None = None) -> Sources:
    """The flags' sources, then the spec's (when ``env_name`` is a spec of ``project``),
    then the user's."""
    flags = sources_from(getattr(args, "find_links", None) or (),
                         getattr(args, "mirror", None) or (), base=Path.cwd())
    out = flags
    if project is not None and env_name and project.spec_path(env_name).is_file():
        from samebits.spec.read import read_spec

        spec = read_spec(project.spec_path(env_name), root=project.root)
        out = out.merged(sources_from(spec.find_links,
                                      [f"{a}={b}" for a, b in spec.mirrors],
                                      base=project.root,
                                      where=f"{spec.file}: [install] find-links"))
        out = out.with_roots(*spec_roots(spec))
    return out.merged(user_sources())


def spec_roots(spec: Any) -> tuple[Path, ...]:
    """A spec's file:// channels and indexes: folders its author named, which a lock solved
    from it may have file:// URLs into."""
    return file_roots((*spec.conda_channels, spec.pypi_index, *spec.pypi_extra_indexes))


def own_sources(project: Project, env: Any) -> Sources:
    """Where the project's own lock ``env`` (a ``LockedEnv``) may read file:// URLs from: its
    folder, the project's, its spec's file:// channels and indexes (``samebits check``,
    ``bundle``)."""
    out = Sources(file_roots=(Path(env.path).absolute().parent, project.root))
    if project.spec_path(env.name).is_file():
        from samebits.spec.read import read_spec

        out = out.with_roots(*spec_roots(read_spec(project.spec_path(env.name),
                                                   root=project.root)))
    return out
