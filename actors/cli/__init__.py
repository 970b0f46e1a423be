"""The ``agent-actors`` command line: ``serve``, ``index``, ``call``, ``demo``, ``keys`` and
``cluster``.

``_main`` (the parser and the subcommands), ``_security`` (``keys`` and the CURVE options),
``_cluster`` (``serve --workers`` and ``cluster …``), ``_demo`` (the walk-through). It builds on
the runtime and the cluster; nothing else imports it.
"""

from actors.cli._demo import start_server_process as start_server_process
from actors.cli._main import console_main as console_main
from actors.cli._main import main as main

__all__ = [
    "console_main",
    "main",
    "start_server_process",
]
