"""What a trusted verify of a venv learns of its base interpreter apart from the prefix, in
one call that ``verify.env.check`` runs in a fresh interpreter on the other core
(``samebits.forked``) while it walks the prefix: the base interpreter's files walked and
proven by the stat memo (``manifest.walk_outside``) and its records (``startup.base_records``:
a conda base's conda-meta, Debian's dpkg database). Both are what the verifying process
would compute itself; it does, where no interpreter could be started or this one failed.
(The prefix's own records stay in the verifying process: read there, they cost 0.05 s;
read here and sent back, the answer came 0.1 s after the walk it was meant to overlap.)"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verify.env.interpreter import Located
    from verify.env.manifest import Outside

Owners = dict[str, tuple[str, str | None, str]]


def base_files(loc: Located, outside: tuple[str, ...], facts: Path, jobs: int | None,
               elf: bool) -> tuple[Outside, Owners]:
    """(``outside`` walked with the stat memo kept in ``facts`` trusted, the base's records)."""
    from verify.env.manifest import walk_outside
    from verify.env.startup import base_records
    from verify.env.statmemo import StatMemo

    memo = StatMemo(facts, outside, trusted=True)
    return walk_outside(outside, jobs=jobs, elf=elf, memo=memo), base_records(loc)
