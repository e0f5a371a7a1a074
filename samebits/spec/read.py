"""Reading specs from disk: TOML, ``extends`` chains, merging, key origins.

``read_spec(path)`` is the I/O edge; ``samebits.spec.model.EnvironmentSpec.from_mapping`` validates
the merged mapping it produces. Merging: tables merge key by key, the extending spec winning;
``conda.dependencies`` and ``pypi.requirements`` merge by package name (the extending spec's
entry replaces the base's); ``platforms`` is replaced whole when the extending spec names it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samebits.errors import Problem, SpecError
from samebits.spec.model import TABLE_KEYS, EnvironmentSpec, req_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def load_toml(path: Path, *, display: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise SpecError([Problem(file=display, key="", value=None, message="no such file")],
                        hint="list the specs with `ls environments/`") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError([Problem(file=display, key="", value=None,
                                 message=f"not valid TOML: {exc}")]) from None
    except UnicodeDecodeError as exc:
        raise SpecError([Problem(file=display, key="", value=None,
                                 message=f"not UTF-8 text (byte {exc.start}): TOML is UTF-8")]
                        ) from None
    except IsADirectoryError:
        raise SpecError([Problem(file=display, key="", value=None,
                                 message="is a folder, not a spec file")]) from None


def _dep_key(kind: str, entry: str) -> str:
    if kind == "pypi.requirements":
        return req_name(entry) or entry
    return entry.split()[0].split("=")[0].split("<")[0].split(">")[0].lower()


def merge(base: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """The mapping ``child`` means when it extends ``base``."""
    out: dict[str, Any] = {k: v for k, v in base.items() if k != "abstract"}
    for key, val in child.items():
        if key in TABLE_KEYS and isinstance(val, Mapping) and isinstance(out.get(key), Mapping):
            table = dict(out[key])
            for sub, subval in val.items():
                dotted = f"{key}.{sub}"
                if dotted in ("conda.dependencies", "pypi.requirements") and isinstance(
                    subval, list) and isinstance(table.get(sub), list):
                    mine = {_dep_key(dotted, e): e for e in subval if isinstance(e, str)}
                    kept = [e for e in table[sub] if _dep_key(dotted, e) not in mine]
                    table[sub] = kept + list(subval)
                else:
                    table[sub] = subval
            out[key] = table
        else:
            out[key] = val
    return out


def _origins(data: Mapping[str, Any], file: str) -> dict[str, str]:
    out = {}
    for k, v in data.items():
        out[k] = file
        if isinstance(v, Mapping):
            for sub in v:
                out[f"{k}.{sub}"] = file
    return out


def read_mapping(path: Path, *, root: Path | None = None) -> tuple[dict[str, Any], tuple[str, ...],
                                                                    dict[str, str]]:
    """Read a spec and everything it extends: (merged mapping, source files, key origins)."""
    root = root or path.parent.parent
    chain: list[tuple[Path, str, dict[str, Any]]] = []
    cur = path
    while True:
        display = _display(cur, root)
        if cur.resolve() in [p.resolve() for p, _, _ in chain]:
            names = " -> ".join([*(d for _, d, _ in chain), display])
            raise SpecError([Problem(file=display, key="extends", value=cur.name,
                                     message=f"extends itself: {names}")])
        data = load_toml(cur, display=display)
        chain.append((cur, display, data))
        parent = data.get("extends")
        if parent is None:
            break
        if not isinstance(parent, str) or parent.startswith("/") or not parent.endswith(".toml"):
            raise SpecError([Problem(file=display, key="extends", value=parent,
                                     message="must be a relative path to a .toml spec")])
        cur = cur.parent / parent
        if not cur.exists():
            raise SpecError([Problem(file=display, key="extends", value=parent,
                                     message="no such spec")])
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for _, display, data in reversed(chain):
        merged = merge(merged, data) if merged else dict(data)
        origins.update(_origins(data, display))
    merged.pop("extends", None)
    return merged, tuple(d for _, d, _ in chain), origins


def _display(p: Path, root: Path) -> str:
    try:
        return str(p.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(p)


def read_spec(path: Path, *, root: Path | None = None) -> EnvironmentSpec:
    """Read, merge and validate the spec at ``path``."""
    data, sources, origins = read_mapping(path, root=root)
    return EnvironmentSpec.from_mapping(data, file=sources[0], sources=sources, origins=origins)


def is_abstract(path: Path) -> bool:
    return bool(load_toml(path, display=str(path)).get("abstract", False))
