"""The actor system: one actor per agent id, activated on demand, passivated when idle.

It turns ``@Remote`` services into wire endpoints. For an endpoint with an ``agent`` parameter
the handler resolves ``agentId`` to the live :class:`~actors._agents.Agent` (activating it on
first use; concurrent activations of one id share one load), waits for the agent's mailbox
(read-only calls together, state-changing calls alone, in arrival order), reports the call as
running, and calls the service method with the agent in place of the id.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import trio

from actors._agents import Agent, AgentDirectory
from actors._mailbox import Mailbox
from actors._remote import RemoteService
from wire import CallContext, Endpoint, EndpointSpec, Registry, SessionNotFoundError

__all__ = ["ActorSystem", "ActorSystemStatistics"]


@attrs.frozen(kw_only=True)
class ActorSystemStatistics:
    #: Agents with a live actor.
    active_agents: int
    #: Activations since start (a passivated agent that comes back counts again).
    activations: int
    #: Actors passivated since start.
    passivations: int


class ActorSystem:
    """Hosts agent actors and the services that act on them.

    Args:
        directory: Where agents come from.
        services: Service instances whose ``@Remote`` methods are served.
        idle_timeout: Seconds without calls after which an actor is passivated.
    """

    def __init__(
        self,
        directory: AgentDirectory,
        services: Iterable[RemoteService] = (),
        *,
        idle_timeout: float = 300.0,
    ) -> None:
        self.directory = directory
        self.idle_timeout = idle_timeout
        self.registry = Registry()
        self._mailboxes: dict[str, Mailbox] = {}
        self._agents: dict[str, Agent] = {}
        self._activating: dict[str, trio.Event] = {}
        self._activations = 0
        self._passivations = 0
        for service in services:
            self.add_service(service)

    def add_service(self, service: RemoteService) -> None:
        cls = type(service)
        for spec in cls.__remote_endpoints__:
            method = getattr(service, cls.__remote_implementations__[spec.name])
            self.registry.add(self._endpoint(spec, method))

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Passivate idle actors until cancelled."""
        task_status.started()
        period = max(0.05, min(self.idle_timeout / 4, 30.0))
        while True:
            await trio.sleep(period)
            self.passivate_idle(trio.current_time())

    def passivate_idle(self, now: float) -> int:
        """Drop actors with no call for ``idle_timeout`` seconds; return how many."""
        idle = [
            agent
            for agent in self._agents.values()
            if agent.in_use == 0
            and agent.mailbox.idle
            and now - agent.last_active >= self.idle_timeout
        ]
        for agent in idle:
            del self._agents[agent.id]
            self._forget_mailbox(agent.id)
        self._passivations += len(idle)
        return len(idle)

    async def activate(self, agent_id: str) -> Agent:
        """The live actor for ``agent_id``, loading it if needed.

        Raises:
            SessionNotFoundError: the directory knows no such agent.
        """
        while True:
            agent = self._agents.get(agent_id)
            if agent is not None:
                return agent
            pending = self._activating.get(agent_id)
            if pending is None:
                break
            await pending.wait()  # another call is loading it; then look again
        done = self._activating[agent_id] = trio.Event()
        try:
            state = await self.directory.load(agent_id)
            if state is None:
                raise SessionNotFoundError(
                    f"no session with id {agent_id!r}", details={"agentId": agent_id}
                )
            agent = Agent(
                id=agent_id,
                state=state,
                mailbox=self._mailbox(agent_id),
                last_active=trio.current_time(),
            )
            self._agents[agent_id] = agent
            self._activations += 1
            return agent
        finally:
            del self._activating[agent_id]
            done.set()

    def statistics(self) -> ActorSystemStatistics:
        return ActorSystemStatistics(
            active_agents=len(self._agents),
            activations=self._activations,
            passivations=self._passivations,
        )

    def is_active(self, agent_id: str) -> bool:
        return agent_id in self._agents

    def _endpoint(self, spec: EndpointSpec, method: Any) -> Endpoint:
        lookup = next((p.name for p in spec.params if p.lookup == "agent"), None)
        if lookup is None:

            async def call_service(context: CallContext, args: dict[str, Any]) -> Any:
                return await method(**args)

            return Endpoint(spec=spec, handler=call_service)

        mutates = spec.mutates
        agents = self._agents

        def reserve(args: dict[str, Any]) -> Any:
            return self._mailbox(args[lookup]).reserve(mutates=mutates)

        async def call_agent(context: CallContext, args: dict[str, Any]) -> Any:
            agent_id = args[lookup]
            mailbox = self._mailbox(agent_id)
            # Reserved on arrival by the server (arrival order); a local call reserves now.
            turn = context.reservation or mailbox.reserve(mutates=mutates)
            # A live actor is found without a coroutine of its own; activation only when cold.
            agent = agents.get(agent_id)
            if agent is None:
                try:
                    agent = await self.activate(agent_id)
                except BaseException:
                    mailbox.give_up(turn)
                    self._forget_mailbox(agent_id)
                    raise
            agent.in_use += 1
            try:
                await mailbox.wait(turn)
                try:
                    context.running()
                    args[lookup] = agent
                    return await method(**args)
                finally:
                    mailbox.leave(mutates=mutates)
            finally:
                agent.in_use -= 1
                agent.last_active = trio.current_time()

        return Endpoint(spec=spec, handler=call_agent, admits_itself=True, on_arrival=reserve)

    def _mailbox(self, agent_id: str) -> Mailbox:
        """The mailbox of ``agent_id``; it exists before (and between) activations, because a
        call reserves its turn when it arrives, before the agent is loaded."""
        mailbox = self._mailboxes.get(agent_id)
        if mailbox is None:
            mailbox = self._mailboxes[agent_id] = Mailbox()
        return mailbox

    def _forget_mailbox(self, agent_id: str) -> None:
        mailbox = self._mailboxes.get(agent_id)
        if mailbox is not None and mailbox.idle and agent_id not in self._agents:
            del self._mailboxes[agent_id]
