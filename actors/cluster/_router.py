"""Routing a call to the worker that owns its agent.

`call_owner` is the one routing loop: find the owner in the current view, call it through the
client pool, and on ``moved`` (the worker has not adopted its claim yet, or is handing the
shard over) wait for the next view and try again. Only answers that prove the call did not run
are retried (``moved``, a worker that could not be reached, one whose client is lost or
closed, so that nothing would be sent, or one that shut down with the call still queued); a
call that was sent and then lost (``peer-lost``, ``unavailable``, or cancelled by the owner's
shutdown while running, answered as ``unavailable``) fails to the caller, because it may have
taken effect.

`forwarding_registry` is the supervisor's public face: every endpoint a worker serves, each
forwarding its raw wire arguments to the owner (one extra hop). Deadlines and cancellation
cross the hop through the client: the forwarded call carries the caller's remaining budget,
and a cancelled call cancels its forwarded call.

A call whose owner is known and connected, or that names no agent while the worker whose turn
it is is connected, is relayed without a task (`wire.Detach`): it is sent from the receive path
and answered from the owner's reply, whose result value is passed on still encoded (never
decoded and re-encoded here). An agent's state-changing calls are handed on one at a time:
the ones behind wait in the agent's lane (`actors.cluster._lanes`), where their cancels are
answered at once. Everything else takes the task path through
`call_owner`, and so does a relayed call whose owner answers ``moved`` (the retry waits for the
next view).

On both paths the supervisor never answers ``cancelled`` on its own: only the owner knows
whether the call took effect. A cancel (the caller's, a supersede, a deadline, the supervisor's
shutdown) is passed on and the caller gets the owner's answer: ``cancelled`` when the owner
stopped it (or answered ``moved``: it never ran), its result when it had finished first, its
``deadline-exceeded``. An owner that cannot answer (its process died, its connection is lost)
gives ``unavailable`` or ``peer-lost``, and one silent for `wire`'s answer grace after the
cancel or the deadline gives ``unavailable`` with ``details.outcome`` ``unknown``: the call
may have taken effect.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from actors.cluster._coordinator import Claim, ClusterView, Member
from actors.cluster._gate import ClusterRegistry
from actors.cluster._lanes import WRITES_HANDED_ON, Lanes
from actors.cluster._owner_answer import call_to_outcome, never_ran, owner_error
from actors.cluster._pool import ClientPool
from actors.cluster._shards import shard_of
from actors.cluster._storage import stranded
from actors.store import keyed_session_id
from wire import (
    DEFERRED,
    CallCancelledError,
    CallContext,
    CancelReason,
    Client,
    Detach,
    DetachedCall,
    Endpoint,
    PeerLostError,
    UnavailableError,
    WireError,
)
from wire._errors import MovedError
from wire._proxy import specs_from_describe

__all__ = [
    "ROUTING_KEYS",
    "ForwardingRegistry",
    "call_owner",
    "forwarding_registry",
    "routing_key",
]

#: Arguments that name the agent a call is about, in order of preference. ``sessionId``
#: routes ``sessions/create`` to the shard the new session will live in.
ROUTING_KEYS = ("agentId", "sessionId")

#: Longest a call waits for its shard to get an owner (a worker restarting, a handover).
MAX_OWNER_WAIT = 10.0

#: Client states in which a call fails before it is sent (``wire.ClientStatistics.state``).
_CANNOT_SEND = frozenset({"lost", "closed"})


def routing_key(args: Mapping[str, Any]) -> str | None:
    for key in ROUTING_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    # A create that names no session but carries an idempotency key makes the session its key
    # names: route it (and every retry) to that session's shard.
    return keyed_session_id(args)


async def call_owner(
    pool: ClientPool,
    view: Callable[[], ClusterView | None],
    wait_change: Callable[[float], Awaitable[None]],
    endpoint: str,
    args: dict[str, Any],
    agent_id: str,
    *,
    result: Any = Any,
    max_wait: float = MAX_OWNER_WAIT,
    answered: Callable[[Claim], None] | None = None,
    relayed: bool = False,
) -> Any:
    """Call ``endpoint`` on the owner of ``agent_id``'s shard.

    Args:
        pool: Clients by endpoint.
        view: The latest cluster view.
        wait_change: Waits (at most the given seconds) for the view to change.
        answered: Told the claim (from ``view``) of the worker whose result is returned.
        relayed: The call answers another caller (the supervisor's task path): a cancel is
            passed on and the owner's answer returned or raised (`call_to_outcome`; ``result``
            is not checked). Otherwise a cancel abandons the call, as ``Client.call`` does.

    Raises:
        UnavailableError: no owner within ``max_wait`` seconds.
        WireError: the owner's answer.
    """
    give_up = trio.current_time() + max_wait
    while True:
        current = view()
        claim: Claim | None = None
        if current is not None and current.shard_count:
            shard = shard_of(agent_id, current.shard_count)
            claim = current.owner(shard)
            if claim is None and stranded(current, shard):
                # Bound to a storage no live worker sees: no owner can come until its host
                # returns or is evicted, so waiting out max_wait would only delay the answer.
                storage = current.binding(shard)
                raise UnavailableError(
                    f"shard {shard} of agent {agent_id!r} lives on storage {storage!r}, "
                    "which no live worker sees (its host is down or cut off; "
                    "`agent-actors cluster evict-host` gives it up)",
                    details={"agentId": agent_id, "shard": shard, "storageId": storage},
                )
        if claim is not None:
            try:
                client = await pool.get(claim.endpoint)
            except UnavailableError:
                client = None  # not sent: safe to try again once the view moves
            if client is not None and client.statistics().state in _CANNOT_SEND:
                # The owner said bye (draining) or went silent, and our view still names it: a
                # call now would fail before it is sent (peer-lost), so it is as safe to retry
                # as a refused connection. The claim goes when the owner releases it or its
                # lease ends, and the view then names the next owner.
                client = None
            if client is not None:
                try:
                    if relayed:
                        value = await call_to_outcome(client, endpoint, args)
                    else:
                        value = await client.call(endpoint, args, result=result)
                except (MovedError, CallCancelledError) as exc:
                    answer = owner_error(exc, claim.worker_id, endpoint, agent_id)
                    if answer is exc:
                        raise
                    if answer is not None:
                        raise answer from exc
                else:
                    if answered is not None:
                        answered(claim)
                    return value
        remaining = give_up - trio.current_time()
        if remaining <= 0:
            waited_for = shard_of(agent_id, current.shard_count) if current else None
            raise UnavailableError(
                f"no worker serves shard {waited_for} of agent {agent_id!r} "
                f"(waited {max_wait:g} s for an owner)",
                details={"agentId": agent_id, "shard": waited_for},
            )
        await wait_change(min(remaining, 0.05 if claim is not None else 0.5))


def _relay(
    client: Client,
    worker_id: str,
    endpoint: str,
    args: dict[str, Any],
    agent_id: str | None,
    retry: Callable[[], Awaitable[Any]],
    call: DetachedCall,
    on_end: Callable[[], None] | None = None,
) -> None:
    """Send ``call`` on to its owner through ``client`` and answer it from the owner's reply;
    a cancel is passed on and answered the same way (``wire/_detached.py``). ``on_end`` is
    called once the call has ended: answered or abandoned here, or, when it goes on to the
    task path (``retry``), once that ends (so the next write of its lane waits for it)."""
    deadline = call.record.deadline
    # Clamped: a pause (a garbage collection, say) may have spent the budget since arrival,
    # and a negative deadlineMs is a bad request; 0 is answered deadline-exceeded unrun (§6).
    budget = None if deadline is None else max(0.0, deadline - trio.current_time()) * 1000
    if on_end is not None:
        retry = _retry_then(retry, on_end)

    def done(value: Any, error: WireError | None) -> bool:
        """Answer the call from the owner's reply; whether it went on to the task path."""
        if error is None:
            call.succeed_encoded(value)  # the owner's result, passed on as it was encoded
            return False
        if call.cancelling:
            # Our cancel reached the owner (or crossed its answer): the answer is the truth.
            if never_ran(error):
                # ``moved``: no handler ever saw it, like a call cancelled while queued.
                call.cancelled(error.state if isinstance(error, CallCancelledError) else "queued")
            else:
                call.fail(error)
            return False
        answer = owner_error(error, worker_id, endpoint, agent_id)
        if answer is None:
            call.resume(retry)
            return True
        call.fail(answer)
        return False

    on_done = done if on_end is None else _unless_resumed(done, on_end)
    try:
        call_id = client.start_call(
            endpoint, args, deadline_ms=budget, encoded_result=True, on_done=on_done
        )
    except (PeerLostError, UnavailableError):
        call.resume(retry)  # not sent (the owner's connection just went): safe to retry
        return
    call.on_cancel = functools.partial(client.request_cancel, call_id)
    if on_end is None:
        call.on_abandon = functools.partial(client.cancel_call, call_id)
    else:

        def abandon(reason: CancelReason) -> None:
            client.cancel_call(call_id, reason)
            on_end()

        call.on_abandon = abandon


def _retry_then(
    retry: Callable[[], Awaitable[Any]], on_end: Callable[[], None]
) -> Callable[[], Awaitable[Any]]:
    """``retry``, then ``on_end`` however it ended."""

    async def retry_then_end() -> Any:
        try:
            return await retry()
        finally:
            on_end()

    return retry_then_end


def _unless_resumed(
    done: Callable[[Any, WireError | None], bool], on_end: Callable[[], None]
) -> Callable[[Any, WireError | None], None]:
    """``done``, then ``on_end`` unless the call went on to the task path (its retry calls
    ``on_end`` when it ends)."""

    def done_then_end(value: Any, error: WireError | None) -> None:
        resumed = False
        try:
            resumed = done(value, error)
        finally:
            if not resumed:
                on_end()

    return done_then_end


#: Agents whose owner a relay remembers before it starts over (a view change clears it anyway).
_MAX_ROUTES = 65_536


class _OwnerRoutes:
    """The owner of an agent and its connected client, looked up once per cluster view and
    pool generation (a shard hash, a claim and a pool lookup per call were a tenth of the
    relay's own cost)."""

    __slots__ = ("_found_in", "_pool", "_routes")

    def __init__(self, pool: ClientPool) -> None:
        self._pool = pool
        self._routes: dict[str, tuple[str, Client]] = {}
        self._found_in: tuple[ClusterView | None, int] = (None, -1)

    def ready_owner(self, current: ClusterView | None, agent_id: str) -> tuple[str, Client] | None:
        """The owner of ``agent_id`` in ``current`` and its client, if connected (else a
        connection is started, for the calls after this one)."""
        if current is None or not current.shard_count:
            return None
        view, generation = self._found_in
        if current is not view or self._pool.generation != generation:
            self._routes.clear()
            self._found_in = (current, self._pool.generation)
        route = self._routes.get(agent_id)
        if route is not None and route[1].ready:
            return route
        claim = current.owner(shard_of(agent_id, current.shard_count))
        if claim is None:
            return None
        client = self.connected(claim.endpoint)
        if client is None:
            return None
        if len(self._routes) >= _MAX_ROUTES:
            self._routes.clear()
        route = self._routes[agent_id] = (claim.worker_id, client)
        return route

    def connected(self, endpoint: str) -> Client | None:
        """The worker's client if it is connected; else ``None``, and a connection is started
        (the call takes the task path, which waits for it; later calls find it ready)."""
        client = self._pool.ready(endpoint)
        if client is None:
            self._pool.connect_soon(endpoint)
        return client


class _ForwardEndpoint(Endpoint):
    """Forwards its raw wire arguments; the owning worker validates them."""

    def bind(self, wire_args: Mapping[str, Any]) -> dict[str, Any]:
        return dict(wire_args)


def forwarding_registry(
    described: dict[str, Any],
    pool: ClientPool,
    view: Callable[[], ClusterView | None],
    wait_change: Callable[[float], Awaitable[None]],
    *,
    writes_per_agent: int = WRITES_HANDED_ON,
) -> ForwardingRegistry:
    """The supervisor's registry: each endpoint of ``described`` (a worker's
    ``system/describe``) forwarded to the owner of its agent; calls naming no agent go to the
    live workers in turn. ``system/describe`` answers with the workers' endpoints plus the
    shard map."""
    turn = itertools.count()

    def next_member(current: ClusterView | None) -> Member | None:
        """The live worker whose turn it is to take a call naming no agent."""
        members = current.members if current is not None else ()
        return members[next(turn) % len(members)] if members else None

    async def forward_any(name: str, args: dict[str, Any]) -> Any:
        member = next_member(view())
        if member is None:
            raise UnavailableError("no worker is running")
        client = await pool.get(member.endpoint)
        return await call_to_outcome(client, name, args)

    def forwarder(name: str) -> Callable[[CallContext, dict[str, Any]], Awaitable[Any]]:
        async def forward(context: CallContext, args: dict[str, Any]) -> Any:
            agent_id = routing_key(args)
            if agent_id is not None:
                return await call_owner(pool, view, wait_change, name, args, agent_id, relayed=True)
            return await forward_any(name, args)

        return forward

    lanes = Lanes(writes_per_agent)
    active_lanes = lanes.active

    routes = _OwnerRoutes(pool)
    ready_owner, connected = routes.ready_owner, routes.connected

    def relayer(name: str, mutates: bool) -> Callable[[CallContext, dict[str, Any]], Any]:
        def relay(context: CallContext, args: dict[str, Any]) -> Any:
            agent_id = routing_key(args)
            current = view()
            if current is None:
                return DEFERRED
            if agent_id is None:
                # A call about no agent goes to the live workers in turn, relayed like the
                # rest when that worker is connected (a task and its scheduling cost more).
                member = next_member(current)
                if member is None:
                    return DEFERRED
                client = connected(member.endpoint)
                if client is None:
                    return DEFERRED
                retry = functools.partial(forward_any, name, args)
                return Detach(
                    functools.partial(_relay, client, member.worker_id, name, args, None, retry)
                )
            owner = ready_owner(current, agent_id)
            if owner is None:
                # No owner yet, or not connected: this call takes the task path, which waits for
                # them (a connection was started: later calls to that worker find it ready).
                return DEFERRED
            retry = functools.partial(
                call_owner, pool, view, wait_change, name, args, agent_id, relayed=True
            )
            if not mutates and agent_id not in active_lanes:
                worker_id, client = owner
                return Detach(
                    functools.partial(_relay, client, worker_id, name, args, agent_id, retry)
                )

            def hand_on(call: DetachedCall, on_end: Callable[[], None] | None) -> None:
                # The owner as it is now: the call may have waited in its lane while the view
                # moved on.
                now_owner = ready_owner(view(), agent_id)
                if now_owner is None:
                    # The task path waits for an owner; the next write of the lane waits for
                    # this one, so they still reach the owner in the order they came.
                    call.resume(retry if on_end is None else _retry_then(retry, on_end))
                    return
                worker_id, client = now_owner
                _relay(client, worker_id, name, args, agent_id, retry, call, on_end)

            def begin(call: DetachedCall) -> None:
                lanes.admit(agent_id, mutates, call, functools.partial(hand_on, call))

            return Detach(begin)

        return relay

    description = {k: v for k, v in described.items() if k != "protocol"}
    registry = ForwardingRegistry(description, view, lanes)
    for spec in specs_from_describe(described):
        if spec.name.startswith("system/"):
            continue
        relay = relayer(spec.name, spec.mutates)
        registry.add(_ForwardEndpoint(spec=spec, handler=forwarder(spec.name), run_inline=relay))
    return registry


class ForwardingRegistry(ClusterRegistry):
    """The supervisor's registry: describes itself as the workers do (their endpoints and
    record types), and keeps the lanes its relay holds calls in."""

    def __init__(
        self,
        description: dict[str, Any],
        view: Callable[[], ClusterView | None],
        lanes: Lanes,
    ) -> None:
        super().__init__(view)
        self._workers_description = description
        #: The calls its relay holds per agent (`actors.cluster._lanes`).
        self.lanes = lanes

    def base_description(self) -> dict[str, Any]:
        return self._workers_description
