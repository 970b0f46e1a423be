"""Routing a call to the worker that owns its agent.

`call_owner` is the one routing loop: find the owner in the current view, call it through the
client pool, and on ``moved`` (the worker has not adopted its claim yet, or is handing the
shard over) wait for the next view and try again. Only answers that prove the call did not run
are retried (``moved``, or a worker that could not be reached before sending); a call that was
sent and then lost (``peer-lost``, ``unavailable``) fails to the caller, because it may have
taken effect.

`forwarding_registry` is the supervisor's public face: every endpoint a worker serves, each
forwarding its raw wire arguments to the owner (one extra hop). Deadlines and cancellation
cross the hop through the client: the forwarded call carries the handler's remaining budget,
and a cancelled handler cancels its forwarded call.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from actors.cluster._coordinator import Claim, ClusterView
from actors.cluster._gate import ClusterRegistry, shard_map
from actors.cluster._pool import ClientPool
from actors.cluster._shards import shard_of
from wire import CallContext, Endpoint, UnavailableError
from wire._errors import MovedError
from wire._proxy import specs_from_describe

__all__ = ["ROUTING_KEYS", "call_owner", "forwarding_registry", "routing_key"]

#: Arguments that name the agent a call is about, in order of preference. ``sessionId``
#: routes ``sessions/create`` to the shard the new session will live in.
ROUTING_KEYS = ("agentId", "sessionId")

#: Longest a call waits for its shard to get an owner (a worker restarting, a handover).
MAX_OWNER_WAIT = 10.0


def routing_key(args: Mapping[str, Any]) -> str | None:
    for key in ROUTING_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    return None


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
) -> Any:
    """Call ``endpoint`` on the owner of ``agent_id``'s shard.

    Args:
        pool: Clients by endpoint.
        view: The latest cluster view.
        wait_change: Waits (at most the given seconds) for the view to change.

    Raises:
        UnavailableError: no owner within ``max_wait`` seconds.
        WireError: the owner's answer.
    """
    give_up = trio.current_time() + max_wait
    while True:
        current = view()
        claim: Claim | None = None
        if current is not None and current.shard_count:
            claim = current.owner(shard_of(agent_id, current.shard_count))
        if claim is not None:
            try:
                client = await pool.get(claim.endpoint)
            except UnavailableError:
                client = None  # not sent: safe to try again once the view moves
            if client is not None:
                try:
                    return await client.call(endpoint, args, result=result)
                except MovedError:
                    pass  # not executed; the owner's view and ours differ for a moment
        remaining = give_up - trio.current_time()
        if remaining <= 0:
            shard = shard_of(agent_id, current.shard_count) if current else None
            raise UnavailableError(
                f"no worker serves shard {shard} of agent {agent_id!r} "
                f"(waited {max_wait:g} s for an owner)",
                details={"agentId": agent_id, "shard": shard},
            )
        await wait_change(min(remaining, 0.05 if claim is not None else 0.5))


class _ForwardEndpoint(Endpoint):
    """Forwards its raw wire arguments; the owning worker validates them."""

    def bind(self, wire_args: Mapping[str, Any]) -> dict[str, Any]:
        return dict(wire_args)


def forwarding_registry(
    described: dict[str, Any],
    pool: ClientPool,
    view: Callable[[], ClusterView | None],
    wait_change: Callable[[float], Awaitable[None]],
) -> ClusterRegistry:
    """The supervisor's registry: each endpoint of ``described`` (a worker's
    ``system/describe``) forwarded to the owner of its agent; calls naming no agent go to the
    live workers in turn. ``system/describe`` answers with the workers' endpoints plus the
    shard map."""
    turn = itertools.count()

    def any_worker() -> str:
        current = view()
        members = current.members if current is not None else ()
        if not members:
            raise UnavailableError("no worker is running")
        return members[next(turn) % len(members)].endpoint

    def forwarder(name: str) -> Callable[[CallContext, dict[str, Any]], Awaitable[Any]]:
        async def forward(context: CallContext, args: dict[str, Any]) -> Any:
            agent_id = routing_key(args)
            if agent_id is not None:
                return await call_owner(pool, view, wait_change, name, args, agent_id)
            client = await pool.get(any_worker())
            return await client.call(name, args)

        return forward

    description = {k: v for k, v in described.items() if k != "protocol"}
    registry = _DescribedRegistry(description, lambda: shard_map(view()))
    for spec in specs_from_describe(described):
        if spec.name.startswith("system/"):
            continue
        registry.add(_ForwardEndpoint(spec=spec, handler=forwarder(spec.name)))
    return registry


class _DescribedRegistry(ClusterRegistry):
    """Describes itself as the workers do (their endpoints and record types)."""

    def __init__(self, description: dict[str, Any], cluster_map: Any) -> None:
        super().__init__(cluster_map)
        self._workers_description = description

    def describe(self) -> dict[str, Any]:
        return {**self._workers_description, "cluster": self._cluster_map()}
