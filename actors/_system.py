"""The actor system: one actor per agent id, activated on demand, passivated when idle.

It turns ``@Remote`` services into wire endpoints. For an endpoint with an ``agent`` parameter
the handler resolves ``agentId`` to the live :class:`~actors._agents.Agent` (activating it on
first use; concurrent activations of one id share one load), waits for the agent's mailbox
(read-only calls together, state-changing calls alone, in arrival order), reports the call as
running, and calls the service method with the agent in place of the id.

Passivation closes what it drops: a state with an ``aclose()`` (the session store's does: it
flushes the log and releases its lock) is closed in the system's nursery, and until that close
has finished the id counts as *passivating*, so a call that arrives meanwhile waits for the
close and then activates a fresh state rather than racing the old one.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import attrs
import trio

from actors._agents import Agent, AgentDirectory
from actors._mailbox import Mailbox
from actors._remote import RemoteService
from wire import DEFERRED, CallContext, Endpoint, EndpointSpec, Registry, SessionNotFoundError

__all__ = ["ActorSystem", "ActorSystemStatistics"]

log = logging.getLogger("actors.system")


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
        #: Ids whose passivated state is being closed; set when the close has finished.
        self._passivating: dict[str, trio.Event] = {}
        #: Where passivated states are closed (set while :meth:`run` runs).
        self._nursery: trio.Nursery | None = None
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
        """Passivate idle actors until cancelled; their states are closed in here."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                task_status.started()
                period = max(0.05, min(self.idle_timeout / 4, 30.0))
                while True:
                    await trio.sleep(period)
                    self.passivate_idle(trio.current_time())
            finally:
                self._nursery = None

    def passivate_idle(self, now: float) -> int:
        """Drop actors with no call for ``idle_timeout`` seconds; return how many.

        A dropped state with an ``aclose()`` is closed in the nursery of :meth:`run`; its id is
        marked passivating now, in this synchronous step, so an activation that comes before
        the close ends waits for it. While :meth:`run` is not running such states are kept
        (never dropped unclosed).
        """
        idle = [
            agent
            for agent in self._agents.values()
            if agent.in_use == 0
            and agent.mailbox.idle
            and now - agent.last_active >= self.idle_timeout
        ]
        passivated = 0
        for agent in idle:
            close = getattr(agent.state, "aclose", None)
            if close is not None:
                if self._nursery is None:
                    continue
                done = self._passivating[agent.id] = trio.Event()
                self._nursery.start_soon(self._close_state, agent.id, close, done)
            del self._agents[agent.id]
            self._forget_mailbox(agent.id)
            passivated += 1
        self._passivations += passivated
        return passivated

    async def passivate_matching(self, predicate: Callable[[str], bool]) -> int:
        """Passivate now every idle actor whose id matches ``predicate`` and wait until their
        states are closed; return how many (a scale-out worker handing a shard on,
        ``actors.cluster``). Busy actors are left alone: the caller drains their calls first.
        """
        idle = [
            agent
            for agent in self._agents.values()
            if agent.in_use == 0 and agent.mailbox.idle and predicate(agent.id)
        ]
        closing: list[tuple[str, Callable[[], Awaitable[Any]], trio.Event]] = []
        for agent in idle:
            close = getattr(agent.state, "aclose", None)
            if close is not None:
                closing.append((agent.id, close, trio.Event()))
                self._passivating[agent.id] = closing[-1][2]
            del self._agents[agent.id]
            self._forget_mailbox(agent.id)
        self._passivations += len(idle)
        for agent_id, close, done in closing:
            await self._close_state(agent_id, close, done)
        return len(idle)

    async def _close_state(
        self, agent_id: str, close: Callable[[], Awaitable[Any]], done: trio.Event
    ) -> None:
        try:
            # Shielded: a state half closed at shutdown would keep its lock and lose writes.
            with trio.CancelScope(shield=True):
                await close()
        except Exception:
            log.exception(
                "closing the passivated state of agent %s failed",
                agent_id,
                extra={"agent_id": agent_id},
            )
        finally:
            if self._passivating.get(agent_id) is done:
                del self._passivating[agent_id]
            done.set()

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
                pending = self._passivating.get(agent_id)
            if pending is None:
                break
            # Another call is loading it, or its passivated state is still closing: wait,
            # then look again.
            await pending.wait()
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

    def is_passivating(self, agent_id: str) -> bool:
        """Whether the passivated state of ``agent_id`` is still being closed."""
        return agent_id in self._passivating

    def _endpoint(self, spec: EndpointSpec, method: Any) -> Endpoint:
        lookup = next((p.name for p in spec.params if p.lookup == "agent"), None)
        is_async = inspect.iscoroutinefunction(method)
        if lookup is None:
            if not is_async:

                async def call_sync_service(context: CallContext, args: dict[str, Any]) -> Any:
                    return method(**args)

                def run_service_inline(context: CallContext, args: dict[str, Any]) -> Any:
                    return method(**args)

                return Endpoint(spec=spec, handler=call_sync_service, run_inline=run_service_inline)

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
                    if is_async:
                        return await method(**args)
                    return method(**args)
                finally:
                    mailbox.leave(mutates=mutates)
            finally:
                agent.in_use -= 1
                agent.last_active = trio.current_time()

        if is_async:
            return Endpoint(spec=spec, handler=call_agent, admits_itself=True, on_arrival=reserve)

        def run_inline(context: CallContext, args: dict[str, Any]) -> Any:
            # Only a live actor whose turn is free now: anything that would wait takes the
            # task path, which keeps arrival order through the mailbox's queue.
            agent = agents.get(args[lookup])
            if agent is None or not agent.mailbox.try_enter(mutates=mutates):
                return DEFERRED
            try:
                context.running()
                args[lookup] = agent
                return method(**args)
            finally:
                agent.mailbox.leave(mutates=mutates)
                agent.last_active = trio.current_time()

        return Endpoint(
            spec=spec,
            handler=call_agent,
            admits_itself=True,
            on_arrival=reserve,
            run_inline=run_inline,
        )

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
