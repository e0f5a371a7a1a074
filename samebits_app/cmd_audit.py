"""``samebits audit`` (reviewers): a paper's environment and bits against its attestation.

    samebits audit paper/conda-lock.yml \\
        --attestation paper/reference.attestation.json [--prefix ENV | --target DIR]
    samebits audit paper/            # the folder's manifest, or *conda-lock.yml,
                                     # *.attestation.json and outputs/
    samebits audit URL --commit SHA [--path SUBDIR]   # a repository at one commit, or
    samebits audit URL --sha256 H [--path SUBDIR]     # a deposited archive (audit.source)
    samebits audit --many PAPERS.toml --out DIR [--jobs N | --slurm]   # audit.batch

The first argument is a paper folder (or its samebits-paper.toml) or a LOCK
(``samebits.cli.options.paper_or_lock``).

The pipelines are ``samebits_app.audit``'s (``attesting``, ``pipeline``); this module reads
the arguments, writes
every file atomically (the reports, the SBOM, the reviewer's attestation under ``--out``) and
turns the results into text or --json. Exit codes: ``samebits_app.audit.verdict``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from samebits._io import atomic_write, canonical_json
from samebits.cli import options
from samebits.dsse import SigningKey, load_public_key, load_signing_key, signed_bytes
from samebits.errors import SamebitsError, UsageError
from samebits.lock.model import LOCK_SUFFIX
from samebits.ui import Output

DEFAULT_OUT = Path("build/audit")
LEVEL_CHOICES = ("environment-identical", "explained", "within-tolerance", "bit-identical")
USAGE = ("%(prog)s [PAPER|LOCK|URL] [options]\n"
         "       %(prog)s URL --commit SHA | --ref NAME | --sha256 H [--path SUBDIR] [options]\n"
         "       %(prog)s --many PAPERS.toml --out DIR [--jobs N | --slurm [--max-running M] "
         "[--wait] [-- SBATCH OPTIONS...]] [--force] [--keep] [options]")


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    r = options.add_tail_parser(
        sub, "audit", "sbatch", parents=parents, usage=USAGE,
        help="reviewers: audit a paper's environment and bits against its attestation",
        description="In order: the lockfile's integrity; this machine's preflight; locate "
        "or install the environment; verify env against the lock; the attestation's "
        "workloads under its settings; compare with the authors' attestation; with a "
        "paper manifest, rerun the paper's commands and compare every output (bytes, "
        "tensors, metrics, curves). Writes a verdict and reports (Markdown, "
        "self-contained HTML with the curves, JSON), a CycloneDX SBOM and this machine's "
        "attestation under --out. The paper may be a folder here, a git URL at one "
        "commit (fetched alone into the cache, then checked) or an archive URL proved by "
        "its sha256; --many audits a list of them, here or on Slurm, into one summary.",
        epilog="verdicts and exit codes: 0 bit-identical, within-tolerance, explained or "
        "environment-identical; 1 not-reproduced (or weaker than --require); 2 bad input "
        "(a commit or ref the repository does not have, an archive whose sha256 is not "
        "--sha256, a bad list: nothing written); 4 the URL did not answer; 5 a tool "
        "failed. With --many: 0 every paper accepted, 1 any paper not accepted, failed "
        "or not run (its row says why), 2 a bad list or options; with --slurm and no "
        "--wait, 0 once submitted.")
    options.add_paper_or_lock(r, what="what to audit (a paper folder without a manifest: "
                              "its *conda-lock.yml, *.attestation.json and outputs/; a LOCK "
                              "needs --attestation; a URL with --commit, --ref or --sha256)")
    src = r.add_argument_group("a paper from a URL (git: https://, ssh://, file://, host:path)")
    src.add_argument("--commit", metavar="SHA",
                     help="the full commit id to audit: fetched alone (depth 1) into the "
                     "cache, and HEAD checked to be it")
    src.add_argument("--ref", metavar="NAME",
                     help="a branch or tag, resolved once (git ls-remote) to its commit, "
                     "which is said and recorded with it")
    src.add_argument("--sha256", metavar="H",
                     help="the URL is an archive (.zip, .tar.gz, ...): downloaded, proved by "
                     "this sha256 and unpacked by the archive rules (no path out of the "
                     "folder, no link out, sizes capped)")
    src.add_argument("--path", metavar="SUBDIR",
                     help="the paper folder inside the repository or archive (default: its "
                     "top)")
    many = r.add_argument_group("many papers (--many)")
    many.add_argument("--many", type=Path, metavar="PAPERS.toml",
                      help="audit every paper of this list (name, url, commit or sha256, "
                      "path, require, timeout, trust) into --out DIR: DIR/NAME/ each, then "
                      "DIR/summary.{md,json,html}")
    many.add_argument("--jobs", type=int, metavar="N", default=1,
                      help="with --many: audit N papers at once on this machine (default 1)")
    many.add_argument("--slurm", action="store_true",
                      help="with --many: one Slurm job array (one task per paper) and a "
                      "gather job after it (--dependency=afterany); sbatch options after --")
    many.add_argument("--max-running", type=int, metavar="M",
                      help="with --slurm: at most M papers at once (the array's %%M)")
    many.add_argument("--wait", action="store_true",
                      help="with --slurm: wait for the gather job, then print the summary")
    many.add_argument("--force", action="store_true",
                      help="with --many: audit again the papers whose result stands (the same "
                      "commit or sha256, options and samebits version)")
    many.add_argument("--keep", action="store_true",
                      help="with --many: keep each paper's environment (DIR/NAME/env; "
                      "removed after its audit otherwise)")
    many.add_argument("--task", type=int, metavar="I",
                      help="with --many: audit the list's entry I (from 0) alone: what each "
                      "array task runs")
    many.add_argument("--gather", action="store_true",
                      help="with --many: write the summary from DIR's results: what the "
                      "gather job runs")
    r.add_argument("--attestation", type=Path, metavar="FILE",
                   help="the authors' attestation (default: the paper's)")
    r.add_argument("--outputs", type=Path, metavar="DIR",
                   help="the authors' saved outputs (attest --save-outputs): max errors")
    env_args(r)
    options.add_target(r, what="install the lock here first (samebits install), then audit it")
    options.deprecated(r, "--install", dest="target", type=Path,
                       instead="pass --target DIR (the folder to install into)")
    r.add_argument("--replace", action="store_true", help="with --target: replace DIR")
    options.add_cache_dir(r, what="archives for --target, fetched [[inputs]], a URL's "
                          "checkout or archive (shared by --many's papers)")
    options.add_sources(r, where="; with --target")
    r.add_argument("--device", default="auto",
                   help="auto (the authors' kind of device when this machine has one), cpu, "
                   "cuda or cuda:N")
    r.add_argument("--no-workloads", action="store_true",
                   help="check the environment only: neither the suite nor the paper's "
                   "commands run (best verdict: environment-identical)")
    r.add_argument("--require", choices=LEVEL_CHOICES,
                   help="exit 1 unless the verdict is at least this level")
    options.add_out_dir(r, what="the reports, the SBOM and this machine's attestation",
                        default=f"default: {DEFAULT_OUT}; with --many, required")
    options.add_trust(r, what="the authors' key: an attestation that is not a DSSE envelope "
                      "signed by it is a reason for not-reproduced")
    options.add_sign(r, what="the reviewer's attestation")
    r.set_defaults(func=run_audit)


def env_args(p: argparse.ArgumentParser) -> None:
    """The environment, how it runs and how its lock is read: attest's and audit's."""
    options.add_prefix(p, what="to check and run in", default="default: the running one")
    options.add_workload_python(p)
    options.deprecated(p, "--python", dest="workload_python",
                       instead="pass --workload-python PATH (the interpreter that runs the "
                       "workloads)")
    options.add_platform(p, default="this machine's")
    options.add_read_flags(p, python_default="the environment's")
    options.add_project(p)
    options.deprecated_lockfile(p, dest="lockfile")


# ------------------------------------------------------------------------------- audit

def paper_inputs(args: argparse.Namespace) -> tuple[Path, Path, Path | None, Any]:
    """(lockfile, attestation, outputs, manifest) from the flags and a LOCK, else from the
    PAPER folder (its samebits-paper.toml when it has one)."""
    from samebits_app.paper.manifest import MANIFEST_NAME, read_manifest

    folder, lock = options.paper_or_lock(args.paper)
    lockfile, attestation, outputs = args.lockfile, args.attestation, args.outputs
    if lockfile is None and lock is not None:
        lockfile = options.lock_file(lock, options.project_of(args))
    manifest = None
    if folder is not None and (folder.is_file() or (folder / MANIFEST_NAME).is_file()):
        manifest = read_manifest(folder)
        lockfile = lockfile or manifest.lockfile
        attestation = attestation or manifest.attestation
        if outputs is None and (manifest.outputs / "outputs.json").is_file():
            outputs = manifest.outputs
    elif folder is not None:
        if not folder.is_dir():
            raise UsageError(f"{folder}: no such folder")
        if lockfile is None:
            lockfile = _one(folder, [f"*{LOCK_SUFFIX}", "conda-lock.yml"], "lockfile",
                            hint=f"name the lock instead of the folder: samebits audit "
                            f"{folder}/NAME.conda-lock.yml --attestation FILE")
        if attestation is None:
            attestation = _one(folder, ["*.attestation.json"], "attestation",
                               hint="pass --attestation FILE")
        if outputs is None and (folder / "outputs" / "outputs.json").is_file():
            outputs = folder / "outputs"
    if lockfile is None or attestation is None:
        raise UsageError("audit needs a LOCK and --attestation (or a PAPER folder with both)",
                         hint="samebits audit paper/conda-lock.yml --attestation "
                         "paper/reference.attestation.json")
    return lockfile, attestation, outputs, manifest


def _one(folder: Path, patterns: list[str], what: str, *, hint: str) -> Path:
    found = sorted({p for pat in patterns for p in folder.glob(pat)})
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise UsageError(f"{folder}: expected one {what} ({' or '.join(patterns)}), found "
                         f"{names}", hint=hint)
    return found[0]


def run_audit(args: argparse.Namespace, out: Output) -> int:
    from samebits_app.audit.document import build_document
    from samebits_app.audit.pipeline import AuditRequest
    from samebits_app.audit.pipeline import run_audit as audit
    from samebits_app.sourceflags import sources_for

    if args.many is not None:
        from samebits_app.audit.batch import run_batch

        return run_batch(args, out)
    only_many = [f for f, on in (("--jobs", args.jobs != 1), ("--slurm", args.slurm),
                                 ("--max-running", args.max_running is not None),
                                 ("--wait", args.wait), ("--force", args.force),
                                 ("--keep", args.keep), ("--task", args.task is not None),
                                 ("--gather", args.gather),
                                 ("sbatch options after --", args.sbatch is not None)) if on]
    if only_many:
        raise UsageError(f"{', '.join(only_many)}: with --many PAPERS.toml only")
    args.out = args.out or DEFAULT_OUT
    if (args.find_links or args.mirror) and args.target is None:
        raise UsageError("--find-links and --mirror go with --target (where the audit "
                         "installs the lock)")
    sources = sources_for(args)
    source = fetch_source(args, out)  # a URL: the paper folder in the cache; else None
    try:
        lockfile, attestation, outputs, manifest = paper_inputs(args)
    except SamebitsError as exc:  # name the URL and commit, not the cache's folder
        if source is None:
            raise
        exc.message = exc.message.replace(str(source.folder), source.text())
        raise
    key = load_signing_key(args.sign) if args.sign else None  # bad keys: exit 2, no step run
    trust = load_public_key(args.trust) if args.trust else None
    req = AuditRequest(lockfile=lockfile, attestation=attestation, out=args.out,
                       prefix=args.prefix, install=args.target,
                       python=args.workload_python,
                       platform=args.platform, device=args.device, outputs=outputs,
                       workloads=not args.no_workloads, cache=args.cache_dir,
                       replace=args.replace, paper=manifest, trust=trust, sources=sources,
                       lock_env=args.lock_env, lock_python=args.lock_python,
                       source=source.record() if source is not None else None)
    with out.steps("audit: ") as step:
        result = audit(req, progress=step)
    doc = build_document(result)
    files = write_reports(result, doc, args.out, sign=key)
    code = result.verdict.exit_code(args.require)
    payload = {**doc, "files": files, "exit_code": code}
    text = audit_text(doc, files, code)
    if source is not None:
        text = f"source: {source.text()} ({source.how})\n{text}"
    out.emit(payload, text)
    return code


def fetch_source(args: argparse.Namespace, out: Output) -> Any:
    """With a URL (or --commit, --ref, --sha256): the paper fetched into the cache and
    ``args.paper`` pointed at its folder (``samebits_app.audit.source``); else None."""
    from samebits_app.audit.source import looks_like_url, open_source

    named = any(v is not None for v in (args.commit, args.ref, args.sha256))
    if not named and not looks_like_url(args.paper):
        if args.path is not None:
            raise UsageError("--path SUBDIR goes with a URL (and --commit, --ref or --sha256)")
        return None
    if args.paper is None or not looks_like_url(args.paper):
        raise UsageError(f"--commit, --ref and --sha256 go with a URL, not "
                         f"{args.paper or 'nothing'}",
                         hint="samebits audit https://github.com/LAB/PAPER --commit SHA")
    source = open_source(args.paper, commit=args.commit, ref=args.ref, sha256=args.sha256,
                         path=args.path, cache=options.cache_of(args), say=out.info)
    args.paper = f"{source.folder}/"
    if args.target is not None:
        bundle_into_cache(source.folder, args, out)
    return source


def bundle_into_cache(folder: Path, args: argparse.Namespace, out: Output) -> None:
    """A fetched paper folder that holds one ``*.bundle.tar``: its archives for this platform
    unpacked into the cache first (every hash checked, ``samebits.bundle.read.unpack``), so
    that ``--target``'s install of the paper's lock needs no network for them."""
    from samebits.bundle.read import unpack
    from samebits.host import host_platform

    bundles = sorted(folder.glob("*.bundle.tar"))
    if len(bundles) != 1:
        return
    cache = options.cache_of(args)
    platform = args.platform or host_platform()
    with out.progress(f"unpack {bundles[0].name}", total=bundles[0].stat().st_size) as advance:
        result = unpack(bundles[0], cache, platform, advance=lambda n: advance(n))
    out.info(f"{bundles[0].name}: {result.archives} archives checked, the {platform} ones "
             f"unpacked into {cache}: the install takes them from there")


def write_reports(result: Any, doc: dict[str, Any], folder: Path, *,
                  sign: SigningKey | None = None) -> dict[str, str]:
    """Every report file under ``folder``, atomically; name -> path. With ``sign``, the
    reviewer's attestation is a DSSE envelope signed with that key."""
    from samebits_app.audit.pipeline import REVIEWER_ATTESTATION
    from samebits_app.audit.report_html import render_html
    from samebits_app.audit.report_md import render_markdown
    from samebits_app.audit.sbom import render_sbom, sbom_timestamp

    files: dict[str, tuple[Path, bytes | str]] = {
        "json": (folder / "audit.json", canonical_json(doc)),
        "markdown": (folder / "audit.md", render_markdown(doc)),
        "html": (folder / "audit.html", render_html(doc)),
    }
    if result.reviewer_data is not None:
        files["attestation"] = (folder / REVIEWER_ATTESTATION,
                                signed_bytes(result.reviewer_data, sign))
    if result.env_report is not None:
        lock = result.lock
        name = lock.meta("environment") or Path(result.request.lockfile).name.removesuffix(
            LOCK_SUFFIX).removesuffix(".yml")
        files["sbom"] = (folder / "sbom.cdx.json", render_sbom(
            name=name, env_report=result.env_report,
            locked=lock.packages_for(result.platform), lock_sha256=result.lock_sha256,
            platform=result.platform,
            timestamp=sbom_timestamp(lock.meta("exclude-newer"), os.environ)))
    for path, data in files.values():
        atomic_write(path, data)
    return {k: str(p) for k, (p, _) in files.items()}


def audit_text(doc: dict[str, Any], files: dict[str, str], code: int) -> str:
    v = doc["verdict"]
    from samebits_app.audit.verdict import CAUSES

    lines = [f"verdict: {v['level']}: {v['title']} (exit {code})"]
    for r in v["reasons"]:
        lines.append(f"  reason ({CAUSES.get(r['cause'], r['cause'])}): {r['text']}")
        lines += [f"    which explains: {e}" for e in r.get("explains") or ()]
    lines += [f"  note: {n}" for n in v["notes"]]
    lines.append("steps:")
    for i, s in enumerate(doc["steps"], 1):
        lines.append(f"  {i}. {s['name']:<12} {s['status']:<8} {s['summary']}")
        if s["status"] == "failed":  # what to try next, e.g. --find-links for a lost host
            lines += [f"     {n}" for n in s.get("notes") or () if n.startswith("hint: ")]
    check = (doc.get("checks") or {}).get("workloads") or {}
    if check.get("checked") is False:
        lines.append(f"workloads: not checked ({check.get('why')})")
    else:
        cells: dict[str, int] = {}
        for w in doc["workloads"]:
            cells[w["cell"]] = cells.get(w["cell"], 0) + 1
        lines.append("workloads: " + ", ".join(f"{n} {c}" for c, n in sorted(cells.items())))
    for c in (doc.get("paper") or {}).get("commands") or ():
        lines.append(f"paper command {c['name']}: {c['level']} (`{c['run']}`)")
        lines += [f"  {o['level']:<16} {o['summary']}" for o in c["outputs"]]
    lines.append("report: " + ", ".join(files[k] for k in ("html", "markdown", "json")
                                        if k in files))
    if "sbom" in files:
        lines.append(f"sbom: {files['sbom']}")
    return "\n".join(lines)
