"""Agents: the live actor for one session id, and where agents come from.

:class:`AgentDirectory` is the seam between the actor runtime and storage: the runtime asks it
to load an agent's state on activation. :class:`InMemoryAgentDirectory` is the small built-in
implementation (agents created at run time, gone when the process exits); the session store
implements the same interface over DSH session logs.
"""

from __future__ import annotations

import secrets
from typing import Any, Protocol

import attrs
import trio

from actors._mailbox import Mailbox

__all__ = ["Agent", "AgentDirectory", "AgentState", "InMemoryAgentDirectory"]


@attrs.define(kw_only=True)
class AgentState:
    """What an agent knows about its session (the in-memory directory's record)."""

    agent_id: str
    cwd: str | None = None
    title: str | None = None
    created_at: str | None = None
    #: ``{provider, model, contextWindow}`` when recorded.
    model_route: dict[str, Any] | None = None
    #: Free-form notes appended by state-changing calls (used by the demo).
    notes: list[str] = attrs.Factory(list)


class AgentDirectory(Protocol):
    """Where agents come from. Implementations must be safe to call concurrently."""

    async def load(self, agent_id: str) -> Any | None:
        """The state of agent ``agent_id``, or ``None`` if no such session exists."""
        ...


class InMemoryAgentDirectory:
    """Agents held in memory; ``create`` adds one."""

    def __init__(self) -> None:
        self._agents: dict[str, AgentState] = {}

    def create(
        self, agent_id: str | None = None, *, cwd: str | None = None, title: str | None = None
    ) -> AgentState:
        agent_id = agent_id or f"agent-{secrets.token_hex(5)}"
        if agent_id in self._agents:
            raise ValueError(f"agent {agent_id!r} already exists")
        state = AgentState(agent_id=agent_id, cwd=cwd, title=title)
        self._agents[agent_id] = state
        return state

    def ids(self) -> list[str]:
        return sorted(self._agents)

    async def load(self, agent_id: str) -> AgentState | None:
        await trio.lowlevel.checkpoint()
        return self._agents.get(agent_id)


@attrs.define(eq=False)
class Agent:
    """The live actor for one session: its state, its mailbox, its activity clock.

    Built only by the actor system (on first call); service methods receive it as their
    ``agent`` argument.
    """

    id: str
    state: Any
    mailbox: Mailbox = attrs.Factory(Mailbox)
    #: trio clock reading of the last admission or release; drives passivation.
    last_active: float = 0.0
    #: Calls admitted or queued right now.
    in_use: int = 0
