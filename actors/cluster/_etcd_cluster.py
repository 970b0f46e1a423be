"""``serve --workers N --coordinator etcd://…``: the supervisor's and workers' side of etcd.

Without ``--coordinator`` the supervisor holds an `InProcessCoordinator` and serves it to its
workers over a private control endpoint. With ``--coordinator etcd://h:p[,h:p…][/cluster]``
the workers join etcd themselves (`open_worker_coordinator`), and the supervisor only mirrors
the cluster view from etcd (`EtcdMirror`: a watch keeping the latest view, for routing, for
its start-up check, and to revoke a dead worker's lease at once instead of after its TTL).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from actors.cluster._coordinator import ClusterView, Coordinator, CoordinatorError, Lease
from actors.cluster._coordinator_etcd import EtcdCoordinator, open_etcd_coordinator
from actors.cluster._coordinator_local import InProcessCoordinator
from actors.cluster._coordinator_wire import RemoteCoordinator
from actors.cluster._etcd_url import split_etcd_url
from actors.cluster._storage import Placement
from wire import open_client

__all__ = [
    "EtcdMirror",
    "is_etcd_url",
    "open_etcd_mirror",
    "open_supervisor_view",
    "open_worker_coordinator",
]

log = logging.getLogger("actors.cluster")


def is_etcd_url(url: str) -> bool:
    """Whether a coordinator address names etcd (rather than a supervisor's wire endpoint)."""
    return url.startswith("etcd://")


@contextlib.asynccontextmanager
async def open_worker_coordinator(
    control: str, *, worker_id: str, shard_count: int, placement: Placement
) -> AsyncIterator[Coordinator]:
    """The worker's `Coordinator`: etcd for an ``etcd://`` URL (joined as ``placement``'s host
    and storage), else the supervisor's.

    Raises:
        CoordinatorError: etcd is unreachable or holds another shard count.
    """
    if is_etcd_url(control):
        urls, cluster = split_etcd_url(control)
        async with open_etcd_coordinator(
            urls,
            cluster=cluster,
            shard_count=shard_count,
            host=placement.host_id,
            storage_id=placement.storage_id,
            storage_mode=placement.storage_mode,
        ) as coordinator:
            yield coordinator
    else:
        async with open_client(control, name=f"agent-actors worker {worker_id}") as client:
            yield RemoteCoordinator(client, shard_count)


class EtcdMirror:
    """The latest cluster view from etcd, with the read side of `InProcessCoordinator`.

    Offers what the supervisor uses: `current`, `revision`, `changed`, `lease_of`, `revoke`.
    """

    def __init__(self, coordinator: EtcdCoordinator, nursery: trio.Nursery) -> None:
        self._coordinator = coordinator
        self._nursery = nursery
        self._view = ClusterView(revision=0, shard_count=coordinator.shard_count)
        self._changed = trio.Event()

    @property
    def revision(self) -> int:
        return self._view.revision

    def current(self) -> ClusterView:
        """The latest view seen on the watch."""
        return self._view

    async def changed(self, after: int) -> ClusterView:
        """Wait until the mirrored revision passes ``after``; return the view then."""
        while self._view.revision <= after:
            await self._changed.wait()
        await trio.lowlevel.checkpoint()
        return self._view

    def lease_of(self, worker_id: str) -> Lease | None:
        """The lease ``worker_id`` holds in the latest view, if it is a member."""
        lease_id = self._coordinator.member_leases.get(worker_id)
        if lease_id is None:
            return None
        return Lease(lease_id=lease_id, worker_id=worker_id, ttl=0.0)

    def revoke(self, lease_id: int) -> bool:
        """Revoke ``lease_id`` in the background (the caller is a synchronous cleanup)."""
        self._nursery.start_soon(self._revoke, lease_id)
        return True

    async def _revoke(self, lease_id: int) -> None:
        with trio.move_on_after(5), contextlib.suppress(CoordinatorError):
            await self._coordinator.revoke(lease_id)

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Follow etcd's watch until cancelled; started once the first view is in."""
        started = False
        async with contextlib.aclosing(self._coordinator.watch(0)) as views:
            async for view in views:
                self._view = view
                self._changed.set()
                self._changed = trio.Event()
                if not started:
                    started = True
                    task_status.started()


@contextlib.asynccontextmanager
async def open_etcd_mirror(
    url: str, *, shard_count: int, data_dir: Path
) -> AsyncIterator[EtcdMirror]:
    """An `EtcdMirror` of the cluster ``url`` names, following etcd until the block exits."""
    urls, cluster = split_etcd_url(url)
    async with (
        open_etcd_coordinator(
            urls,
            cluster=cluster,
            shard_count=shard_count,
            storage_id=Placement.build(data_dir=data_dir).storage_id,
        ) as coordinator,
        trio.open_nursery() as nursery,
    ):
        mirror = EtcdMirror(coordinator, nursery)
        await nursery.start(mirror.run)
        yield mirror
        nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def open_supervisor_view(
    url: str | None, local: InProcessCoordinator, *, shard_count: int, data_dir: Path
) -> AsyncIterator[InProcessCoordinator | EtcdMirror]:
    """What the supervisor routes by: ``local`` without etcd, else a mirror of etcd's view."""
    if url is None:
        yield local
        return
    async with open_etcd_mirror(url, shard_count=shard_count, data_dir=data_dir) as mirror:
        yield mirror
