"""What every server serves besides its registry: ``system/describe`` and ``system/stats``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import attrs

from wire._codec_relay import Encoded
from wire._endpoints import Endpoint, EndpointSpec, Registry

__all__ = ["SYSTEM_SPECS", "ServerStatistics", "ServerStats", "system_endpoints"]


@attrs.frozen(kw_only=True)
class ServerStatistics:
    """A snapshot of a server's load (``system/stats``)."""

    #: Peers that said hello and are not lost.
    peers: int
    #: Calls in flight by state (queued, running, cancelling-queued, cancelling-running).
    calls: dict[str, int]
    #: Handler tasks alive right now (each call has at most one; a detached call has none).
    handler_tasks: int
    #: Calls received since start.
    calls_total: int
    #: Calls that ended cancelled since start.
    cancelled_total: int
    #: Frames held back because a peer was not reading.
    backlog_frames: int


class ServerStats(TypedDict):
    """A server's load right now (``system/stats``)."""

    #: Peers that said hello and are not lost.
    peers: int
    #: Calls in flight by state (queued, running, cancelling-queued, cancelling-running).
    calls: dict[str, int]
    #: Handler tasks alive, not counting the stats call's own.
    handlerTasks: int
    callsTotal: int
    cancelledTotal: int
    #: Frames held back because a peer was not reading.
    backlogFrames: int


_DESCRIBE = EndpointSpec(
    name="system/describe",
    result=dict[str, Any],
    doc="Every endpoint with its parameters, result and errors, as JSON Schema (2020-12).",
)
_STATS = EndpointSpec(
    name="system/stats",
    result=ServerStats,
    doc="Server load: peers, calls by state, live handler tasks, totals.",
)
#: The endpoints every server serves besides its registry.
SYSTEM_SPECS = (_DESCRIBE, _STATS)


def system_endpoints(
    registry: Registry, statistics: Callable[[], ServerStatistics]
) -> list[Endpoint]:
    """``system/describe`` (``registry`` described) and ``system/stats`` (``statistics()``)."""

    # The description is tens of KB and changes only when an endpoint is added: encoded once
    # per version of it, not once per call (a client may ask for it at every connect).
    encoded: list[tuple[dict[str, Any], Encoded]] = []

    def describe_now(context: Any, args: dict[str, Any]) -> Encoded:
        described = registry.describe()
        if not encoded or encoded[0][0] is not described:
            encoded[:] = [(described, Encoded.of({"protocol": 1, **described}))]
        return encoded[0][1]

    async def describe(context: Any, args: dict[str, Any]) -> Encoded:
        return describe_now(context, args)

    async def stats(context: Any, args: dict[str, Any]) -> ServerStats:
        s = statistics()
        return {
            "peers": s.peers,
            "calls": s.calls,
            "handlerTasks": s.handler_tasks - 1,  # not counting this call's own task
            "callsTotal": s.calls_total,
            "cancelledTotal": s.cancelled_total,
            "backlogFrames": s.backlog_frames,
        }

    return [
        # Inline: never blocks, and needs no task once encoded (a flood of describes from one
        # client then costs the others little).
        Endpoint(spec=_DESCRIBE, handler=describe, run_inline=describe_now),
        Endpoint(spec=_STATS, handler=stats),
    ]
