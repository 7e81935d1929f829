"""``python -m cronwire.cli ...``: the console script without its installed wrapper."""

import sys

from cronwire.cli.main import main

sys.exit(main())
