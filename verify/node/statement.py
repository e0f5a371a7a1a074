"""The gate's in-toto Statement v1 (``verify.gpu.attest``'s statement type, DSSE with
``--sign``): predicate type ``https://samebits.dev/node/v1``.

    subject    the environment's digests (``environment``, ``packages``), the lockfile's;
               with neither, ``node/<host>`` with the sha256 of the predicate itself, as
               ``json.dumps(predicate, sort_keys=True, separators=(",", ":"))`` in UTF-8
               (``predicate_digest``): a digest anyone can recompute, not a stand-in
    predicate  {"format": 1, "samebits", "host", "healthy",
                "reasons": [{"code", "detail", "level", "gpu"?}],
                "env": {files, proven_by_identity, proven_by_hash, drift, drifted, proof,
                        why, ...} | null,
                "gpus": [{gpu, name, uuid, values, unreadable, errors, coverage?}],
                "canary": [{device, class, digest, expected, ok, settings, ...}],
                "settings": {what the gate was asked: full, strict, thresholds, ...},
                "seconds"}

The fleet report aggregates these by that shape: the key names above are stable.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from samebits import __version__
from verify.gpu.attest import STATEMENT_TYPE

PREDICATE_TYPE = "https://samebits.dev/node/v1"
PREDICATE_FORMAT = 1


def predicate_digest(predicate: Mapping[str, Any]) -> str:
    """sha256 of the predicate's canonical JSON: sorted keys, compact separators."""
    text = json.dumps(predicate, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def build_node_statement(*, host: str, healthy: bool, reasons: Sequence[Mapping[str, Any]],
                         env: Mapping[str, Any] | None, gpus: Sequence[Mapping[str, Any]],
                         canary: Sequence[Mapping[str, Any]], settings: Mapping[str, Any],
                         seconds: float, lock: tuple[str, str] | None = None
                         ) -> dict[str, Any]:
    """The Statement as a dict; ``lock`` is (its file name, its sha256)."""
    subjects = [{"name": name, "digest": {"sha256": digest}}
                for name, digest in sorted(((env or {}).get("digests") or {}).items())]
    if lock is not None:
        subjects.append({"name": lock[0], "digest": {"sha256": lock[1]}})
    predicate = {"format": PREDICATE_FORMAT, "samebits": __version__, "host": host,
                 "healthy": healthy, "reasons": [dict(r) for r in reasons],
                 "env": dict(env) if env is not None else None,
                 "gpus": [dict(g) for g in gpus], "canary": [dict(c) for c in canary],
                 "settings": dict(settings), "seconds": round(seconds, 3)}
    if not subjects:
        subjects.append({"name": f"node/{host}",
                         "digest": {"sha256": predicate_digest(predicate)}})
    return {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": PREDICATE_TYPE,
            "predicate": predicate}
