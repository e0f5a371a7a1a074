"""``python -m verify SUBCOMMAND``: the same commands as ``samebits verify SUBCOMMAND``."""

from samebits.gcpause import exit_now
from verify.cli import main

exit_now(main())
