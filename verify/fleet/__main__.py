"""``python -m verify.fleet``: one rank of a fleet, in the environment under test.

``samebits verify fleet --prefix ENV -- LAUNCHER ...`` writes this program (with the other
in-environment modules, ``verify.gpu.launch.IN_ENV``) into one file, ``rank.pyz``, and has the
launcher start ``ENV/bin/python rank.pyz RANK-OPTIONS --handoff DIR`` once per rank (torchrun:
``ENV/bin/python -m torch.distributed.run ... rank.pyz ...``). So a rank imports the standard
library, torch and this samebits' in-environment code, nothing installed into the environment
and nothing of samebits' own dependencies: ``samebits verify node`` of the environment stays
healthy after a fleet ran in it.

What a rank does is ``verify.fleet.run.run_rank``; rank 0's judge is the launcher
(``verify.fleet.handoff.ask_launcher``: the check-ins go to it, the preflight's problems come
back), the environment digest is ``verify.fleet.tree``'s, and rank 0 hands the outcome to the
launcher (``outcome.json``), which writes the report. A Python without torch says so in one
line, naming itself and the command that runs the ranks with the environment's Python. Errors
are ``error: ...`` (and ``hint: ...``) on stderr with samebits' exit codes; no traceback.

The rank options are ``verify fleet``'s own (``verify.fleet.rankopts``). Python 3.8 or later.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from samebits.errors import EXIT_BAD_INPUT, SamebitsError
from verify.fleet import handoff
from verify.fleet.rankopts import add_rank_options, no_torch


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m verify.fleet",
        description="One rank of a fleet, started by `samebits verify fleet --prefix ENV -- "
        "LAUNCHER ...` in the environment under test: the rank options of `verify fleet`, and "
        "the folder the launcher shares with rank 0.")
    add_rank_options(p)
    p.add_argument("--handoff", type=Path, required=True, metavar="DIR",
                   help="the launcher's folder: rank 0 hands it the check-ins and the outcome")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return _rank(args)
    except SamebitsError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        if exc.hint:
            sys.stderr.write(f"hint: {exc.hint}\n")
        return exc.exit_code


def _rank(args: argparse.Namespace) -> int:
    from verify.fleet.launcher import launcher_name

    missing = no_torch(launcher_name(os.environ))
    if missing is not None:
        sys.stderr.write(f"error: {missing}\n")
        return EXIT_BAD_INPUT
    from verify.fleet.run import RankEnv, run_rank
    from verify.fleet.tree import tree_digests
    from verify.gpu.workloads import select

    only = list(select(args.only)) if args.only else None
    me = RankEnv.from_environ()  # which launcher, which rank: a bad environment fails here
    outcome = run_rank(judge=handoff.ask_launcher(args.handoff, args.rank_timeout),
                       env_digest=None if args.no_env_digest else tree_digests,
                       device_request=args.device, only=only, rank_timeout=args.rank_timeout,
                       me=me)
    if outcome is not None:
        handoff.put(args.handoff, handoff.OUTCOME, outcome.to_dict())
    elif me.launcher == "torchrun" and me.local_rank == 0 and me.rank != 0:
        # rank 0 is under another node's torchrun, and so is the launcher that reports
        handoff.put(args.handoff, handoff.ELSEWHERE,
                    {"rank0_host": os.environ.get("MASTER_ADDR"), "host": me.host})
    return 0


if __name__ == "__main__":
    sys.exit(main())
