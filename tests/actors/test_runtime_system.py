"""The actor system and mailboxes: activation, admission order, isolation of failures."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors import ActorSystem, InMemoryAgentDirectory, Mailbox, Remote, RemoteService
from actors._agents import Agent, AgentState
from wire import InternalError, Server, SessionNotFoundError, open_client


class CountingDirectory(InMemoryAgentDirectory):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def load(self, agent_id: str) -> AgentState | None:
        self.loads += 1
        await trio.sleep(0.05)  # slow storage: concurrent activations overlap
        return await super().load(agent_id)


class Journal(RemoteService, key="journal"):
    def __init__(self) -> None:
        self.log: list[str] = []

    @Remote
    async def read(self, agent: Agent, tag: str) -> str:
        self.log.append(f"start {tag}")
        await trio.sleep(0.05)
        self.log.append(f"end {tag}")
        return tag

    @Remote(mutates=True)
    async def write(self, agent: Agent, tag: str) -> str:
        self.log.append(f"start {tag}")
        await trio.sleep(0.05)
        self.log.append(f"end {tag}")
        return tag

    @Remote
    async def explode(self, agent: Agent) -> None:
        raise ValueError("boom")


async def test_concurrent_activations_share_one_load() -> None:
    """Many first calls to one agent load it once."""
    directory = CountingDirectory()
    directory.create("a")
    system = ActorSystem(directory)
    agents: list[Agent] = []
    async with trio.open_nursery() as nursery:
        for _ in range(10):
            nursery.start_soon(lambda: _activate(system, agents))
    assert directory.loads == 1
    assert len({id(a) for a in agents}) == 1


async def _activate(system: ActorSystem, into: list[Agent]) -> None:
    into.append(await system.activate("a"))


async def test_unknown_agent() -> None:
    """An id the directory does not know is session-not-found, and nothing stays active."""
    system = ActorSystem(InMemoryAgentDirectory())
    with pytest.raises(SessionNotFoundError, match=r"^no session with id 'ghost'$"):
        await system.activate("ghost")
    assert system.statistics().active_agents == 0


async def test_idle_actors_are_passivated() -> None:
    """An actor with no call for idle_timeout is dropped and reactivated on the next call."""
    directory = InMemoryAgentDirectory()
    directory.create("a")
    system = ActorSystem(directory, idle_timeout=10)
    agent = await system.activate("a")
    assert system.passivate_idle(agent.last_active + 5) == 0
    assert system.passivate_idle(agent.last_active + 10) == 1
    assert not system.is_active("a")
    assert await system.activate("a") is not agent
    assert system.statistics().activations == 2


async def test_busy_actor_is_not_passivated() -> None:
    """An actor with a call in flight stays, however old its last activity."""
    directory = InMemoryAgentDirectory()
    directory.create("a")
    system = ActorSystem(directory, idle_timeout=1)
    agent = await system.activate("a")
    agent.in_use = 1
    assert system.passivate_idle(agent.last_active + 100) == 0


class TestMailbox:
    async def test_readers_share_writers_exclude_in_arrival_order(self) -> None:
        """r1 r2 run together; w waits for them; r3 (arrived after w) waits for w."""
        mailbox = Mailbox()
        log: list[str] = []

        async def visit(tag: str, mutates: bool) -> None:
            async with mailbox.admit(mutates=mutates):
                log.append(f"+{tag}")
                await trio.sleep(0.01)
                log.append(f"-{tag}")

        async with trio.open_nursery() as nursery:
            for tag, mutates in [("r1", False), ("r2", False), ("w", True), ("r3", False)]:
                nursery.start_soon(visit, tag, mutates)
                await trio.testing.wait_all_tasks_blocked()
        assert log.index("+w") > max(log.index("-r1"), log.index("-r2"))
        assert log.index("+r3") > log.index("-w")
        assert log.index("+r2") < log.index("-r1")

    async def test_cancelled_waiter_leaves_no_trace(self) -> None:
        """A call cancelled while queued frees its place; the queue drains to zero."""
        mailbox = Mailbox()
        async with trio.open_nursery() as nursery:

            async def hold() -> None:
                async with mailbox.admit(mutates=True):
                    await trio.sleep(0.05)

            nursery.start_soon(hold)
            await trio.testing.wait_all_tasks_blocked()
            with trio.move_on_after(0.01):
                async with mailbox.admit(mutates=True):
                    pytest.fail("admitted while the writer held the mailbox")
            assert mailbox.statistics().queued == 0
        stats = mailbox.statistics()
        assert (stats.queued, stats.readers, stats.writer) == (0, 0, False)
        assert mailbox.idle


async def test_writes_are_exclusive_over_the_wire(nursery: trio.Nursery) -> None:
    """Through the server: a write never overlaps another call on the same agent, and a
    handler's exception fails only its call."""
    directory = InMemoryAgentDirectory()
    directory.create("a")
    journal = Journal()
    system = ActorSystem(directory, [journal])
    server = Server(system.registry)
    [address] = await nursery.start(server.run, "tcp://127.0.0.1:0")
    with trio.fail_after(10):
        async with open_client(address) as client:
            proxy = client.agent("a").journal
            async with trio.open_nursery() as calls:
                calls.start_soon(proxy.read, "r1")
                await trio.sleep(0.01)
                calls.start_soon(proxy.write, "w1")
                await trio.sleep(0.01)
                calls.start_soon(proxy.read, "r2")
            log = journal.log
            assert log.index("start w1") > log.index("end r1")
            assert log.index("start r2") > log.index("end w1")
            with pytest.raises(InternalError, match=r"^boom$"):
                await proxy.explode()
            assert await proxy.read("after") == "after"
    await server.aclose()


async def test_pipelined_writes_apply_in_arrival_order(nursery: trio.Nursery) -> None:
    """200 state-changing calls sent back to back to one agent are applied in the order they
    were sent, although trio starts their handler tasks in no particular order."""
    directory = InMemoryAgentDirectory()
    directory.create("a")
    system = ActorSystem(directory, [Journal()])
    server = Server(system.registry)
    [address] = await nursery.start(server.run, "tcp://127.0.0.1:0")

    class Order(RemoteService, key="order"):
        def __init__(self) -> None:
            self.applied: list[int] = []

        @Remote(mutates=True)
        async def put(self, agent: Agent, n: int) -> None:
            await trio.lowlevel.checkpoint()
            self.applied.append(n)

    order = Order()
    system.add_service(order)
    with trio.fail_after(20):
        async with open_client(address) as client:
            sent: list[int] = []

            async def put(n: int) -> None:
                sent.append(n)  # the call's frame is queued in this same step
                await client.call("order/put", {"agentId": "a", "n": n})

            async with trio.open_nursery() as calls:
                for n in range(200):
                    calls.start_soon(put, n)
                    while len(sent) <= n:  # sent in this order
                        await trio.lowlevel.checkpoint()
    assert order.applied == list(range(200))
    await server.aclose()
