"""``samebits verify nix-store``: does the Nix store hold every locked artifact, unmodified?

    samebits verify nix-store LOCK [--platform P] [--store URI] [--nix containers/cpu]

Per locked artifact of the platform: its store path (``nix-store --print-fixed-path``, the
flat fixed-output path ``samebits render nix`` gives it), Nix's own verdict
(``nix-store --verify-path``: valid, not valid, modified) and the sha256 of the bytes there
against the lock's. With ``--nix``, the rendered ``lock.nix`` is read by Nix itself
(``nix-instantiate --eval``) and every url and sha256 in it compared with the lock, so an
edited Nix file is named by artifact even before anything is built.

Exit codes: 0 every artifact present with the lock's hash (and the Nix file the lock's),
1 an artifact missing, modified or of another hash (or the Nix file differs), 2 bad input,
5 Nix is absent or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from samebits.childenv import child_environ
from samebits.cli import options
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, InputError, ToolError, UsageError, plural
from samebits.ui import Output


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "nix-store", parents=parents,
        help="does the Nix store hold every locked artifact with the lock's hash?",
        description="For every locked artifact of the platform: its fixed-output store path, "
        "`nix-store --verify-path` (Nix's own judge) and the sha256 of its bytes against the "
        "lock. With --nix, also every url and sha256 of a rendered lock.nix against the lock.",
        epilog="exit codes: 0 every artifact present and right, 1 missing, modified or "
        "another hash (or the Nix file differs from the lock), 2 bad input, 5 Nix failed")
    options.add_lock(p, what="the lock whose artifacts the store must hold (required)",
                     optional=True, once=True)
    options.deprecated_lockfile(p)
    options.add_platform(p, default="the lock's only platform, else this machine's")
    options.add_store(p)
    p.add_argument("--nix", type=Path, metavar="DIR",
                   help="a `samebits render nix` folder (or its lock.nix) to check against the "
                   "lock too")
    options.add_project(p)
    p.set_defaults(func=run_nix_store)


def run_nix_store(args: argparse.Namespace, out: Output) -> int:
    from samebits.host import host_platform
    from samebits.lock.read import load_lock
    from samebits.render.nixstore import NixStore, look_up

    lock = options.need(args.lock, "verify nix-store needs LOCK: the lock to check the store "
                        "against", hint="samebits verify nix-store lockfiles/cpu.conda-lock.yml")
    lockfile = options.lock_file(lock, options.project_of(args))
    env = load_lock(lockfile, name=lockfile.name, root=Path.cwd())
    platform = args.platform or (env.platforms[0] if len(env.platforms) == 1 else None)
    if platform is None:
        platform = host_platform()
    env.check_platform(platform)
    store = NixStore(args.store)
    file_problems = _nix_file_problems(args.nix, env, platform) if args.nix else []
    artifacts = [*env.conda(platform), *env.pip(platform)]
    with out.phase(f"checking {plural(len(artifacts), 'artifact')} in the Nix store "
                   "(verify-path, sha256)"):
        found = look_up(artifacts, store)
    rows: list[dict[str, Any]] = []
    for a in found:
        state = "ok" if a.ok else (a.state if a.state != "valid" else "hash")
        rows.append({"file": a.package.filename, "name": a.package.name,
                     "store_path": a.store_path, "state": state, "sha256": a.sha256,
                     "expected": a.package.sha256, "detail": a.detail or None})
    bad = [r for r in rows if r["state"] != "ok"]
    payload: dict[str, Any] = {"lockfile": str(lockfile), "platform": platform,
                               "store": args.store, "artifacts": rows,
                               "nix_file": [str(p) for p in file_problems],
                               "ok": not bad and not file_problems}
    lines = [f"nix store vs {lockfile} ({platform}): {len(rows)} artifacts"]
    words = {"ok": "ok", "missing": "MISSING", "modified": "MODIFIED", "hash": "OTHER HASH"}
    for r in rows:
        tail = ""
        if r["state"] == "hash":
            tail = f": sha256 {r['sha256']}, the lock says {r['expected']}"
        elif r["detail"] and r["state"] != "missing":
            tail = f": {r['detail']}"
        lines.append(f"  {words[r['state']]:<10} {r['file']}  {r['store_path']}{tail}")
    lines.extend(f"  NIX FILE   {p}" for p in file_problems)
    n_bad = len(bad) + len(file_problems)
    lines.append("result: every artifact is in the store with the lock's hash" if not n_bad
                 else f"result: {n_bad} problem" + ("" if n_bad == 1 else "s"))
    out.emit(payload, "\n".join(lines))
    return EXIT_OK if payload["ok"] else EXIT_DIFFERENT


def _nix_file_problems(path: Path, env: Any, platform: str) -> list[str]:
    from samebits.render.nix import LOCK_NIX, lock_nix_differences

    target = path / LOCK_NIX if path.is_dir() else path
    if not target.is_file():
        raise InputError(f"{target}: no such file", hint="render it: samebits render nix ENV")
    exe = shutil.which("nix-instantiate")
    if exe is None:
        raise ToolError("nix-instantiate is not installed",
                        hint="install Nix (Debian: apt-get install nix-bin)")
    proc = subprocess.run([exe, "--eval", "--strict", "--json", str(target.absolute())],
                          capture_output=True, text=True, timeout=120,
                          env=child_environ(os.environ))
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("warning:")]
        raise InputError(f"{target}: Nix cannot read it: {(lines or ['?'])[0][:200]}")
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        raise ToolError(f"nix-instantiate --eval {target}: not JSON") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{target}: not a samebits lock.nix")
    return lock_nix_differences(doc, env, platform, where=str(target))
