"""``serve --workers N`` (the supervisor of ``actors.cluster``) and ``cluster evict-host``:
the command line of scale-out and multi-host clusters (docs/scale-out.md, docs/cluster.md)."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from typing import Any

import trio

from actors.cli._security import exposure_problem
from wire import IO_THREAD_POLICIES, use_io_thread_policy

__all__ = ["add_cluster_command", "add_cluster_serve_options", "run_supervisor"]

#: Exit statuses, as ``actors.cli._main``'s.
EXIT_CALL_FAILED = 1
EXIT_USAGE = 2


def add_cluster_serve_options(serve_cmd: argparse.ArgumentParser) -> None:
    """``serve``'s scale-out flags: workers, shards, the coordinator and placement."""
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
        "--io-threads",
        choices=IO_THREAD_POLICIES,
        default="batch",
        help="with --workers: how the processes' ZeroMQ I/O threads are scheduled; batch "
        "(default): they do not preempt a busy event loop, which saves a context switch every "
        "few calls when the workers and their clients outnumber the cores (docs/scale-out.md)",
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


def _placement(args: argparse.Namespace, config: Any) -> dict[str, Any] | str:
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


def add_cluster_command(commands: Any) -> None:
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


def run_supervisor(
    args: argparse.Namespace, config: Any, ready: Any, endpoints: Sequence[str]
) -> int:
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
    passed += ["--io-threads", args.io_threads]
    if args.coordinator is not None and not args.coordinator.startswith("etcd://"):
        print("agent-actors: --coordinator must be an etcd://host:port URL", file=sys.stderr)
        return EXIT_USAGE
    placement = _placement(args, config)
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
    use_io_thread_policy(args.io_threads)  # before the supervisor's first socket
    try:
        trio.run(
            functools.partial(
                supervise,
                list(endpoints),
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
