"""The coordinator contract, run against `RemoteCoordinator` over a real wire server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from actors.cluster import InProcessCoordinator, RemoteCoordinator, coordinator_endpoints
from tests.actors.cluster.coordinator_contract import SHARDS, CoordinatorContract
from wire import Registry, Server, open_client


class TestRemoteCoordinator(CoordinatorContract):
    @pytest.fixture
    async def coordinator(self, nursery: trio.Nursery) -> AsyncIterator[RemoteCoordinator]:
        local = InProcessCoordinator(SHARDS)
        server = Server(Registry(coordinator_endpoints(local)))
        addresses = await nursery.start(server.run, "tcp://127.0.0.1:0")
        async with open_client(addresses[0]) as client:
            yield RemoteCoordinator(client, SHARDS)
        await server.aclose()
