import sys

from samebits_app.cli import main

sys.exit(main())
