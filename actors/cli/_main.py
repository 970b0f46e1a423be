"""The ``agent-actors`` command (also ``python -m actors``): its parser, its global options, and
how a subcommand's failure is reported.

``serve``   run a server until SIGINT/SIGTERM (``_serving``).
``index``   build or refresh the projection cache of a DSH sessions directory (``_index``).
``sessions import``  copy loose DSH session logs into a data directory (``_import``).
``call``    one call, httpie style: ``key=text`` passes a string, ``key:=json`` any JSON value;
            prints the JSON result on stdout, or ``code: message`` on stderr and exits 1
            (``_call``).
``schema``  the declarations of every endpoint: TypeScript, JSON Schema or Markdown
            (``_schema``).
``demo``    start a server process on a temporary ipc endpoint and walk through a few calls.
``keys``    generate a CURVE key pair (``serve --curve``, ``call --key``: ``_security``).
``cluster`` operate a multi-host cluster (``serve --workers``, ``cluster evict-host``:
            ``_cluster``).

Global options, before or after the subcommand: ``--version``, ``-v``/``-q``,
``--log-level`` and ``--log-format text|json`` (``_logging``).

A subcommand is a function in :data:`COMMANDS` that adds its parser to the subparsers and sets
``run``: a function of the parsed arguments that returns the exit status and raises
:class:`~actors.cli._errors.CliError` for a failure it can name. Keep its heavy imports inside
``run``: ``--help`` imports every module that registers a subcommand.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from actors.cli._call import add_call_command
from actors.cli._cluster import add_cluster_command
from actors.cli._errors import (
    EXIT_CALL_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CliError,
    leaves,
    report,
    report_unexpected,
)
from actors.cli._import import add_sessions_command
from actors.cli._index import add_index_command
from actors.cli._logging import add_logging_options, logging_to_stderr, wants_json
from actors.cli._schema import add_schema_command
from actors.cli._security import add_keys_command
from actors.cli._serving import add_serve_command

__all__ = ["COMMANDS", "console_main", "main", "version_text"]

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_demo_command(commands: Subcommands) -> None:
    demo_cmd = commands.add_parser("demo", help="walk through a few calls against a new server")
    demo_cmd.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    import trio

    from actors.cli._demo import run_demo

    return trio.run(run_demo)


#: The subcommands, in the order ``--help`` lists them.
COMMANDS: tuple[Callable[[Subcommands], None], ...] = (
    add_serve_command,
    add_index_command,
    add_sessions_command,
    add_call_command,
    add_schema_command,
    add_keys_command,
    add_cluster_command,
    _add_demo_command,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    # argparse cannot take positionals after an option (`call E M --agent A key=v`); the
    # leftovers of `call` are its items, anything else is a usage error.
    if extra and (args.command != "call" or any(item.startswith("-") for item in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.items = [*args.items, *extra]
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    as_json = wants_json(args)
    with logging_to_stderr(args):
        try:
            return int(args.run(args))
        except CliError as exc:
            return report(exc, as_json=as_json)
        except BrokenPipeError:
            # stdout went away (`… | head`): nothing more can be said there, and the
            # interpreter's final flush must not fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_CALL_FAILED
        except BaseException as exc:
            if isinstance(exc, SystemExit):
                raise
            if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves(exc)):
                return EXIT_INTERRUPTED
            return report_unexpected(exc, as_json=as_json)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-actors", description="Actor-based remote object service for agent runtimes."
    )
    parser.add_argument(
        "--version", action=_Version, help="print the version (and protocol, Python, ZeroMQ)"
    )
    add_logging_options(parser, top_level=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add_command in COMMANDS:
        add_command(commands)
    _add_logging_options_everywhere(parser)
    return parser


def _add_logging_options_everywhere(parser: argparse.ArgumentParser) -> None:
    """Let every subcommand, at any depth, take the logging options after its name too."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                add_logging_options(subparser, top_level=False)
                _add_logging_options_everywhere(subparser)


def version_text() -> str:
    """``agent-actors X.Y.Z`` and, on a second line, what it runs on."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import zmq

    from wire import PROTOCOL_VERSION

    try:
        ours = version("agent-actors")
    except PackageNotFoundError:
        ours = "(not installed)"
    return (
        f"agent-actors {ours}\nprotocol v{PROTOCOL_VERSION}, Python "
        f"{platform.python_version()}, pyzmq {zmq.pyzmq_version()}, libzmq {zmq.zmq_version()}"
    )


class _Version(argparse.Action):
    """``--version``: the text is built only when asked for (it imports ZeroMQ)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("default", argparse.SUPPRESS)
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(version_text())
        parser.exit()


def console_main() -> None:
    """Entry point of the ``agent-actors`` console script."""
    sys.exit(main())
