"""``python -m actors`` is ``agent-actors``."""

import sys

from actors.cli import main

sys.exit(main())
