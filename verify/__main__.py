"""``python -m verify SUBCOMMAND``: the same commands as ``samebits verify SUBCOMMAND``."""

import sys

from verify.cli import main

sys.exit(main())
