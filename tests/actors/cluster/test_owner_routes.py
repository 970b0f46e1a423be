"""The relay's routes: the owner of an agent and its connected client, looked up once per
cluster view and pool generation, and never a client the pool has let go of."""

from __future__ import annotations

from pathlib import Path

import trio

from actors.cluster._coordinator import Claim, ClusterView
from actors.cluster._router import _OwnerRoutes
from tests.actors.cluster.test_pool import pool_beside_a_server

SHARDS = 1


def _view(revision: int, endpoint: str, worker_id: str = "w1") -> ClusterView:
    claim = Claim(shard=0, worker_id=worker_id, endpoint=endpoint, epoch=revision, lease_id=1)
    return ClusterView(revision=revision, shard_count=SHARDS, claims=(claim,))


async def test_a_route_is_the_owners_connected_client_until_the_pool_lets_it_go(
    tmp_path: Path,
) -> None:
    """The route is the client the pool holds for the owner; once the pool closes it (a
    worker that exited, an idle close), the route is looked up again and never hands out
    the client that is saying bye, even before that client knows it is closed."""
    address = f"ipc://{tmp_path}/s.sock"
    async with pool_beside_a_server(address, None) as (_, _, pool):
        routes = _OwnerRoutes(pool)
        view = _view(1, address)
        assert routes.ready_owner(view, "a1") is None  # not connected yet: one is started
        with trio.fail_after(10):
            first = await pool.get(address)
        assert routes.ready_owner(view, "a1") == ("w1", first)
        pool.close(address)  # forgotten now; the client closes at its holder's next step
        assert first.ready, "the client has not seen its close yet"
        assert routes.ready_owner(view, "a1") is None
        with trio.fail_after(10):
            second = await pool.get(address)
        assert second is not first
        assert routes.ready_owner(view, "a1") == ("w1", second)


async def test_a_new_view_moves_the_route_to_the_new_owner(tmp_path: Path) -> None:
    """When the view names another owner, the next lookup follows it."""
    old, new = f"ipc://{tmp_path}/old.sock", f"ipc://{tmp_path}/new.sock"
    async with pool_beside_a_server(old, None) as (_, _, pool):
        async with pool_beside_a_server(new, None):
            routes = _OwnerRoutes(pool)
            with trio.fail_after(10):
                old_client, new_client = await pool.get(old), await pool.get(new)
            assert routes.ready_owner(_view(1, old), "a1") == ("w1", old_client)
            assert routes.ready_owner(_view(2, new, "w2"), "a1") == ("w2", new_client)
