"""The ``agent-actors`` command line: ``serve``, ``index``, ``call``, ``demo``, ``keys`` and
``cluster``.

``_main`` (the parser and the subcommands), ``_security`` (``keys`` and the CURVE options),
``_cluster`` (``serve --workers`` and ``cluster …``), ``_demo`` (the walk-through). It builds on
the runtime and the cluster; nothing else imports it.

``start_server_process`` (for tests and benchmarks) is imported on first use: the command's
``--help`` need not load the client and the server.
"""

from typing import TYPE_CHECKING, Any

from actors.cli._main import console_main as console_main
from actors.cli._main import main as main

if TYPE_CHECKING:
    from actors.cli._demo import start_server_process as start_server_process

__all__ = [
    "console_main",
    "main",
    "start_server_process",
]


def __getattr__(name: str) -> Any:
    if name == "start_server_process":
        from actors.cli._demo import start_server_process

        return start_server_process
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
