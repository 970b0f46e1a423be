"""The worker clients' pool: one client per endpoint, closed once it has been idle for a while,
so that an idle cluster does not keep pinging between its processes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.cluster._pool import ClientPool
from wire import Endpoint, EndpointSpec, Registry, Server

#: The idle period of these tests' pools (seconds).
IDLE = 0.3


@pytest.fixture
def ipc(tmp_path: Path) -> str:
    return f"ipc://{tmp_path}/s.sock"


class Sleeper:
    """``t/echo`` answers at once; ``t/held`` answers once ``release`` is set."""

    def __init__(self) -> None:
        self.release = trio.Event()

    async def echo(self, ctx: Any, args: dict[str, Any]) -> str:
        return "echo"

    async def held(self, ctx: Any, args: dict[str, Any]) -> str:
        await self.release.wait()
        return "held"


@asynccontextmanager
async def pool_beside_a_server(
    address: str, idle_close: float | None
) -> AsyncIterator[tuple[Server, Sleeper, ClientPool]]:
    """A server on ``address`` and a pool with ``idle_close``; both closed on leaving."""
    sleeper = Sleeper()
    registry = Registry(
        [
            Endpoint(spec=EndpointSpec(name="t/echo"), handler=sleeper.echo),
            Endpoint(spec=EndpointSpec(name="t/held"), handler=sleeper.held),
        ]
    )
    server = Server(registry)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run, address)
        pool = ClientPool(nursery, idle_close=idle_close)
        yield server, sleeper, pool
        pool.close_all()
        nursery.cancel_scope.cancel()


async def peers_within(server: Server, count: int, seconds: float) -> bool:
    """Whether the server knows ``count`` peers at some point within ``seconds``."""
    with trio.move_on_after(seconds):
        while server.statistics().peers != count:
            await trio.sleep(0.01)
        return True
    return False


async def test_an_idle_client_is_closed_and_the_next_call_connects_again(ipc: str) -> None:
    async with pool_beside_a_server(ipc, IDLE) as (server, _, pool):
        first = await pool.get(ipc)
        assert await first.call("t/echo") == "echo"
        assert pool.endpoints() == [ipc] and server.statistics().peers == 1
        # Idle for one to two periods, with a wide margin: then closed, with a bye.
        assert await peers_within(server, 0, 2 * IDLE + 5.0)
        assert pool.endpoints() == [] and pool.ready(ipc) is None
        assert first.statistics().state == "closed"
        second = await pool.get(ipc)
        assert second is not first and await second.call("t/echo") == "echo"
        assert server.statistics().peers == 1


async def test_a_client_with_a_call_in_flight_or_in_use_is_kept(ipc: str) -> None:
    # A longer period than the other tests': a pause of the test's own calls as long as the
    # period (a busy host) would make the client idle.
    period = 1.0
    async with pool_beside_a_server(ipc, period) as (server, sleeper, pool):
        client = await pool.get(ipc)
        held: list[str] = []

        async def hold() -> None:
            held.append(await client.call("t/held"))

        async with trio.open_nursery() as holding:
            holding.start_soon(hold)
            await trio.sleep(3 * period)  # one call in flight all along: not idle
            assert pool.ready(ipc) is client
            sleeper.release.set()
            for _ in range(20):  # a call every tenth of the period: in use
                await trio.sleep(period / 10)
                assert await client.call("t/echo") == "echo"
        assert held == ["held"] and pool.ready(ipc) is client
        assert server.statistics().peers == 1


async def test_a_pool_without_an_idle_period_keeps_its_clients(ipc: str) -> None:
    async with pool_beside_a_server(ipc, None) as (server, _, pool):
        client = await pool.get(ipc)
        await trio.sleep(4 * IDLE)
        assert pool.ready(ipc) is client and server.statistics().peers == 1
