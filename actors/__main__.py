"""``python -m actors`` is ``agent-actors``."""

import sys

from actors._cli import main

sys.exit(main())
