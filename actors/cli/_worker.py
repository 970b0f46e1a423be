"""``python -m actors.cli._worker worker …``: a worker of ``serve --workers N`` that logs as the
command does.

The supervisor starts its workers through this module (``ClusterOptions.worker_module``), so a
worker logs to stderr at the command's level and in its format (``--log-level``,
``--log-format``, passed on by the supervisor), each record carrying ``worker`` (its id).
``actors.cluster`` knows nothing of the command line; this wraps its ``worker`` entry point.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from actors.cli._logging import LOG_FORMATS, LOG_LEVELS, logging_to_stderr
from actors.cluster.__main__ import main as worker_main

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS, default="warning")
    parser.add_argument("--log-format", type=str.lower, choices=LOG_FORMATS, default="text")
    parser.add_argument("--id", dest="worker_id", default="")
    args, rest = parser.parse_known_args(argv)
    if args.worker_id:
        rest += ["--id", args.worker_id]
    with logging_to_stderr(args, fields={"worker": args.worker_id} if args.worker_id else None):
        return worker_main(rest)


if __name__ == "__main__":
    sys.exit(main())
