"""Writing a spec: the mapping ``samebits init`` and ``samebits freeze`` draft, as TOML.

``spec_mapping(...)`` builds the mapping in the key order of the committed specs
(docs/reference/spec.md); ``spec_toml(mapping, comments)`` writes it with tomli-w, the
comment lines first.
Both are pure; ``EnvironmentSpec.from_mapping`` validates the same mapping before anything is
written, so a spec samebits writes always reads back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tomli_w

from samebits.spec.model import PYPI_DEFAULT_INDEX, SPEC_FORMAT


def spec_mapping(*, name: str, description: str, generation: str, python: str,
                 platforms: Mapping[str, str], cuda: str | None = None,
                 exclude_newer: str | None = None, channels: Sequence[str] = (),
                 conda: Sequence[str] = (), index: str = PYPI_DEFAULT_INDEX,
                 extra_indexes: Sequence[str] = (),
                 requirements: Sequence[str] = (),
                 no_binary: Sequence[str] = ()) -> dict[str, Any]:
    """A spec's mapping; ``platforms`` maps each platform to its glibc floor."""
    out: dict[str, Any] = {"format": SPEC_FORMAT, "name": name, "description": description,
                           "generation": generation, "python": python}
    if exclude_newer:
        out["exclude-newer"] = exclude_newer
    out["platforms"] = {p: {"glibc": g} for p, g in platforms.items()}
    if cuda is not None:
        out["cuda"] = {"version": cuda}
    if conda:
        out["conda"] = {"channels": list(channels), "dependencies": list(conda)}
    if requirements:
        pypi: dict[str, Any] = {"index": index}
        if extra_indexes:
            pypi["extra-indexes"] = list(extra_indexes)
        pypi["requirements"] = list(requirements)
        if no_binary:
            pypi["no-binary"] = list(no_binary)
        out["pypi"] = pypi
    return out


def spec_toml(mapping: Mapping[str, Any], comments: Sequence[str] = ()) -> str:
    """The spec file: ``comments`` (each one line, written after "# "), then the TOML."""
    head = "".join(f"# {c}\n" if c else "#\n" for c in comments)
    return head + tomli_w.dumps(mapping, indent=4)
