"""``python -m actors.cluster worker …``: one worker process, started by the supervisor."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs
import trio

from actors._config import ConfigError, load_config
from actors.cluster._storage import STORAGE_MODES, Placement
from actors.cluster._supervisor import WORKER_READY
from actors.cluster._worker import run_worker
from wire import IO_THREAD_POLICIES, settle_collector, use_io_thread_policy, watch_collector


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m actors.cluster")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="run one worker (started by the supervisor)")
    worker.add_argument("--id", required=True, help="worker id (w1, w2, …)")
    worker.add_argument("--control", required=True, help="the supervisor's control endpoint")
    worker.add_argument("--endpoint", required=True, help="private endpoint to bind")
    worker.add_argument("--data", type=Path, required=True, help="shared data directory")
    worker.add_argument("--shards", type=int, required=True, help="shard count S")
    worker.add_argument("--ttl", type=float, default=10.0, help="lease TTL in seconds")
    worker.add_argument("--config", type=Path, help="TOML configuration file")
    worker.add_argument("--sessions", type=Path, help="an existing DSH sessions directory")
    worker.add_argument("--writable", action="store_true", help="allow writes to --sessions")
    worker.add_argument("--durability", choices=("fsync", "flush", "write-behind"))
    worker.add_argument("--host-id", help="this host's name in the cluster (etcd only)")
    worker.add_argument("--storage-mode", choices=STORAGE_MODES, default="local")
    worker.add_argument("--storage-id", help="the storage this worker sees (etcd only)")
    worker.add_argument("--io-threads", choices=IO_THREAD_POLICIES, default="normal")
    worker.add_argument(
        "--parent-pipe",
        action="store_true",
        help="stop when stdin reaches end of file (the supervisor holds its other end)",
    )
    args = parser.parse_args(argv)
    try:
        placement = Placement.build(
            data_dir=args.data,
            host_id=args.host_id,
            storage_mode=args.storage_mode,
            storage_id=args.storage_id,
        )
    except ValueError as exc:
        print(f"agent-actors worker: {exc}", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"agent-actors worker: {exc}", file=sys.stderr)
        return 2
    if args.durability is not None:
        config = attrs.evolve(config, durability=args.durability)

    use_io_thread_policy(args.io_threads)  # before the worker's first socket

    def ready(addresses: list[str]) -> None:
        settle_collector()  # startup is over: what it built is never collected
        watch_collector()  # and each collection's pause is a metric from now on
        print(f"{WORKER_READY} {' '.join(addresses)}", flush=True)

    trio.run(
        functools.partial(
            run_worker,
            worker_id=args.id,
            control=args.control,
            endpoint=args.endpoint,
            config=config,
            data_dir=args.data,
            shard_count=args.shards,
            ttl=args.ttl,
            sessions_dir=args.sessions,
            writable=args.writable,
            placement=placement,
            on_ready=ready,
            parent_pipe=args.parent_pipe,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
