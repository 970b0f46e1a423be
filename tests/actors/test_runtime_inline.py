"""Plain ``def`` @Remote handlers: run inline when their turn is free, in a task otherwise."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from actors import ActorSystem, InMemoryAgentDirectory, Remote, RemoteService
from actors._agents import Agent
from wire import ArgumentsInvalidError, InternalError, Server, open_client


class Counter(RemoteService, key="counter"):
    """Synchronous handlers, plus an async writer that holds the agent's mailbox."""

    def __init__(self) -> None:
        self.applied: list[int] = []
        #: Whether each ``add`` ran without a trio task of its own (inline).
        self.inline: list[bool] = []
        self.hold = trio.Event()
        self.holding = trio.Event()

    @Remote(mutates=True)
    def add(self, agent: Agent, n: int) -> int:
        self.inline.append(trio.lowlevel.current_task().name != "wire.server.call")
        self.applied.append(n)
        return len(self.applied)

    @Remote
    def total(self, agent: Agent) -> int:
        return sum(self.applied)

    @Remote
    def fail(self, agent: Agent) -> int:
        raise ValueError("sync boom")

    @Remote("plainEcho")
    def plain_echo(self, value: Any = None) -> Any:
        return value

    @Remote(mutates=True)
    async def block(self, agent: Agent) -> str:
        self.holding.set()
        await self.hold.wait()
        return "released"


async def _serve(nursery: trio.Nursery) -> tuple[Counter, Server, str]:
    directory = InMemoryAgentDirectory()
    directory.create("a")
    counter = Counter()
    server = Server(ActorSystem(directory, [counter]).registry)
    [address] = await nursery.start(server.run, "tcp://127.0.0.1:0")
    return counter, server, address


async def test_sync_handlers_run_inline_once_the_actor_is_active(nursery: trio.Nursery) -> None:
    """The first call (cold actor) runs in a task; later ones run inline, validated, in order,
    and an exception fails only its call."""
    with trio.fail_after(10):
        counter, server, address = await _serve(nursery)
        async with open_client(address) as client:
            assert await client.call("counter/add", {"agentId": "a", "n": 0}) == 1
            sent = [0]

            async def add(n: int) -> None:
                sent.append(n)  # its frame is queued in this same step
                await client.call("counter/add", {"agentId": "a", "n": n})

            async with trio.open_nursery() as calls:
                for n in range(1, 50):
                    calls.start_soon(add, n)
            assert counter.applied == sent and sorted(sent) == list(range(50))
            assert counter.inline[0] is False and all(counter.inline[1:])
            assert await client.call("counter/total", {"agentId": "a"}) == sum(range(50))
            assert await client.call("counter/plainEcho", {"value": [1, "x"]}) == [1, "x"]
            with pytest.raises(ArgumentsInvalidError, match=r"^counter/add: n: expected"):
                await client.call("counter/add", {"agentId": "a", "n": "x"})
            with pytest.raises(InternalError, match=r"^sync boom$"):
                await client.call("counter/fail", {"agentId": "a"})
            assert server.statistics().handler_tasks == 0
        await server.aclose()


async def test_sync_handler_waits_in_a_task_behind_a_busy_mailbox(nursery: trio.Nursery) -> None:
    """While a writer holds the agent, a sync call is queued in arrival order (a task), and it
    can be cancelled there like any queued call."""
    with trio.fail_after(10):
        counter, server, address = await _serve(nursery)
        async with open_client(address) as client:
            await client.call("counter/add", {"agentId": "a", "n": 0})
            async with trio.open_nursery() as calls:
                calls.start_soon(client.call, "counter/block", {"agentId": "a"})
                await counter.holding.wait()
                calls.start_soon(client.call, "counter/add", {"agentId": "a", "n": 1})
                with trio.move_on_after(0.2):
                    await client.call("counter/add", {"agentId": "a", "n": 2})
                assert counter.applied == [0]  # both queued behind the writer
                # The cancel travels through the wire: release the writer only once the server
                # has ended the cancelled call, or it could admit that call first.
                while server.statistics().cancelled_total < 1:
                    await trio.sleep(0.005)
                counter.hold.set()
            assert counter.applied == [0, 1]  # the cancelled one never ran
            assert counter.inline == [False, False]
            with trio.fail_after(5):
                while server.statistics().handler_tasks:
                    await trio.sleep(0.01)
        await server.aclose()
