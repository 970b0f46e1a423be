"""The supervisor: N worker processes, the coordinator, and the public endpoint.

``agent-actors serve --workers N`` runs `supervise`. It holds the `InProcessCoordinator` and
serves it to the workers on a private control endpoint; starts N workers (``python -m
actors.cluster worker …``) in their own process group, so a terminal's Ctrl-C reaches only the
supervisor; restarts a worker that exits (its lease is revoked the moment the exit is seen, so
its shards fail over at once, and its client is closed, so calls in flight on it fail with
``unavailable`` at once); and forwards public calls to the owners. On SIGINT or SIGTERM it
drains: the public server cancels calls in flight (each gets its one terminal frame, reason
``shutdown``), then every worker gets SIGTERM and drains itself, then the supervisor exits 0.

With ``--coordinator etcd://…`` several supervisors (one per host) form one cluster: worker
ids are ``<host-id>-w1…``, each supervisor waits only for its own workers at start, and every
supervisor routes by the cluster-wide shard map (owners on other hosts included). A call for a
shard bound to a storage that no live worker sees answers ``unavailable`` at once.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors._serve import announce_metrics
from actors.cluster._coordinator_local import InProcessCoordinator
from actors.cluster._coordinator_wire import coordinator_endpoints
from actors.cluster._epoch_floor import revision_floor
from actors.cluster._etcd_cluster import EtcdMirror, open_supervisor_view
from actors.cluster._lanes import WRITES_HANDED_ON
from actors.cluster._pool import ClientPool
from actors.cluster._router import forwarding_registry
from actors.cluster._shards import DEFAULT_SHARDS, placement_owner
from actors.cluster._storage import Placement, StorageMode, default_host_id
from wire import (
    SERVER_FAMILIES,
    CallMetrics,
    Registry,
    Server,
    ServerLimits,
    WireError,
    gauge,
    merge_metrics,
    metrics_snapshot,
    serve_metrics,
)

__all__ = ["WORKER_READY", "ClusterOptions", "supervise"]

log = logging.getLogger("actors.cluster")

#: The control endpoint's timers (seconds): a worker's lease (10 s by default) and its parent
#: check bound a lost supervisor well before this silence would.
_CONTROL_LIMITS = ServerLimits(heartbeat=5.0, peer_timeout=12.5)

#: First line a worker prints, then its bound address.
WORKER_READY = "agent-actors worker: serving on"
#: Longest ipc path ZeroMQ accepts on Linux is 107 bytes; longer data dirs use loopback tcp.
_IPC_PATH_MAX = 100


@attrs.frozen(kw_only=True)
class ClusterOptions:
    """How the supervisor runs its workers."""

    workers: int
    shard_count: int = DEFAULT_SHARDS
    #: Lease TTL of each worker (seconds); a hung worker loses its shards after this.
    ttl: float = 10.0
    #: Arguments passed on to every worker (``--config``, ``--sessions``, …).
    worker_args: tuple[str, ...] = ()
    #: The module a worker runs as (``python -m MODULE worker …``): the command line wraps
    #: ``actors.cluster``'s to set up logging as its own.
    worker_module: str = "actors.cluster"
    #: Seconds to wait for all workers and every shard owned at start.
    start_timeout: float = 60.0
    #: Seconds a worker gets to drain after SIGTERM before it is killed.
    stop_timeout: float = 15.0
    #: ``etcd://h:p[,h:p…][/cluster]``: workers join etcd instead of this supervisor.
    coordinator: str | None = None
    #: This host's name in the cluster (default: the hostname); worker ids are
    #: ``<host-id>-w1…`` with a coordinator, ``w1…`` without.
    host_id: str | None = None
    #: ``local``: shards fail over only between workers on this storage; ``shared``: any
    #: worker mounting the same storage (``storage_id``) may take them over.
    storage_mode: StorageMode = "local"
    #: The storage's name in the cluster (default ``<host-id>:<data dir>``; required shared).
    storage_id: str | None = None
    #: What workers bind, e.g. ``tcp://10.0.0.5:*`` (default: a private ipc endpoint); with
    #: several hosts it must be an address the other hosts can reach.
    worker_endpoint: str | None = None
    #: State-changing calls per agent handed on to its owner at once (``[cluster]
    #: relayWritesPerAgent``; `actors.cluster._lanes`).
    relay_writes_per_agent: int = WRITES_HANDED_ON

    def worker_ids(self) -> list[str]:
        """Ids of this supervisor's workers: cluster-unique when a coordinator is shared."""
        if self.coordinator is None:
            return [f"w{i + 1}" for i in range(self.workers)]
        host = self.host_id or default_host_id()
        return [f"{host}-w{i + 1}" for i in range(self.workers)]


def _private_endpoint(data_dir: Path, name: str) -> str:
    path = data_dir.resolve() / "cluster" / f"{name}.sock"
    if len(str(path)) <= _IPC_PATH_MAX:
        return f"ipc://{path}"
    return "tcp://127.0.0.1:0"


@attrs.define(eq=False)
class _Worker:
    worker_id: str
    process: trio.Process | None = None
    endpoint: str | None = None
    restarts: int = 0


class _Workers:
    def __init__(
        self,
        options: ClusterOptions,
        coordinator: InProcessCoordinator | EtcdMirror,
        pool: ClientPool,
        control: str,
        data_dir: Path,
    ) -> None:
        self.options = options
        self.coordinator = coordinator
        self.pool = pool
        self.control = control
        self.data_dir = data_dir
        self.stopping = False
        self.workers = [_Worker(worker_id) for worker_id in options.worker_ids()]
        self.placement: Placement | None = None
        if options.coordinator is not None:
            self.placement = Placement.build(
                data_dir=data_dir,
                host_id=options.host_id,
                storage_mode=options.storage_mode,
                storage_id=options.storage_id,
            )

    def command(self, worker: _Worker) -> list[str]:
        placement: list[str] = []
        if self.placement is not None:
            placement = [
                "--host-id",
                self.placement.host_id,
                "--storage-mode",
                self.placement.storage_mode,
                "--storage-id",
                self.placement.storage_id,
            ]
        return [
            sys.executable,
            "-m",
            self.options.worker_module,
            "worker",
            "--id",
            worker.worker_id,
            "--control",
            self.control,
            "--endpoint",
            self.options.worker_endpoint or _private_endpoint(self.data_dir, worker.worker_id),
            "--data",
            str(self.data_dir),
            "--shards",
            str(self.options.shard_count),
            "--ttl",
            str(self.options.ttl),
            "--parent-pipe",
            *placement,
            *self.options.worker_args,
        ]

    async def keep_running(self, worker: _Worker) -> None:
        """Run ``worker``, restarting it whenever it exits, until stopping."""
        backoff = 0.1
        while not self.stopping:
            started = trio.current_time()
            try:
                await self._run_once(worker)
            except Exception:
                log.exception("worker %s failed to start", worker.worker_id)
            if self.stopping:
                return
            worker.restarts += 1
            backoff = 0.1 if trio.current_time() - started > 10 else min(backoff * 2, 5.0)
            print(
                f"agent-actors: worker {worker.worker_id} exited "
                f"(status {worker.process.returncode if worker.process else None}); "
                f"restarting in {backoff:g} s",
                file=sys.stderr,
                flush=True,
            )
            await trio.sleep(backoff)

    async def _run_once(self, worker: _Worker) -> None:
        process = await trio.lowlevel.open_process(
            self.command(worker),
            # Never written: the worker stops at its end of file, when this process is gone.
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        worker.process = process
        try:
            assert process.stdout is not None
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_stdout, worker, process.stdout)
                await process.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                if process.stdin is not None:
                    await process.stdin.aclose()
                self._forget(worker)

    async def _read_stdout(self, worker: _Worker, stream: trio.abc.ReceiveStream) -> None:
        buffer = b""
        async for chunk in stream:
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text.startswith(WORKER_READY):
                    worker.endpoint = text.removeprefix(WORKER_READY).split()[0]
                else:
                    print(f"[{worker.worker_id}] {text}", file=sys.stderr, flush=True)

    def _forget(self, worker: _Worker) -> None:
        """The worker's process is gone: revoke its lease (its shards fail over now) and
        close its client (calls in flight on it fail with ``unavailable`` now)."""
        lease = self.coordinator.lease_of(worker.worker_id)
        if lease is not None:
            self.coordinator.revoke(lease.lease_id)
        if worker.endpoint is not None:
            self.pool.close(worker.endpoint)

    def settled(self) -> bool:
        """Every worker of this supervisor joined, and holds every shard it should own.

        Only this supervisor's workers count: other hosts' workers come and go on their own
        schedule (one host, where every worker is ours, this is every shard held by its
        rendezvous owner).
        """
        view = self.coordinator.current()
        ours = {worker.worker_id for worker in self.workers}
        if not ours <= set(view.worker_ids()):
            return False
        owners = view.owners()
        for shard, claim in enumerate(owners):
            desired = placement_owner(view, shard)
            if desired in ours and (claim is None or claim.worker_id != desired):
                return False
        return True

    def serving(self) -> bool:
        """Whether calls are served (``/readyz``): until the workers are told to stop."""
        return not self.stopping

    def own_endpoints(self) -> list[str]:
        """The endpoints of this supervisor's live workers."""
        ours = {worker.worker_id for worker in self.workers}
        return [m.endpoint for m in self.coordinator.current().members if m.worker_id in ours]

    async def metrics(self) -> dict[str, Any]:
        """The workers' runtime families added up (``system/metrics`` of each), and how many
        answered; a worker that does not answer within a second is left out of this scrape."""
        snapshots = []

        async def scrape(endpoint: str) -> None:
            with trio.move_on_after(1.0):
                try:
                    found = await (await self.pool.get(endpoint)).call("system/metrics")
                except WireError:
                    return
                snapshots.append({k: v for k, v in found.items() if k not in SERVER_FAMILIES})

        async with trio.open_nursery() as nursery:
            for endpoint in self.own_endpoints():
                nursery.start_soon(scrape, endpoint)
        merged = merge_metrics(snapshots)
        merged["workers_answering"] = gauge(
            "Workers whose metrics this scrape includes.", (), [((), len(snapshots))]
        )
        return merged

    def own_endpoint(self) -> str:
        """The endpoint of one of this supervisor's live workers."""
        return next(iter(self.own_endpoints()))

    async def stop(self) -> None:
        """SIGTERM every worker, wait for each to drain and exit (kill after the timeout)."""
        self.stopping = True
        for worker in self.workers:
            if worker.process is not None and worker.process.returncode is None:
                worker.process.send_signal(signal.SIGTERM)
        with trio.move_on_after(self.options.stop_timeout):
            for worker in self.workers:
                if worker.process is not None:
                    await worker.process.wait()
        for worker in self.workers:
            if worker.process is not None and worker.process.returncode is None:
                log.warning("worker %s did not stop in time; killing it", worker.worker_id)
                worker.process.kill()
                await worker.process.wait()

    def pids(self) -> dict[str, int | None]:
        return {w.worker_id: (w.process.pid if w.process else None) for w in self.workers}


async def supervise(
    endpoints: Sequence[str],
    data_dir: Path,
    options: ClusterOptions,
    *,
    limits: ServerLimits | None = None,
    on_ready: Callable[[list[str]], None] | None = None,
    metrics: tuple[str, int] | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the supervisor until SIGINT or SIGTERM, then drain and stop every worker.

    ``metrics`` (host, port): Prometheus metrics over HTTP, one view over all workers: the
    calls as this supervisor answered them, and the workers' runtime families added up."""
    if options.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {options.workers}")
    data_dir = Path(data_dir)
    await trio.Path(data_dir / "cluster").mkdir(parents=True, exist_ok=True)
    # Only the in-process coordinator's epochs need a floor: etcd's revisions persist.
    floor = (
        await trio.to_thread.run_sync(revision_floor, data_dir)
        if options.coordinator is None
        else 0
    )
    local = InProcessCoordinator(options.shard_count, first_revision=floor)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with (
            # With etcd, workers join etcd themselves and the supervisor follows its view.
            open_supervisor_view(
                options.coordinator, local, shard_count=options.shard_count, data_dir=data_dir
            ) as coordinator,
            trio.open_nursery() as nursery,
        ):
            # Its clients are this supervisor's own workers, which watch their parent and hold
            # leases: a slow heartbeat is enough there, and an idle cluster stays quiet.
            control = Server(Registry(coordinator_endpoints(local)), limits=_CONTROL_LIMITS)
            if options.coordinator is not None:
                control_address = options.coordinator
            else:
                control_endpoint = _private_endpoint(data_dir, "control")
                if control_endpoint.startswith("tcp://"):
                    control_endpoint = f"ipc://{tempfile.mkdtemp(prefix='aa-')}/control.sock"
                control_address = (await nursery.start(control.run, control_endpoint))[0]
            pool = ClientPool(nursery, name="agent-actors supervisor")
            workers = _Workers(options, coordinator, pool, control_address, data_dir)
            for worker in workers.workers:
                nursery.start_soon(workers.keep_running, worker)

            with trio.fail_after(options.start_timeout):
                while not workers.settled():
                    await coordinator.changed(coordinator.revision)
                first = workers.own_endpoint()
                described = await (await pool.get(first)).call("system/describe")

            async def wait_change(seconds: float) -> None:
                with trio.move_on_after(seconds):
                    await coordinator.changed(coordinator.revision)

            registry = forwarding_registry(
                described,
                pool,
                coordinator.current,
                wait_change,
                writes_per_agent=options.relay_writes_per_agent,
            )

            async def cluster_metrics() -> dict[str, Any]:
                return {**await workers.metrics(), **registry.lanes.metric_families()}

            calls = CallMetrics() if metrics is not None else None
            public = Server(registry, limits=limits, call_metrics=calls, metrics=cluster_metrics)
            addresses = await nursery.start(public.run, list(endpoints))
            if metrics is not None:
                snapshot = functools.partial(
                    metrics_snapshot, public.statistics, calls, cluster_metrics
                )
                announce_metrics(
                    await nursery.start(serve_metrics, *metrics, snapshot, workers.serving)
                )
            if on_ready is not None:
                on_ready(addresses)
            task_status.started(addresses)
            async for signum in signals:
                name = signal.Signals(signum).name
                count = len(workers.workers)
                log.warning(
                    "%s: draining %d worker(s)",
                    name,
                    count,
                    extra={"signal": name, "workers": count},
                )
                await public.aclose()
                await workers.stop()
                if options.coordinator is None:
                    await control.aclose()
                nursery.cancel_scope.cancel()
                break
