"""The environment under audit: locate or install it, ``verify env`` it, weigh its digests.

    locate   ``--prefix ENV``: an installed environment; none given: the running one
    install  ``--target DIR``: ``samebits.install.install_prefix`` of the lock's platform,
             staged beside DIR and renamed into place (as ``samebits install`` does)
    verify   the running environment through ``verify.env.check.check_env`` (no subprocess);
             another prefix through ``python -m verify env LOCK --prefix ENV --json``
             (``samebits_app.verifyrun.run_verify_env``). Both give the ``verify env`` report
             document, which the audit keeps whole.

``weigh`` turns a report into the step's reasons and notes: drift and a packages digest other
than the attested one are reasons; an environment digest other than the attested one is a
note (it covers the install path, which conda and pip write into files), as are libraries
that resolve nowhere on this host (a CUDA build of torch on a machine without a driver).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits.cli.options import read_flags
from samebits.errors import SamebitsError, plural
from samebits.install.sources import NO_SOURCES, Sources
from samebits.lock.read import ReadOptions
from samebits_app.audit.verdict import Step, failed
from verify.gpu.attest import Attestation

MAX_REASONS = 25  # drift lines in the verdict; the report's drift list has every one


@dataclass(frozen=True, slots=True, kw_only=True)
class Located:
    prefix: Path
    running: bool  # the environment this process runs in
    how: str       # "running" | "located" | "installed"


def locate(prefix: Path | None) -> Located:
    if prefix is None:
        return Located(prefix=Path(sys.prefix).absolute(), running=True, how="running")
    prefix = Path(prefix).absolute()
    return Located(prefix=prefix, running=prefix == Path(sys.prefix).absolute(), how="located")


def read_options(req: Any, platform: str) -> ReadOptions:
    """How the request's lock is read when it is of another format: ``--lock-env``,
    ``--lock-python`` and the platform in question."""
    return ReadOptions(environment=req.lock_env, platforms=(platform,), python=req.lock_python)


def install(lockfile: Path, prefix: Path, *, platform: str, cache: Path | None,
            replace: bool, read: ReadOptions | None = None,
            sources: Sources = NO_SOURCES) -> tuple[Located, Step]:
    """Install the lock's ``platform`` into ``prefix``; the step says what was installed.
    ``sources``: --find-links folders and --mirror prefixes to take locked files from."""
    from samebits.install import default_cache_dir, host_interpreter, install_prefix
    from samebits.install.prefix import check_something_to_place
    from samebits.lock.read import load_lock
    from samebits.staging import staged_dir

    prefix = Path(prefix).absolute()
    env = load_lock(lockfile, name=Path(lockfile).name, root=Path.cwd(), options=read)
    python = None
    if env.python and env.pip(platform) and not any(p.name == "python"
                                                   for p in env.conda(platform)):
        python = host_interpreter(env.python)
    check_something_to_place(env, platform)  # before any prefix is made
    with staged_dir(prefix, replace=replace) as stage:
        report = install_prefix(env, platform, stage, final=str(prefix),
                                cache=cache or default_cache_dir(), interpreter=python,
                                sources=sources)
    step = Step(name="environment", status="ok",
                summary=f"installed {lockfile} ({platform}) into {prefix}: "
                f"{len(report.conda)} conda, {len(report.pip)} PyPI packages")
    return Located(prefix=prefix, running=False, how="installed"), step


def located_step(where: Located) -> Step:
    what = ("the running environment" if where.how == "running" else "the environment")
    return Step(name="environment", status="ok", summary=f"{what} at {where.prefix}")


def verify_env(where: Located, lockfile: Path, platform: str,
               read: ReadOptions | None = None) -> dict[str, Any]:
    """The ``verify env`` report document of ``where`` against ``lockfile``, a lock of
    another format read as ``read`` says."""
    if where.running:
        from verify.env.check import check_env
        from verify.env.envreport import report_json

        return report_json(check_env(where.prefix, lockfile=lockfile, platform=platform,
                                     read=read))
    from samebits_app.verifyrun import run_verify_env

    return run_verify_env(where.prefix, lockfile, platform,
                          read_flags=read_flags(read) if read else ())


def verify_step(where: Located, lockfile: Path, platform: str,
                attested: Mapping[str, str], read: ReadOptions | None = None
                ) -> tuple[Step, dict[str, Any] | None]:
    """The verify-env step: (step, report or None when verify env could not run)."""
    try:
        report = verify_env(where, lockfile, platform, read)
    except SamebitsError as exc:
        return failed("verify-env", f"verify env {where.prefix}: {exc.message}"), None
    return weigh(report, attested, whole=whole_list(where.prefix, lockfile, platform),
                 lock_python=lock_python(lockfile, read)), report


def whole_list(prefix: Path, lockfile: Path | None, platform: str | None = None) -> str:
    """The command that lists every finding, which a verdict cut short names."""
    lock = f" {lockfile}" if lockfile else ""
    plat = f" --platform {platform}" if lockfile and platform else ""
    return f"samebits verify env --prefix {prefix}{lock}{plat}"


def lock_python(lockfile: Path | None, read: ReadOptions | None = None) -> str | None:
    """The Python line (X.Y) the lock was made for, or None (no lock, or none recorded)."""
    if lockfile is None:
        return None
    from samebits.lock.read import load_lock

    try:
        return load_lock(lockfile, options=read).python
    except SamebitsError:
        return None


def _python_mismatch(report: Mapping[str, Any], lock_line: str | None) -> str | None:
    version = str((report.get("interpreter") or {}).get("version") or "")
    line = ".".join(version.split(".")[:2])
    if not lock_line or not line or line == ".".join(lock_line.split(".")[:2]):
        return None
    return (f"the environment is Python {line}, the lock is Python {lock_line}: its packages "
            f"are the wheels of another Python (install the lock into a new environment: "
            f"samebits install LOCK --target DIR)")


def weigh(report: Mapping[str, Any], attested: Mapping[str, str], *,
          against: str = "the lock", whole: str | None = None,
          lock_python: str | None = None) -> Step:
    """Reasons and notes from a ``verify env`` report and the attestation's subjects.
    ``whole``: the command that lists every finding, named where the reasons stop short;
    ``lock_python``: the lock's Python line, whose mismatch is the first reason: it explains
    every other one."""
    from verify.env.envreport import finding_line

    reasons: list[str] = []
    notes: list[str] = []
    findings = report.get("findings") or []
    if findings:
        cause = _python_mismatch(report, lock_python)
        if cause:
            reasons.append(cause)
        lines = [finding_line(finding_of(f)).strip() for f in findings]
        more = len(lines) - MAX_REASONS
        kinds: dict[str, int] = {}
        for f in findings:
            kinds[str(f.get("kind"))] = kinds.get(str(f.get("kind")), 0) + 1
        reasons.append(f"environment drift: {plural(len(findings), 'finding')} against {against}"
                       f" ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})")
        reasons.extend(f"drift: {line}" for line in lines[:MAX_REASONS])
        if more > 0:
            reasons.append(f"drift: ... and {more} more: {whole or 'samebits verify env'} "
                           "lists every one")
    digests = report.get("digests") or {}
    mine, theirs = digests.get("packages"), attested.get("packages")
    if theirs and mine != theirs:
        reasons.append(f"the installed packages are not the authors': packages digest "
                       f"{_short(mine)}, attested {_short(theirs)}")
    env_mine, env_theirs = digests.get("environment"), attested.get("environment")
    if env_theirs and env_mine == env_theirs:
        notes.append("environment digest equal to the authors': the same files at the same "
                     "install path")
    elif env_theirs and findings:
        notes.append(f"environment digest {_short(env_mine)} differs from the authors' "
                     f"{_short(env_theirs)}: see the drift")
    elif env_theirs:
        notes.append(f"environment digest {_short(env_mine)} differs from the authors' "
                     f"{_short(env_theirs)}: it covers the install path, which conda and pip "
                     "write into files; every file was checked against the lock instead")
    linkage = report.get("linkage") or {}
    unresolved = linkage.get("unresolved") or []
    if unresolved:
        notes.append(f"{plural(len(unresolved), 'library link')} "
                     f"{'resolves' if len(unresolved) == 1 else 'resolve'} nowhere on this host: "
                     + ", ".join(sorted({f"{u['needed']}" for u in unresolved})))
    summary = report.get("summary") or {}
    pk = summary.get("packages") or {}
    what = (f"{plural(summary.get('entries', 0), 'file')} of {pk.get('conda', 0)} conda + "
            f"{plural(pk.get('pip', 0), 'PyPI package')}")
    if findings:
        return Step(name="verify-env", status="failed", reasons=tuple(reasons),
                    notes=tuple(notes),
                    summary=f"{what}: DRIFT, {plural(len(findings), 'finding')} against {against}")
    return Step(name="verify-env", status="failed" if reasons else "ok", reasons=tuple(reasons),
                notes=tuple(notes), summary=f"{what}: identical to {against}")


def finding_of(doc: Mapping[str, Any]) -> Any:
    from verify.env.drift import Finding

    keys = ("kind", "path", "package", "expected", "actual", "source", "detail")
    return Finding(**{k: doc[k] for k in keys if k in doc})


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "none"


def subjects(att: Attestation) -> dict[str, str]:
    """The attestation's subjects by name: environment, packages, <lockfile name>."""
    return dict(att.subjects)
