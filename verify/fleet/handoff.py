"""The folder ``samebits verify fleet`` shares with the rank program it starts.

The ranks run in the environment under test, which holds torch and nothing of samebits'
dependencies; what needs those (reading the lock, the preflight's rules, the statements, the
signature, node statements) stays in samebits' own process, the launcher, which talks to rank
0 through files in one folder (``--handoff DIR``, beside the report):

    rank.pyz        the rank program (``verify.fleet.start`` writes it; every rank runs it)
    checkins.json   rank 0: every rank's check-in, its machine's facts included
    preflight.json  the launcher: the preflight's problems per rank (``verify.gpu.preflight``)
    outcome.json    rank 0: the records of the ranks (or why the group was refused)
    elsewhere.json  under torchrun, a node's local rank 0 when rank 0 is on another node
                    (``rank0_host``: MASTER_ADDR): that node's launcher writes the report,
                    this one has none to write

Each is a JSON object with ``"format": 1`` (another format is refused by name), written
atomically (a temporary file, then a rename), so a reader polling for it never sees half of
one. Rank 0 waits for ``preflight.json`` as long as it waits for a rank (``--rank-timeout``);
with no answer by then the group is refused, the reason named. So under srun or mpiexec the
folder must be one rank 0's node sees too: beside ``--out``, a shared folder on a cluster.

In the environment under test's interpreter (``verify.gpu.launch.IN_ENV``): the standard
library only, Python 3.8 or later.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samebits._io import atomic_write, canonical_json
from samebits.errors import InputError, quote

HANDOFF_FORMAT = 1
PROGRAM = "rank.pyz"
CHECKINS = "checkins.json"
PREFLIGHT = "preflight.json"
OUTCOME = "outcome.json"
ELSEWHERE = "elsewhere.json"
POLL = 0.1  # seconds between two looks for a file

if TYPE_CHECKING:  # an alias for annotations only: Python 3.8 cannot subscript Mapping
    # what run_rank's judge returns: rank -> the preflight's problems on that rank (as JSON)
    Problems = Mapping[int, Sequence[Mapping[str, str]]]


def put(folder: Path, name: str, doc: Mapping[str, Any]) -> None:
    atomic_write(Path(folder) / name, canonical_json({**doc, "format": HANDOFF_FORMAT}))


def read(folder: Path, name: str) -> dict[str, Any] | None:
    """The document ``name`` in ``folder``, or None when there is none (yet)."""
    path = Path(folder) / name
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt != HANDOFF_FORMAT:
        raise InputError(f"{path}: format = {quote(fmt)}: this samebits reads format "
                         f"{HANDOFF_FORMAT}",
                         hint="the launcher and the rank program are one samebits' two halves: "
                         "start the ranks with `samebits verify fleet ... -- LAUNCHER`")
    return doc


def wait_for(folder: Path, name: str, timeout: float) -> dict[str, Any] | None:
    """The document ``name`` once it is there, or None after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        doc = read(folder, name)
        if doc is not None or time.monotonic() >= deadline:
            return doc
        time.sleep(POLL)


def ask_launcher(folder: Path, timeout: float
                 ) -> Callable[[Sequence[Mapping[str, Any]]], Problems]:
    """Rank 0's judge (``verify.fleet.run.run_rank``): the check-ins go to the launcher, which
    runs the preflight on each; its answer, or after ``timeout`` seconds one problem saying
    there was none."""
    def judge(checkins: Sequence[Mapping[str, Any]]) -> Problems:
        put(folder, CHECKINS, {"checkins": list(checkins)})
        doc = wait_for(folder, PREFLIGHT, timeout)
        if doc is None:
            return {0: [{"check": "launcher", "message": f"no preflight verdict in "
                         f"{Path(folder) / PREFLIGHT} within {timeout:g} s: the launcher "
                         "(samebits verify fleet) is gone or does not see this folder",
                         "hint": "run the ranks with `samebits verify fleet --prefix ENV ... "
                         "-- LAUNCHER` and keep --out on a folder rank 0's node sees"}]}
        problems = doc.get("problems")
        if not isinstance(problems, dict):
            raise InputError(f"{Path(folder) / PREFLIGHT}: problems = {quote(problems)}: "
                             "expected an object (rank -> problems)")
        return {int(rank): list(found) for rank, found in problems.items()}

    return judge
