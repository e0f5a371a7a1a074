"""What changed between two locks, per platform: added, removed and changed packages.

The two locks can come from any formats samebits reads (``samebits.lock.read.load_lock``):
packages match by (manager, name), PyPI names canonicalised (PEP 503) so ``Typing_Extensions``
in one file is ``typing-extensions`` in the other; ``platforms`` restricts the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from packaging.utils import canonicalize_name

from samebits.lock.model import Lock, LockedPackage

DIFF_FORMAT = 1
FIELDS = ("version", "build", "url", "md5", "sha256")


def _brief(p: LockedPackage) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "manager": p.manager, "version": p.version}
    if p.build:
        out["build"] = p.build
    return out


def _key(p: LockedPackage) -> tuple[str, str]:
    return (p.manager, str(canonicalize_name(p.name)) if p.manager == "pip" else p.name)


def diff_locks(old: Lock, new: Lock, *, platforms: Sequence[str] = ()) -> dict[str, Any]:
    """A versioned, canonical diff document; ``identical`` is true when nothing differs.
    ``platforms``: compare only these (default: every platform of either lock)."""
    out: dict[str, Any] = {}
    names = sorted(set(old.platforms) | set(new.platforms))
    for plat in [p for p in names if not platforms or p in platforms]:
        a = {_key(p): p for p in old.packages_for(plat)}
        b = {_key(p): p for p in new.packages_for(plat)}
        changed = []
        for key in sorted(a.keys() & b.keys()):
            fields = [f for f in FIELDS if getattr(a[key], f) != getattr(b[key], f)]
            if fields:
                changed.append({"name": key[1], "manager": key[0], "fields": fields,
                                "old": {f: getattr(a[key], f) for f in FIELDS},
                                "new": {f: getattr(b[key], f) for f in FIELDS}})
        entry: dict[str, Any] = {
            "added": [_brief(b[k]) for k in sorted(b.keys() - a.keys())],
            "removed": [_brief(a[k]) for k in sorted(a.keys() - b.keys())],
            "changed": changed,
        }
        if plat not in old.platforms:
            entry["platform"] = "added"
        elif plat not in new.platforms:
            entry["platform"] = "removed"
        out[plat] = entry
    identical = all(not (e["added"] or e["removed"] or e["changed"]) for e in out.values())
    return {"format": DIFF_FORMAT, "identical": identical, "platforms": out}


def _label(p: dict[str, Any]) -> str:
    build = f" {p['build']}" if p.get("build") else ""
    return f"{p['name']} {p['version']}{build} ({p['manager']})"


def format_diff(doc: dict[str, Any]) -> str:
    if doc["identical"]:
        return "no package differs"
    lines = []
    for plat, e in doc["platforms"].items():
        if not (e["added"] or e["removed"] or e["changed"]):
            continue
        n = len(e["added"]) + len(e["removed"]) + len(e["changed"])
        lines.append(f"{plat}: {len(e['added'])} added, {len(e['removed'])} removed, "
                     f"{len(e['changed'])} changed" + (f" (platform {e['platform']})"
                                                       if "platform" in e else ""))
        assert n
        lines += [f"  + {_label(p)}" for p in e["added"]]
        lines += [f"  - {_label(p)}" for p in e["removed"]]
        for c in e["changed"]:
            if "version" in c["fields"] or "build" in c["fields"]:
                old, new = (" ".join(str(c[side][f]) for f in ("version", "build") if c[side][f])
                            for side in ("old", "new"))
                lines.append(f"  ~ {c['name']} {old} -> {new} ({c['manager']})")
            else:
                lines.append(f"  ~ {c['name']} same version, different "
                             f"{', '.join(c['fields'])} ({c['manager']})")
    return "\n".join(lines)
