"""``python -m sleuth`` is the same as the ``sleuth`` command."""

import sys

from sleuth.cli import entry

sys.exit(entry())
