"""``python -m livetail.verify ...``: the same as the ``livetail`` command."""

import sys

from .cli import main

sys.exit(main())
