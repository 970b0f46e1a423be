"""``serve --workers N`` (the supervisor of ``actors.cluster``) and ``cluster evict-host``:
the command line of scale-out and multi-host clusters (docs/scale-out.md, docs/cluster.md)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from typing import Any

from actors.cli._addresses import bind_failure
from actors.cli._errors import EXIT_CALL_FAILED, CliError, leaves
from actors.cli._logging import level_name
from actors.cli._security import exposure_problem

__all__ = [
    "IO_THREAD_POLICIES",
    "add_cluster_command",
    "add_cluster_serve_options",
    "run_supervisor",
]

#: ``wire.IO_THREAD_POLICIES``, spelled out so that ``--help`` need not import ``wire`` (a test
#: keeps the two equal).
IO_THREAD_POLICIES = ("normal", "batch")


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
    import trio

    from actors.cluster._coordinator import CoordinatorError
    from actors.cluster._storage import evict_host

    try:
        eviction = trio.run(
            functools.partial(evict_host, args.coordinator, args.host, force=args.force)
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    except CoordinatorError as exc:
        raise CliError(f"evict-host {args.host}: {exc}", status=EXIT_CALL_FAILED) from None
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
    import trio
    import zmq

    from actors.cluster._coordinator import CoordinatorError
    from actors.cluster._supervisor import ClusterOptions, supervise
    from wire import use_io_thread_policy

    if args.workers < 1 or args.shards < 1:
        raise CliError("--workers and --shards must be positive")
    if not args.lease_ttl > 0:  # also NaN
        raise CliError(f"--lease-ttl must be positive, got {args.lease_ttl}")
    passed: list[str] = []
    for flag, value in (("--config", args.config), ("--sessions", args.sessions)):
        if value is not None:
            passed += [flag, str(value)]
    if args.durability is not None:
        passed += ["--durability", args.durability]
    if args.writable:
        passed.append("--writable")
    passed += ["--io-threads", args.io_threads]
    # Workers log as the command does (actors.cli._worker sets it up).
    log_format = getattr(args, "log_format", None) or "text"
    passed += ["--log-level", level_name(args), "--log-format", log_format]
    if args.coordinator is not None and not args.coordinator.startswith("etcd://"):
        raise CliError("--coordinator must be an etcd://host:port URL")
    placement = _placement(args, config)
    if isinstance(placement, str):
        raise CliError(placement)
    options = ClusterOptions(
        workers=args.workers,
        shard_count=args.shards,
        worker_args=tuple(passed),
        worker_module="actors.cli._worker",
        coordinator=args.coordinator,
        ttl=args.lease_ttl,
        relay_writes_per_agent=config.cluster.relay_writes_per_agent,
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
                metrics=getattr(args, "metrics_at", None),
            )
        )
    except BaseException as exc:
        # etcd unreachable, or its cluster has another shard count, or a front endpoint could
        # not be bound (raised inside a nursery: look inside the groups).
        for leaf in leaves(exc):
            if isinstance(leaf, trio.TooSlowError):
                raise CliError(
                    f"the {args.workers} worker(s) did not all start and claim their shards "
                    f"within {options.start_timeout:g} s (see their messages above)"
                ) from None
            if isinstance(leaf, CoordinatorError):
                raise CliError(f"coordinator {args.coordinator}: {leaf}") from None
            if isinstance(leaf, zmq.ZMQError):
                raise bind_failure(leaf, endpoints) from None
            if isinstance(leaf, OSError):
                raise CliError(f"cannot serve: {leaf}") from None
        raise
    return 0
