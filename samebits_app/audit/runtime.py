"""The interpreter that runs the workloads: the audited environment's own, in a child process.

The bits depend on the torch that computes them, so the suite runs with the environment's
interpreter (``ENV/bin/python``), or this one for the running environment, never with
whatever torch ``samebits`` itself happens to import. Each call starts::

    PYTHON -m verify.gpu.workloads --facts --device D --settings JSON --only NAMES [--save-outputs]

(the same worker ``verify gpu --probe`` uses; ``--only ""`` only probes the facts) through
``verify.gpu.launch``: from a folder that holds just this samebits' ``samebits/`` and ``verify/``
packages, so the environment needs torch and nothing else, in a clean environment
(``samebits.childenv``: no caller's PYTHONPATH, user site, LD_PRELOAD, ...; ``keep``: the
start-up variables a paper manifest's ``keep-env`` keeps, which the facts then record). The
error statistics of saved outputs (``verify.gpu.errorstats.output_errors``, torch again) and the
paper audit's tensor records, tensor comparisons and fingerprints (``python -m
verify.gpu.errorstats --request``) run the same way.

``Runtime`` is the interface the pipeline takes; tests may pass another.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from samebits.errors import InputError, ToolError, quote
from verify.gpu.attest import Attestation
from verify.gpu.errorstats import OutputError
from verify.gpu.facts import Facts
from verify.gpu.facts.torchapi import is_unavailable
from verify.gpu.launch import run_module
from verify.gpu.workloads.settings import DETERMINISTIC, PROFILES, Settings

TIMEOUT = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    facts: Facts
    settings: Mapping[str, Any]  # torch's readback, as attested
    workloads: Mapping[str, Mapping[str, Any]]


class Runtime(Protocol):
    @property
    def python(self) -> str: ...

    def facts(self) -> Facts: ...

    def run(self, *, device: str, settings: Settings, names: Sequence[str],
            save_outputs: Path | None = None) -> Measured: ...

    def output_errors(self, a: Path, b: Path) -> dict[str, tuple[OutputError, ...]]: ...

    def errorstats(self, request: Mapping[str, Any]) -> dict[str, Any]: ...


def _output_error(e: Mapping[str, Any]) -> OutputError:
    def num(x: Any) -> float:
        return float(x)  # "inf" and "nan" strings too

    return OutputError(output=e["output"], max_abs=num(e["max_abs"]), max_ulp=int(e["max_ulp"]),
                       differing=int(e["differing"]), total=int(e["total"]),
                       max_rel=num(e.get("max_rel", 0.0)), index=tuple(e.get("index") or ()))


def settings_of(att: Attestation) -> Settings:
    """The ``Settings`` an attestation's run used: its profile and its precision choices."""
    s = att.settings
    base = PROFILES.get(str(s.get("profile")))
    if base is None:
        raise InputError(f"{att.source}: predicate.settings.profile = {quote(s.get('profile'))}: "
                         f"an audit reruns one of the profiles {', '.join(sorted(PROFILES))}",
                         hint="attest with `samebits attest --profile deterministic`")
    precision = s.get("float32_matmul_precision", "highest")
    if is_unavailable(precision) and isinstance(s.get("cuda_matmul_allow_tf32"), bool):
        # a torch before 1.12: its one switch is what the precision sets (settings.apply)
        precision = "high" if s["cuda_matmul_allow_tf32"] else "highest"
    if precision not in ("highest", "high", "medium"):
        raise InputError(f"{att.source}: predicate.settings.float32_matmul_precision = "
                         f"{quote(precision)}: expected highest, high or medium")
    return replace(base, float32_matmul_precision=precision,
                   cudnn_allow_tf32=bool(s.get("cudnn_allow_tf32", False)))


@dataclass(frozen=True, slots=True)
class Interpreter:
    """A Python interpreter that runs the workers. ``environ``: the caller's environment (this
    process's by default), cleaned before a worker gets it; ``keep``: what stays of it."""

    python: str
    environ: Mapping[str, str] | None = None
    timeout: float = TIMEOUT
    keep: tuple[str, ...] = ()

    def facts(self) -> Facts:
        doc = self._worker(["-m", "verify.gpu.workloads", "--facts", "--only", "", "--settings",
                            json.dumps(DETERMINISTIC.to_dict())], what="probing the facts")
        return Facts.from_dict(doc["facts"], where=f"{self.python}: facts")

    def run(self, *, device: str, settings: Settings, names: Sequence[str],
            save_outputs: Path | None = None) -> Measured:
        args = ["-m", "verify.gpu.workloads", "--facts", "--device", device, "--settings",
                json.dumps(settings.to_dict()), "--only", ",".join(names)]
        if save_outputs is not None:
            args += ["--save-outputs", str(Path(save_outputs).absolute())]
        doc = self._worker(args, what="running the workloads")
        return Measured(facts=Facts.from_dict(doc["facts"], where=f"{self.python}: facts"),
                        settings=doc["settings"], workloads=doc["workloads"])

    def output_errors(self, a: Path, b: Path) -> dict[str, tuple[OutputError, ...]]:
        doc = self._worker(["-m", "verify.gpu.errorstats", str(Path(a).absolute()),
                            str(Path(b).absolute())], what="comparing saved outputs")
        return {name: tuple(_output_error(e) for e in errs) for name, errs in doc.items()}

    def errorstats(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``python -m verify.gpu.errorstats --request``: records, comparisons, fingerprints."""
        with tempfile.TemporaryDirectory(prefix="samebits-errorstats.") as tmp:
            path = Path(tmp) / "request.json"
            path.write_text(json.dumps(request))
            return self._worker(["-m", "verify.gpu.errorstats", "--request", str(path)],
                                what="comparing outputs")

    def _worker(self, args: list[str], *, what: str) -> dict[str, Any]:
        try:
            proc = run_module(self.python, args, environ=self.environ, keep=self.keep,
                              timeout=self.timeout)
        except FileNotFoundError:
            raise ToolError(f"{self.python}: no such interpreter",
                            hint="pass --workload-python with the environment's "
                            "interpreter") from None
        except subprocess.TimeoutExpired:
            raise ToolError(f"{self.python}: {what} ran past {self.timeout:g} s") from None
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            tail = lines[-1] if lines else f"no message (stdout: {proc.stdout[-200:]!r})"
            hint = ("the workloads need torch in the audited environment; pass "
                    "--workload-python with an interpreter that has it, or --no-workloads"
                    if "No module named 'torch'" in proc.stderr else None)
            raise ToolError(f"{self.python}: {what} failed (exit {proc.returncode}): {tail}",
                            hint=hint)
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            raise ToolError(f"{self.python}: {what}: not JSON: {proc.stdout[:200]!r}") from None
        if not isinstance(doc, dict):
            raise ToolError(f"{self.python}: {what}: expected a JSON object")
        return doc
