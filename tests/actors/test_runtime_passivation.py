"""Passivation closes the states it drops, and the backlog bound comes from the config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors import ActorSystem, Remote, RemoteService
from actors._agents import Agent
from actors._config import load_config


class ClosingState:
    """A state whose close takes as long as the test says, recording what happens."""

    def __init__(self, serial: int, log: list[str], release: trio.Event) -> None:
        self.serial = serial
        self._log = log
        self._release = release
        self.closed = False

    async def aclose(self) -> None:
        self._log.append(f"close {self.serial} start")
        await self._release.wait()
        self.closed = True
        self._log.append(f"close {self.serial} end")


class ClosingDirectory:
    """Hands out a new :class:`ClosingState` per load of agent ``a``."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.release = trio.Event()
        self.states: list[ClosingState] = []

    async def load(self, agent_id: str) -> ClosingState | None:
        await trio.lowlevel.checkpoint()
        if agent_id != "a":
            return None
        state = ClosingState(len(self.states) + 1, self.log, self.release)
        self.states.append(state)
        self.log.append(f"load {state.serial}")
        return state


class Peek(RemoteService, key="peek"):
    @Remote
    async def serial(self, agent: Agent) -> int:
        state: ClosingState = agent.state
        assert not state.closed, "a call reached a closed state"
        return state.serial


class _Context:
    peer = b""
    call_id = 0
    reservation = None

    def running(self) -> None:
        """Local calls have no wire state."""


async def _call_serial(system: ActorSystem, into: list[int]) -> None:
    endpoint = system.registry.get("peek/serial")
    assert endpoint is not None
    into.append(await endpoint.handler(_Context(), endpoint.bind({"agentId": "a"})))


async def test_passivation_closes_the_state_before_reactivation(nursery: trio.Nursery) -> None:
    """A passivated state's aclose runs in the system's nursery; a call arriving during the
    close waits for it, then gets a fresh state."""
    with trio.fail_after(10):
        directory = ClosingDirectory()
        system = ActorSystem(directory, [Peek()], idle_timeout=1000)
        await nursery.start(system.run)
        results: list[int] = []
        await _call_serial(system, results)
        agent = await system.activate("a")
        assert system.passivate_idle(agent.last_active + 1000) == 1
        # Marked synchronously, before the close task has even started.
        assert system.is_passivating("a") and not system.is_active("a")
        async with trio.open_nursery() as calls:
            calls.start_soon(_call_serial, system, results)
            await trio.testing.wait_all_tasks_blocked()
            assert directory.log == ["load 1", "close 1 start"]
            assert results == [1]  # the new call is waiting for the close
            directory.release.set()
        assert results == [1, 2]
        assert directory.log == ["load 1", "close 1 start", "close 1 end", "load 2"]
        assert directory.states[0].closed and not directory.states[1].closed
        assert not system.is_passivating("a")
        assert system.statistics().passivations == 1


async def test_states_with_aclose_stay_active_while_the_system_is_not_running() -> None:
    """Without a running system nothing could close the state, so it is not dropped."""
    with trio.fail_after(10):
        directory = ClosingDirectory()
        system = ActorSystem(directory, idle_timeout=1)
        agent = await system.activate("a")
        assert system.passivate_idle(agent.last_active + 100) == 0
        assert system.is_active("a") and directory.log == ["load 1"]


async def test_a_failing_close_is_logged_and_the_agent_comes_back(
    nursery: trio.Nursery, caplog: Any
) -> None:
    """An aclose that raises is logged; the system keeps running and reactivates the id."""

    class Broken(ClosingState):
        async def aclose(self) -> None:
            raise OSError("disk gone")

    class BrokenDirectory(ClosingDirectory):
        async def load(self, agent_id: str) -> ClosingState | None:
            await trio.lowlevel.checkpoint()
            state = Broken(len(self.states) + 1, self.log, self.release)
            self.states.append(state)
            return state

    with trio.fail_after(10):
        system = ActorSystem(BrokenDirectory(), idle_timeout=1)
        await nursery.start(system.run)
        agent = await system.activate("a")
        assert system.passivate_idle(agent.last_active + 100) == 1
        again = await system.activate("a")
        assert again is not agent and again.state.serial == 2
        assert "closing the passivated state of agent a failed" in caplog.text


async def test_max_backlog_comes_from_the_wire_table(tmp_path: Path) -> None:
    """[wire] maxBacklog sets the pump's per-peer backlog bound (default 100k)."""
    from wire import Registry, Server, ServerLimits

    assert ServerLimits().max_backlog == 100_000
    path = tmp_path / "server.toml"
    path.write_text("[wire]\nmaxBacklog = 250\n")
    config = load_config(path)
    assert config.wire.max_backlog == 250
    server = Server(Registry(), limits=config.wire)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run, "inproc://backlog-config")
            assert server._pump is not None and server._pump.held._max_frames == 250
            await server.aclose()
