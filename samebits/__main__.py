import sys

from samebits.cli import main

sys.exit(main())
