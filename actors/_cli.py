"""The ``agent-actors`` command (also ``python -m actors``).

``serve``   run a server until SIGINT/SIGTERM.
``index``   build or refresh the projection cache of an existing DSH sessions directory.
``call``    one call, httpie style: ``key=text`` passes a string, ``key:=json`` any JSON value;
            prints the JSON result on stdout, or ``code: message`` on stderr and exits 1.
``demo``    start a server process on a temporary ipc endpoint and walk through a few calls.
``keys``    generate a CURVE key pair (``serve --curve``, ``call --key``: ``actors._cli_security``).
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

from actors._cli_security import (
    add_call_options,
    add_keys_command,
    add_serve_options,
    exposure_problem,
    serve_security,
)
from actors._config import ConfigError, load_config
from actors._indexing import IndexingError, ProgressBar, index_sessions, render_summary
from actors._keys import KeyFileError, client_security
from actors._projection_cache import ProjectionCache, ProjectionCacheError
from actors._serve import READY_LINE, serve
from actors._store_services import CACHE_NAME
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
    serve_cmd.add_argument(
        "--workers",
        type=int,
        default=0,
        help="scale out: run N worker processes under a supervisor (docs/scale-out.md)",
    )
    serve_cmd.add_argument(
        "--shards", type=int, default=64, help="shard count with --workers (default 64)"
    )
    serve_cmd.add_argument(
        "--coordinator",
        metavar="etcd://HOST:PORT[,…][/CLUSTER]",
        help="with --workers: workers join this etcd cluster (docs/cluster.md)",
    )
    serve_cmd.add_argument(
        "--lease-ttl",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="with --workers: each worker's lease TTL; a hung worker loses its shards after "
        "it (default 10)",
    )
    _add_cluster_serve_options(serve_cmd)
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
    _add_cluster_command(commands)

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
        return _run_supervisor(args, config, ready)
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


def _run_supervisor(args: argparse.Namespace, config: Any, ready: Any) -> int:
    """``serve --workers N``: the supervisor of ``actors.cluster``."""
    from actors.cluster._coordinator import CoordinatorError
    from actors.cluster._supervisor import ClusterOptions, supervise

    if args.workers < 1 or args.shards < 1:
        print("agent-actors: --workers and --shards must be positive", file=sys.stderr)
        return EXIT_USAGE
    if not args.lease_ttl > 0:  # also NaN
        print(f"agent-actors: --lease-ttl must be positive, got {args.lease_ttl}", file=sys.stderr)
        return EXIT_USAGE
    passed: list[str] = []
    for flag, value in (("--config", args.config), ("--sessions", args.sessions)):
        if value is not None:
            passed += [flag, str(value)]
    if args.durability is not None:
        passed += ["--durability", args.durability]
    if args.writable:
        passed.append("--writable")
    if args.coordinator is not None and not args.coordinator.startswith("etcd://"):
        print("agent-actors: --coordinator must be an etcd://host:port URL", file=sys.stderr)
        return EXIT_USAGE
    placement = _cluster_placement(args, config)
    if isinstance(placement, str):
        print(f"agent-actors: {placement}", file=sys.stderr)
        return EXIT_USAGE
    options = ClusterOptions(
        workers=args.workers,
        shard_count=args.shards,
        worker_args=tuple(passed),
        coordinator=args.coordinator,
        ttl=args.lease_ttl,
        **placement,
    )
    try:
        trio.run(
            functools.partial(
                supervise,
                args.endpoint or [DEFAULT_ENDPOINT],
                args.data,
                options,
                limits=config.wire,
                on_ready=ready,
            )
        )
    except OSError as exc:  # zmq.ZMQError is an OSError
        print(f"agent-actors: cannot serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BaseExceptionGroup as group:
        # etcd unreachable, or its cluster has another shard count (raised inside a nursery).
        matched, rest = group.split(CoordinatorError)
        if matched is None or rest is not None:
            raise
        first: BaseException = matched
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        print(f"agent-actors: coordinator {args.coordinator}: {first}", file=sys.stderr)
        return EXIT_USAGE
    except trio.TooSlowError:
        print(
            f"agent-actors: the {args.workers} worker(s) did not all start and claim their "
            f"shards within {options.start_timeout:g} s (see their messages above)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return 0


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
    from actors._demo import run_demo

    return trio.run(run_demo)


def console_main() -> None:
    """Entry point of the ``agent-actors`` console script."""
    sys.exit(main())


# -- multi-host clusters (docs/cluster.md) ------------------------------------------------------


def _add_cluster_serve_options(serve_cmd: argparse.ArgumentParser) -> None:
    serve_cmd.add_argument(
        "--host-id",
        help="with --coordinator: this host's name in the cluster; worker ids are "
        "HOST-ID-w1… ([cluster] hostId; default: the hostname)",
    )
    serve_cmd.add_argument(
        "--storage-mode",
        choices=("local", "shared"),
        help="with --coordinator: local (default): a shard fails over only to workers on "
        "this host's storage; shared: any worker mounting --storage-id may take it over",
    )
    serve_cmd.add_argument(
        "--storage-id",
        metavar="NAME",
        help="with --coordinator: the storage's name in the cluster (default HOST-ID:DATA; "
        "required with --storage-mode shared, the same on every host mounting it)",
    )
    serve_cmd.add_argument(
        "--worker-endpoint",
        metavar="tcp://ADDR:*",
        help="with --workers: what each worker binds (default: a private ipc endpoint); other "
        "hosts must reach it, and a non-loopback address needs --insecure",
    )


def _cluster_placement(args: argparse.Namespace, config: Any) -> dict[str, Any] | str:
    """The placement options of ``serve --workers``, or why they are unusable."""
    table = config.cluster
    options: dict[str, Any] = {
        "host_id": args.host_id or table.host_id,
        "storage_mode": args.storage_mode or table.storage_mode,
        "storage_id": args.storage_id or table.storage_id,
        "worker_endpoint": args.worker_endpoint or table.worker_endpoint,
    }
    worker_endpoint = options["worker_endpoint"]
    if worker_endpoint is not None:
        if args.curve is not None:
            return "--worker-endpoint with --curve is not supported yet (workers serve plain tcp)"
        problem = exposure_problem([worker_endpoint], curve=False, insecure=args.insecure)
        if problem is not None:
            return f"--worker-endpoint: {problem}"
    if args.coordinator is None:
        if any(args_value is not None for args_value in (args.host_id, args.storage_id)):
            return "--host-id and --storage-id need --coordinator"
        return {"worker_endpoint": worker_endpoint}
    if options["storage_mode"] == "shared" and options["storage_id"] is None:
        return "--storage-mode shared needs --storage-id NAME (the shared mount's name)"
    return options


def _add_cluster_command(commands: Any) -> None:
    cluster_cmd = commands.add_parser("cluster", help="operate a multi-host cluster on etcd")
    actions = cluster_cmd.add_subparsers(dest="action", required=True)
    evict = actions.add_parser(
        "evict-host",
        help="give up a lost host's storage: delete its shard bindings so other hosts may "
        "claim those shards (their sessions stay on the lost host's disk)",
    )
    evict.add_argument("host", help="the host id (serve --host-id; default there: hostname)")
    evict.add_argument(
        "--coordinator",
        required=True,
        metavar="etcd://HOST:PORT[,…][/CLUSTER]",
        help="the cluster's etcd members and name, as given to serve",
    )
    evict.add_argument(
        "--force", action="store_true", help="evict even though the host has live members"
    )
    evict.set_defaults(run=_run_evict_host)


def _run_evict_host(args: argparse.Namespace) -> int:
    from actors.cluster._coordinator import CoordinatorError
    from actors.cluster._storage import evict_host

    try:
        eviction = trio.run(
            functools.partial(evict_host, args.coordinator, args.host, force=args.force)
        )
    except ValueError as exc:
        print(f"agent-actors: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CoordinatorError as exc:
        print(f"agent-actors: evict-host {args.host}: {exc}", file=sys.stderr)
        return EXIT_CALL_FAILED
    print(
        f"evicted host {eviction.host}: {len(eviction.evicted)} shard binding(s) deleted"
        + (f" ({', '.join(map(str, eviction.evicted))})" if eviction.evicted else "")
    )
    if eviction.kept:
        print(
            f"kept {len(eviction.kept)} binding(s) whose storage another host still mounts: "
            + ", ".join(map(str, eviction.kept))
        )
    if eviction.live_members:
        print(f"warning: the host still has live members: {', '.join(eviction.live_members)}")
    return 0
