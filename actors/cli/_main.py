"""The ``agent-actors`` command (also ``python -m actors``).

``serve``   run a server until SIGINT/SIGTERM.
``index``   build or refresh the projection cache of an existing DSH sessions directory.
``call``    one call, httpie style: ``key=text`` passes a string, ``key:=json`` any JSON value;
            prints the JSON result on stdout, or ``code: message`` on stderr and exits 1.
``demo``    start a server process on a temporary ipc endpoint and walk through a few calls.
``keys``    generate a CURVE key pair (``serve --curve``, ``call --key``: ``actors.cli._security``).
``cluster`` operate a multi-host cluster (``serve --workers``, ``cluster evict-host``:
            ``actors.cli._cluster``).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import platformdirs
import trio

from actors._config import ConfigError, load_config
from actors._keys import KeyFileError, client_security
from actors._serve import READY_LINE, serve
from actors._store_services import CACHE_NAME
from actors.cli._cluster import add_cluster_command, add_cluster_serve_options, run_supervisor
from actors.cli._security import (
    add_call_options,
    add_keys_command,
    add_serve_options,
    exposure_problem,
    serve_security,
)
from actors.store import (
    IndexingError,
    ProgressBar,
    ProjectionCache,
    ProjectionCacheError,
    index_sessions,
    render_summary,
)
from wire import WireError, open_client

__all__ = ["main"]

DEFAULT_ENDPOINT = "tcp://127.0.0.1:7555"

#: Exit statuses of ``call``.
EXIT_CALL_FAILED = 1
EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    # argparse cannot take positionals after an option (`call E M --agent A key=v`); the
    # leftovers of `call` are its items, anything else is a usage error.
    if extra and (args.command != "call" or any(item.startswith("-") for item in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.items = [*args.items, *extra]
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    result: int = args.run(args)
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-actors", description="Actor-based remote object service for agent runtimes."
    )
    commands = parser.add_subparsers(dest="command")

    serve_cmd = commands.add_parser("serve", help="run a server until SIGINT or SIGTERM")
    serve_cmd.add_argument(
        "--endpoint",
        action="append",
        help=f"ZeroMQ endpoint to bind (repeatable; default {DEFAULT_ENDPOINT})",
    )
    serve_cmd.add_argument(
        "--data",
        type=Path,
        default=Path(platformdirs.user_data_dir("agent-actors")),
        help="data directory (default: under the XDG data home)",
    )
    serve_cmd.add_argument("--config", type=Path, help="TOML configuration file")
    serve_cmd.add_argument(
        "--sessions", type=Path, help="an existing DSH sessions directory to serve as well"
    )
    serve_cmd.add_argument(
        "--writable",
        action="store_true",
        help="allow writes to --sessions (read-only otherwise); new sessions then go there",
    )
    serve_cmd.add_argument(
        "--durability",
        choices=("fsync", "flush", "write-behind"),
        help="when an append is acknowledged (default: [sessions] durability, or fsync)",
    )
    add_serve_options(serve_cmd)
    add_cluster_serve_options(serve_cmd)
    serve_cmd.set_defaults(run=_run_serve)

    index_cmd = commands.add_parser(
        "index", help="build or refresh the projection cache of a DSH sessions directory"
    )
    index_cmd.add_argument("--sessions", type=Path, required=True, help="DSH sessions directory")
    index_cmd.add_argument(
        "--data",
        type=Path,
        default=Path(platformdirs.user_data_dir("agent-actors")),
        help="data directory holding the cache (default: under the XDG data home)",
    )
    index_cmd.set_defaults(run=_run_index)

    call_cmd = commands.add_parser("call", help="make one call and print its JSON result")
    call_cmd.add_argument("endpoint", help="server endpoint, e.g. tcp://127.0.0.1:7555")
    call_cmd.add_argument("method", help="NAMESPACE/METHOD")
    call_cmd.add_argument("items", nargs="*", help="key=text or key:=json arguments")
    call_cmd.add_argument("--agent", help="agent (session) id, sent as agentId")
    call_cmd.add_argument(
        "--timeout", type=float, default=30.0, help="deadline in seconds (default 30)"
    )
    add_call_options(call_cmd)
    call_cmd.set_defaults(run=_run_call)
    add_keys_command(commands)
    add_cluster_command(commands)

    demo_cmd = commands.add_parser("demo", help="walk through a few calls against a new server")
    demo_cmd.set_defaults(run=_run_demo)
    return parser


def _run_serve(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"agent-actors: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.durability is not None:
        config = attrs.evolve(config, durability=args.durability)
    if args.writable and args.sessions is None:
        print("agent-actors: --writable needs --sessions", file=sys.stderr)
        return EXIT_USAGE

    endpoints = args.endpoint or [DEFAULT_ENDPOINT]
    problem = exposure_problem(endpoints, curve=args.curve is not None, insecure=args.insecure)
    if problem is not None:
        print(f"agent-actors: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        security = serve_security(args)
    except KeyFileError as exc:
        print(f"agent-actors: {exc}", file=sys.stderr)
        return EXIT_USAGE

    def ready(addresses: list[str]) -> None:
        print(f"{READY_LINE} {' '.join(addresses)}", flush=True)

    if args.coordinator is not None and not args.workers:
        print("agent-actors: --coordinator needs --workers", file=sys.stderr)
        return EXIT_USAGE
    unwritable = _unwritable(args.data)
    if unwritable is not None:
        print(f"agent-actors: cannot serve: {unwritable}", file=sys.stderr)
        return EXIT_USAGE
    if args.workers:
        return run_supervisor(args, config, ready, args.endpoint or [DEFAULT_ENDPOINT])
    try:
        trio.run(
            functools.partial(
                serve,
                endpoints,
                config,
                args.data,
                sessions_dir=args.sessions,
                writable=args.writable,
                on_ready=ready,
                security=security,
            )
        )
    except (OSError, ProjectionCacheError) as exc:  # zmq.ZMQError is an OSError
        print(f"agent-actors: cannot serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def _unwritable(data_dir: Path) -> str | None:
    """Why the server could not write in ``data_dir`` (``None``: it can). Every write path
    (sessions, locks, the cache, worker sockets) lives there: a server that printed its ready
    line and then failed every write would send its users far from the cause."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=data_dir, prefix=".writable-", delete=True)
        probe.close()
    except OSError as exc:
        return f"data directory {data_dir} is not writable: {exc.strerror or exc}"
    return None


def _run_index(args: argparse.Namespace) -> int:
    try:
        args.data.mkdir(parents=True, exist_ok=True)
        cache = ProjectionCache.open(args.data / CACHE_NAME)
    except (OSError, ProjectionCacheError) as exc:
        print(f"agent-actors: cannot open the cache: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        summary = index_sessions(args.sessions, cache, progress=ProgressBar())
    except (OSError, IndexingError, ProjectionCacheError) as exc:
        print(f"agent-actors: cannot index {args.sessions}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        cache.close()
    print(render_summary(summary))
    return 0


def parse_items(items: Sequence[str]) -> dict[str, Any]:
    """httpie's convention: ``key=text`` is a string, ``key:=json`` any JSON value.

    Raises:
        ValueError: an item has neither form, or its JSON does not parse.
    """
    out: dict[str, Any] = {}
    for item in items:
        json_key, json_sep, json_value = item.partition(":=")
        text_key, text_sep, text_value = item.partition("=")
        if json_sep and len(json_key) < len(text_key):
            try:
                out[json_key] = json.loads(json_value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{item!r}: invalid JSON: {exc}") from None
        elif text_sep and text_key:
            out[text_key] = text_value
        else:
            raise ValueError(f"{item!r}: expected key=text or key:=json")
    return out


def _run_call(args: argparse.Namespace) -> int:
    try:
        wire_args = parse_items(args.items)
    except ValueError as exc:
        print(f"agent-actors: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.agent is not None:
        wire_args["agentId"] = args.agent
    try:
        security = client_security(args.server_key, args.key)
    except KeyFileError as exc:
        print(f"agent-actors: {exc}", file=sys.stderr)
        return EXIT_USAGE

    async def call() -> Any:
        with trio.fail_after(args.timeout):
            async with open_client(
                args.endpoint, name="agent-actors call", security=security
            ) as client:
                return await client.call(args.method, wire_args)

    try:
        result = trio.run(call)
    except WireError as exc:
        print(f"{exc.code.value}: {exc.message}", file=sys.stderr)
        if exc.details:
            print(json.dumps(dict(exc.details), default=str), file=sys.stderr)
        return EXIT_CALL_FAILED
    except trio.TooSlowError:
        print(f"deadline-exceeded: no reply within {args.timeout:g} s", file=sys.stderr)
        return EXIT_CALL_FAILED
    print(json.dumps(result, ensure_ascii=False, indent=2, default=_json_default))
    return 0


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"cannot print a {type(value).__name__}")


def _run_demo(args: argparse.Namespace) -> int:
    from actors.cli._demo import run_demo

    return trio.run(run_demo)


def console_main() -> None:
    """Entry point of the ``agent-actors`` console script."""
    sys.exit(main())
