"""``agent-actors serve``: check everything a server needs, then run it until SIGINT/SIGTERM.

Before anything is opened: the configuration, the flags, each endpoint's form and host
(``_addresses``), the exposure rule and the CURVE files (``_security``), that the data
directory is writable, then each ipc endpoint's directory and path. A failure there, or a bind
that fails after all, is one line and exit status 2 (:class:`~actors.cli._errors.CliError`).
``--workers`` hands over to ``_cluster``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from actors.cli._addresses import bind_failure, check_bind_path, check_endpoint, check_host
from actors.cli._data import default_data_dir
from actors.cli._errors import CliError, leaves

__all__ = ["DEFAULT_ENDPOINT", "add_serve_command", "run_serve"]

DEFAULT_ENDPOINT = "tcp://127.0.0.1:7555"


def add_serve_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from actors.cli._cluster import add_cluster_serve_options
    from actors.cli._metrics import add_metrics_option
    from actors.cli._security import add_serve_options

    serve_cmd = commands.add_parser("serve", help="run a server until SIGINT or SIGTERM")
    serve_cmd.add_argument(
        "--endpoint",
        action="append",
        help=f"ZeroMQ endpoint to bind: tcp://HOST:PORT or ipc:///PATH (repeatable; default "
        f"{DEFAULT_ENDPOINT})",
    )
    serve_cmd.add_argument(
        "--data", type=Path, help="data directory (default: under the XDG data home)"
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
    add_metrics_option(serve_cmd)
    add_cluster_serve_options(serve_cmd)
    serve_cmd.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import attrs

    from actors._config import ConfigError, load_config
    from actors._keys import KeyFileError
    from actors.cli._metrics import metrics_address
    from actors.cli._security import exposure_problem, serve_security

    if args.data is None:
        args.data = default_data_dir()
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if args.durability is not None:
        config = attrs.evolve(config, durability=args.durability)
    if args.writable and args.sessions is None:
        raise CliError("--writable needs --sessions")

    endpoints = args.endpoint or [DEFAULT_ENDPOINT]
    for endpoint in endpoints:
        check_endpoint(endpoint, bind=True)
        check_host(endpoint, bind=True)
    problem = exposure_problem(endpoints, curve=args.curve is not None, insecure=args.insecure)
    if problem is not None:
        raise CliError(problem)
    try:
        args.metrics_at = metrics_address(args.metrics, insecure=args.insecure)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        security = serve_security(args)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None
    if args.coordinator is not None and not args.workers:
        raise CliError("--coordinator needs --workers")
    unwritable = _unwritable(args.data)
    if unwritable is not None:
        raise CliError(f"cannot serve: {unwritable}", hints=["choose another --data directory"])
    for endpoint in endpoints:
        # After the data directory: an ipc socket is often placed in (or beside) it.
        check_bind_path(endpoint)
    if args.sessions is not None:
        _warn_without_sessions(args.sessions)
    if args.workers:
        from actors.cli._cluster import run_supervisor

        return run_supervisor(args, config, _print_ready, endpoints)
    _serve(args, config, endpoints, security)
    return 0


def _print_ready(addresses: list[str]) -> None:
    from actors._serve import READY_LINE
    from wire import settle_collector, watch_collector

    settle_collector()  # startup is over: what it built is never collected
    watch_collector()  # and each collection's pause is a metric from now on
    print(f"{READY_LINE} {' '.join(addresses)}", flush=True)


def _serve(args: argparse.Namespace, config: Any, endpoints: list[str], security: Any) -> None:
    import functools

    import trio
    import zmq

    from actors._serve import serve
    from actors.store import ProjectionCacheError

    try:
        trio.run(
            functools.partial(
                serve,
                endpoints,
                config,
                args.data,
                sessions_dir=args.sessions,
                writable=args.writable,
                on_ready=_print_ready,
                security=security,
                metrics=args.metrics_at,
            )
        )
    except BaseException as exc:
        # trio wraps a failure in a group for each nursery it leaves: look inside.
        for leaf in leaves(exc):
            if isinstance(leaf, zmq.ZMQError):
                raise bind_failure(leaf, endpoints) from None
            if isinstance(leaf, OSError | ProjectionCacheError):
                raise CliError(f"cannot serve: {leaf}") from None
        raise


def _warn_without_sessions(folder: Path) -> None:
    """Warn when ``--sessions`` holds no DSH session logs (serving goes on: the folder may
    fill later); a folder that is not there is left to the store, which refuses it."""
    from actors.cli._import import warn_no_sessions
    from actors.store import has_session_logs

    if folder.is_dir() and not has_session_logs(folder):
        warn_no_sessions(folder)


def _unwritable(data_dir: Path) -> str | None:
    """Why the server could not write in ``data_dir`` (``None``: it can). Every write path
    (sessions, locks, the cache, worker sockets) lives there: a server that printed its ready
    line and then failed every write would send its users far from the cause."""
    import tempfile

    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=data_dir, prefix=".writable-", delete=True)
        probe.close()
    except OSError as exc:
        return f"data directory {data_dir} is not writable: {exc.strerror or exc}"
    return None
