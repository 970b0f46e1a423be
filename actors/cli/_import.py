"""``agent-actors sessions import``: lay loose DSH session logs into a server's data directory;
and what ``index`` and ``serve --sessions`` say of a folder that holds no DSH session logs.

``sessions import [--data DIR] FILE|DIR…`` takes each file given, and every ``*.jsonl`` and
``*.jsonl.zstd`` file under each directory given, loads it as the server would, and copies the
logs that load to where the server keeps that session (``DIR/sessions/--<project key>--/
<session id>/session.jsonl.zstd``, by the header's cwd and id), never replacing a file; then it
refreshes the projection cache, so a server started with ``serve --data DIR`` lists them
(`actors.store.import_session_logs`). A progress bar is drawn on a terminal; the summary counts
the files imported, skipped (the session is already there) and refused, with one line per
refused file and its reason.

Exit status: 0 when nothing was refused, 1 when some file was refused (or the cache could not
be refreshed), 2 for a usage error (a path that does not exist, no log found, a data directory
that cannot be written).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from actors.cli._errors import CliError

__all__ = [
    "EXIT_REFUSED",
    "IMPORT_HINT",
    "add_sessions_command",
    "no_sessions_error",
    "run_import",
    "warn_no_sessions",
]

#: Exit status of ``sessions import`` when some file was refused (2 is a usage error).
EXIT_REFUSED = 1

IMPORT_HINT = (
    "to copy loose session.jsonl or .jsonl.zstd files where a server finds them: "
    "agent-actors sessions import [--data DIR] FILE|DIR..."
)

log = logging.getLogger("agent-actors")


def no_sessions_error(folder: Path) -> CliError:
    """The usage error for a sessions folder without DSH session logs in the DSH layout: it
    names the folder and the layout expected there, and hints at ``sessions import``."""
    from actors.store import no_sessions_message

    first, *layout = no_sessions_message(folder)
    return CliError(first, detail="\n".join(layout), hints=[IMPORT_HINT])


def warn_no_sessions(folder: Path) -> None:
    """Log the same text as a warning (``serve --sessions``, which serves the folder all the
    same: it may fill later)."""
    error = no_sessions_error(folder)
    log.warning("%s", "\n".join([error.message, *error.lines()[1:]]))


def add_sessions_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sessions_cmd = commands.add_parser(
        "sessions", help="manage the DSH sessions of a data directory"
    )
    actions = sessions_cmd.add_subparsers(dest="action", metavar="ACTION", required=True)
    import_cmd = actions.add_parser(
        "import",
        help="copy loose DSH session logs (session.jsonl, .jsonl.zstd) into the data directory",
        description="Copy DSH session logs into the data directory, where `serve --data` "
        "finds them (by each header's cwd and id); directories are searched for *.jsonl and "
        "*.jsonl.zstd files. Logs that do not load are refused with the reason; sessions "
        "already there are skipped. Exit status 0, 1 when a file was refused, 2 on usage "
        "errors.",
    )
    import_cmd.add_argument(
        "paths", nargs="+", type=Path, metavar="FILE|DIR", help="session logs or folders of them"
    )
    import_cmd.add_argument(
        "--data", type=Path, help="data directory to import into (default: under the XDG data home)"
    )
    import_cmd.set_defaults(run=run_import)


def run_import(args: argparse.Namespace) -> int:
    from actors._store_services import SESSIONS_DIR
    from actors.cli._data import default_data_dir, open_data_cache
    from actors.store import (
        ProgressBar,
        ProjectionCacheError,
        find_session_logs,
        import_session_logs,
        render_import_summary,
    )

    data = args.data if args.data is not None else default_data_dir()
    try:
        sources = find_session_logs(args.paths)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    if not sources:
        given = ", ".join(str(path) for path in args.paths)
        raise CliError(f"no DSH session logs (*.jsonl, *.jsonl.zstd) found in {given}")
    cache = open_data_cache(data)
    try:
        summary = import_session_logs(sources, data / SESSIONS_DIR, cache, progress=ProgressBar())
    except (OSError, ProjectionCacheError) as exc:
        raise CliError(f"cannot import into {data}: {exc}") from None
    finally:
        cache.close()
    print(render_import_summary(summary))
    failed = summary.count("refused") or summary.index_error is not None
    return EXIT_REFUSED if failed else 0
