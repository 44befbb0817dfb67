"""``python -m queuetree`` is the ``queuetree`` command."""

import sys

from queuetree.cli import main

sys.exit(main())
