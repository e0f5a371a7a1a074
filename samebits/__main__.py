import sys

from samebits.app.cli import main

sys.exit(main())
