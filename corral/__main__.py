"""``python -m corral``: the ``corral`` command (see :mod:`corral.integrations.cli`)."""

import sys

from .integrations.cli import main

sys.exit(main())
