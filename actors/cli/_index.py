"""``agent-actors index``: build or refresh the projection cache of a DSH sessions directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from actors.cli._errors import CliError

__all__ = ["add_index_command", "run_index"]


def add_index_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    index_cmd = commands.add_parser(
        "index", help="build or refresh the projection cache of a DSH sessions directory"
    )
    index_cmd.add_argument("--sessions", type=Path, required=True, help="DSH sessions directory")
    index_cmd.add_argument(
        "--data",
        type=Path,
        help="data directory holding the cache (default: under the XDG data home)",
    )
    index_cmd.set_defaults(run=run_index)


def run_index(args: argparse.Namespace) -> int:
    from actors.cli._data import default_data_dir, open_data_cache
    from actors.cli._import import no_sessions_error
    from actors.store import (
        IndexingError,
        ProgressBar,
        ProjectionCacheError,
        has_session_logs,
        index_sessions,
        render_summary,
    )

    if args.sessions.is_dir() and not has_session_logs(args.sessions):
        # Not a DSH sessions home (a missing folder is the indexer's one-line refusal).
        raise no_sessions_error(args.sessions)
    cache = open_data_cache(args.data if args.data is not None else default_data_dir())
    try:
        summary = index_sessions(args.sessions, cache, progress=ProgressBar())
    except (OSError, IndexingError, ProjectionCacheError) as exc:
        raise CliError(f"cannot index {args.sessions}: {exc}") from None
    finally:
        cache.close()
    print(render_summary(summary))
    return 0
