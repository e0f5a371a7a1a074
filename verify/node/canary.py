"""The known-answer canary: run ``verify.node.canaryrun`` on each device, compare its digest
with the committed digest of its equivalence class (``canary.toml`` beside this module).

Bits are only promised within a class of recorded facts (docs/explanation/numerics.md), so
the class key names the hardware and software the canary's bits depend on:

    GPU   gpu/<model>/sm<SM count>/driver<major>/torch-<version>/lock-<sha256[:12]>
    CPU   cpu/<model>/supports-<vector flags>/torch-<version>/lock-<sha256[:12]>

(torch's version is in the key as well as the lock's digest: the canary may run in another
interpreter than the lock's, ``--workload-python``, and its bits are that torch's.) The CPU's
part is what the machine *is*: its model and which of the vector extensions ATen dispatches
on it *supports* (``avx2``, ``fma``, ``avx512f/bw/dq/vl``; ``asimd``, ``sve``, ``sve2``: read
from /proc/cpuinfo, ``cpu_supports``), not the capability a process *chose*. The choice is a
setting: ``ATEN_CPU_CAPABILITY=default`` on an AVX2 machine gives other bits (a test pins
that), and keying the class by it would put such a node in a class of its own, compared with
nothing, where an admin wants it named among its peers. So nodes of the same hardware share a
class; the capability in use is recorded with the other settings (``settings.cpu_capability``,
``settings.ATEN_CPU_CAPABILITY``), and a digest that differs from the class's while a setting
differs is reported with that setting as its explanation (``verify.fleet.nodes``). A committed
digest recorded under another capability is not a verdict on this run: ``ok`` is None and
``settings_differ`` names the setting (``canary-unknown``, a warning, as before the key
changed).

The canary fixes what else could move the bits: one thread unless told (``--canary-threads``),
deterministic algorithms, ``CUBLAS_WORKSPACE_CONFIG=:4096:8``, float32 matmul precision
"highest", no TF32; the statement records every setting as torch reports it
(``canaryrun.settings``).

canary.toml (``format = 1``) holds ``[[class]]`` tables: ``key``, ``digest``, and how it was
recorded (``torch``, ``threads``, ``cpu_capability``, ``recorded_on``). ``samebits verify
node --record`` prints the entry for this machine (and adds it to ``--canary-digests FILE``
when given).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from samebits.errors import InputError, quote

CANARY_FILE = Path(__file__).with_name("canary.toml")
FORMAT = 1
DEFAULT_TIMEOUT = 120.0


def _word(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+_-]+", "-", text.strip()).strip("-") or "unknown"


# the /proc/cpuinfo flags ATen's CPU dispatch is decided by (x86_64, then aarch64)
VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "asimd", "sve",
                "sve2")
# the committed entry's settings a run must share to be judged by its digest
JUDGED_SETTINGS = ("cpu_capability", "threads")


def cpu_supports(flags: Sequence[str]) -> str:
    """The vector extensions of ``VECTOR_FLAGS`` the CPU has, ``+``-joined (``none``)."""
    have = set(flags)
    return "+".join(f for f in VECTOR_FLAGS if f in have) or "none"


def class_key(device: Mapping[str, Any], *, lock_sha256: str | None) -> str:
    """The equivalence class of one canary run (``device``: the worker's answer with the
    gate's facts: ``cpu_model``, ``cpu_supports``, ``gpu_name``, ``driver``...)."""
    s = device["settings"]
    lock = f"lock-{lock_sha256[:12]}" if lock_sha256 else "lock-none"
    torch = f"torch-{_word(s['torch'])}"
    if str(device["device"]).startswith("cuda"):
        major = (device.get("driver") or "unknown").split(".")[0]
        return "/".join(["gpu", _word(device.get("gpu_name") or "unknown"),
                         f"sm{device.get('sm_count') or 'unknown'}", f"driver{major}", torch,
                         lock])
    return "/".join(["cpu", _word(device.get("cpu_model") or "unknown"),
                     f"supports-{_word(device.get('cpu_supports') or 'unknown')}", torch,
                     lock])


def load_digests(path: Path = CANARY_FILE) -> dict[str, dict[str, Any]]:
    """key -> entry; a missing file is an empty table, a malformed one an InputError."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib

    if not path.is_file():
        return {}
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not TOML: {exc}") from None
    if doc.get("format") != FORMAT:
        raise InputError(f"{path}: format = {quote(doc.get('format'))}: this samebits reads "
                         f"canary digests format {FORMAT}")
    out: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(doc.get("class", [])):
        key, digest = entry.get("key"), entry.get("digest")
        if not isinstance(key, str) or not re.fullmatch(r"[0-9a-f]{64}", str(digest)):
            raise InputError(f"{path}: class[{i}]: needs key = \"...\" and digest = 64 hex "
                             f"digits (got key = {quote(key)}, digest = {quote(digest)})")
        out[key] = dict(entry)
    return out


def entry_toml(entry: Mapping[str, Any]) -> str:
    import tomli_w

    return tomli_w.dumps({"class": [dict(entry)]})


def record_into(path: Path, entry: Mapping[str, Any]) -> None:
    """Add (or replace) ``entry`` in ``path``, keys sorted: the file stays byte-stable."""
    import tomli_w

    from samebits._io import atomic_write

    table = load_digests(path)
    table[str(entry["key"])] = dict(entry)
    doc = {"format": FORMAT, "class": [table[k] for k in sorted(table)]}
    atomic_write(path, tomli_w.dumps(doc).encode())


def run_canary(python: str, device: str, *, threads: int = 1,
               timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """The worker's answer for ``device``, or ``{"device", "error"}`` (never raises for the
    worker's failures: a canary that cannot run is a reason, not a crash)."""
    from verify.gpu.launch import run_module

    args = ["-m", "verify.node.canaryrun", "--device", device, "--threads", str(threads)]
    try:
        proc = run_module(python, args, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"device": device, "error": f"the canary ran past {timeout:g} s"}
    except OSError as exc:
        return {"device": device, "error": f"{python}: {exc.strerror or exc}"}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return {"device": device, "error": f"the canary exited {proc.returncode}: {tail}"}
    try:
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"device": device, "error": "the canary printed no JSON"}


def verdict(run: Mapping[str, Any], *, lock_sha256: str | None,
            table: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One ``canary`` entry of the statement: device, class, digest, expected, ok
    (None when nothing is expected, or when the committed digest was recorded under other
    ``JUDGED_SETTINGS``: those are listed in ``settings_differ``), settings; ``error`` when
    it did not run."""
    if "error" in run:
        return {"device": run["device"], "class": None, "digest": None, "expected": None,
                "ok": None, "error": run["error"], "settings": {}}
    key = class_key(run, lock_sha256=lock_sha256)
    entry = table.get(key, {})
    expected = entry.get("digest")
    s = run["settings"]
    differ = [{"setting": k, "value": s.get(k), "recorded": entry[k]} for k in JUDGED_SETTINGS
              if expected is not None and entry.get(k) is not None and entry[k] != s.get(k)]
    ok = None if expected is None or differ else expected == run["digest"]
    out = {"device": run["device"], "class": key, "digest": run["digest"],
           "expected": expected, "ok": ok, "seconds": run.get("seconds"), "settings": dict(s)}
    return out | ({"settings_differ": differ} if differ else {})


def entry_of(v: Mapping[str, Any], *, recorded_on: str) -> dict[str, Any]:
    """The canary.toml entry that would make ``v`` (a verdict) known."""
    s = v["settings"]
    return {"key": v["class"], "digest": v["digest"], "torch": s.get("torch"),
            "threads": s.get("threads"), "cpu_capability": s.get("cpu_capability"),
            "recorded_on": recorded_on}
