"""Zero-hop routing for Python clients: call the owning worker directly.

`open_cluster_client` asks the supervisor's ``system/describe`` for the shard map, connects to
the workers' endpoints, and sends each call straight to the owner of its agent. A ``moved``
answer (the map changed) refreshes the map and retries; calls that name no agent go to the
supervisor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from actors.cluster._coordinator import Claim, ClusterView, Member
from actors.cluster._pool import ClientPool
from actors.cluster._router import call_owner, routing_key
from wire import Client, open_client

__all__ = ["ClusterClient", "open_cluster_client", "view_from_map"]


def view_from_map(cluster: dict[str, Any]) -> ClusterView:
    """A `ClusterView` from the ``cluster`` entry of ``system/describe``."""
    workers: dict[str, str] = cluster.get("workers", {})
    epochs = cluster.get("epochs") or [0] * len(cluster.get("owners", []))
    claims = tuple(
        Claim(shard=s, worker_id=w, endpoint=workers[w], epoch=epochs[s] or 0, lease_id=0)
        for s, w in enumerate(cluster.get("owners", []))
        if w is not None and w in workers
    )
    return ClusterView(
        revision=int(cluster.get("revision", 0)),
        shard_count=int(cluster.get("shardCount", 0)),
        members=tuple(Member(worker_id=w, endpoint=e) for w, e in sorted(workers.items())),
        claims=claims,
    )


class ClusterClient:
    """Routes calls by the shard map (see the module docstring)."""

    def __init__(self, supervisor: Client, pool: ClientPool) -> None:
        self.supervisor = supervisor
        self._pool = pool
        self.view: ClusterView | None = None
        self._refreshing: trio.Event | None = None

    async def refresh(self) -> ClusterView:
        """Fetch the shard map again (one request at a time)."""
        if self._refreshing is not None:
            await self._refreshing.wait()
            assert self.view is not None
            return self.view
        self._refreshing = trio.Event()
        try:
            described = await self.supervisor.call("system/describe")
            self.view = view_from_map(described["cluster"])
            return self.view
        finally:
            self._refreshing.set()
            self._refreshing = None

    async def _wait_change(self, seconds: float) -> None:
        with trio.move_on_after(seconds):
            await self.refresh()
        await trio.sleep(min(seconds, 0.02))

    async def call(self, endpoint: str, args: dict[str, Any] | None = None) -> Any:
        """Call ``endpoint`` on the owner of its agent (or on the supervisor)."""
        return (await self.call_traced(endpoint, args))[0]

    async def call_traced(
        self, endpoint: str, args: dict[str, Any] | None = None
    ) -> tuple[Any, Claim | None]:
        """Like `call`, also returning who answered: the claim of the owning worker as this
        client's shard map names it (worker id, endpoint, epoch), or None for the supervisor.

        The epoch is the map's: a worker that lost the shard and claimed it again since the
        map was fetched answers under a newer epoch than the one returned.
        """
        args = dict(args or {})
        agent_id = routing_key(args)
        if agent_id is None:
            return await self.supervisor.call(endpoint, args), None
        answered: list[Claim] = []
        value = await call_owner(
            self._pool,
            lambda: self.view,
            self._wait_change,
            endpoint,
            args,
            agent_id,
            answered=answered.append,
        )
        return value, answered[-1]


@asynccontextmanager
async def open_cluster_client(
    endpoint: str, *, name: str = "agent-actors"
) -> AsyncIterator[ClusterClient]:
    """Connect to a supervisor at ``endpoint`` and route by its shard map."""
    async with open_client(endpoint, name=name) as supervisor, trio.open_nursery() as nursery:
        pool = ClientPool(nursery, name=name)
        client = ClusterClient(supervisor, pool)
        await client.refresh()
        try:
            yield client
        finally:
            pool.close_all()
