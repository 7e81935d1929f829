"""``python -m cronwire.cli ...``: the console script without its installed wrapper."""

import sys

from cronwire.cli import run

sys.exit(run())
