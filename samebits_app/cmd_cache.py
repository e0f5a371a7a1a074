"""``samebits cache verify``: every unpacked cache entry checked against its seal.

    samebits cache verify [--full] [--cache-dir DIR] [--json]

Each entry of ``CACHE/unpacked/`` is checked as an install checks it before placing anything
(``samebits.install.seal.check``): the seal's digest, key and manifest; every file's mode and
size; its inode against the seal by a stat, hashing what the seal cannot vouch for. ``--full``
hashes every file against the manifest too (the check that does not trust any stat). A
broken entry is evicted; the next install unpacks it again from its archive, which is proved
against the lock's sha256 first (and fetched again if it no longer is). Exit 0 every entry
sound, 1 something was evicted, 2 bad input.
"""

from __future__ import annotations

import argparse

from samebits.cli import options
from samebits.ui import Output


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    c = sub.add_parser("cache", parents=parents, help="check samebits' cache",
                       description="Check samebits' install cache.")
    verbs = c.add_subparsers(dest="cache_command", metavar="COMMAND", required=True)
    v = verbs.add_parser(
        "verify", parents=parents, help="check every unpacked entry against its seal",
        description="Check every entry of the install cache's unpacked/ folder as an install "
        "checks it before placing: the seal's digest and manifest, each file's mode, size "
        "and inode (a stat against the seal; what the seal cannot vouch for is hashed "
        "against the manifest). --full hashes every file. A broken entry is evicted; the "
        "next install unpacks it again from its archive, proved against the lock first.",
        epilog="exit codes: 0 every entry sound, 1 an entry was evicted, 2 bad input.")
    v.add_argument("--full", action="store_true",
                   help="hash every file of every entry against its manifest, whatever its "
                   "stat says")
    options.add_cache_dir(v, what="the cache to check (the one `samebits install` fills)")
    v.set_defaults(func=run_verify)


def run_verify(args: argparse.Namespace, out: Output) -> int:
    from samebits.errors import InputError, plural
    from samebits.install.fetch import size_text
    from samebits.install.seal import verify_cache

    cache = options.cache_of(args)
    with out.progress(f"checking the entries of {cache}/unpacked", None):
        try:
            report = verify_cache(cache, full=args.full)
        except OSError as exc:
            raise InputError(f"{exc.filename or cache}: {exc.strerror or exc}") from None
    how = "every file hashed" if args.full else "a stat each, hashed where the seal cannot vouch"
    lines = [f"{cache}/unpacked: {plural(report.entries, 'entry', 'entries')}, "
             f"{report.files:,} files ({how}): {report.hashed:,} hashed "
             f"({size_text(report.bytes_hashed)})"]
    if report.resealed:
        lines.append(f"  re-sealed  {len(report.resealed)}: their stat had moved, their bytes "
                     "are the manifest's")
    for key, filename, why in sorted(report.evicted):
        lines.append(f"  evicted    {filename or key}: {why}")
    if report.evicted:
        lines.append("result: an install unpacks the evicted entries again from their "
                     "archives (exit 1)")
    else:
        lines.append("result: every entry sound (exit 0)")
    out.emit(report.to_json(), "\n".join(lines))
    return report.exit_code
