"""``python -m convtune.cli``: the ``convtune`` command."""

import sys

from convtune.cli import main

sys.exit(main())
