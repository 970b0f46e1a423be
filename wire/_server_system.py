"""What every server serves besides its registry: ``system/describe``, ``system/stats`` and,
on a server that keeps metrics, ``system/metrics``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypedDict

import attrs

from wire._codec_relay import Encoded
from wire._codes import ErrorCode
from wire._collector import collector_families
from wire._endpoints import Endpoint, EndpointSpec, Registry
from wire._messages import Error
from wire._metrics import CallMetrics, counter, gauge, merge
from wire._server_events import CallRecord, Interrupted

log = logging.getLogger("wire.server")

__all__ = [
    "METRICS_SPEC",
    "SERVER_FAMILIES",
    "SYSTEM_SPECS",
    "MetricsSource",
    "ServerStatistics",
    "ServerStats",
    "metrics_snapshot",
    "observe_call",
    "system_endpoints",
]

#: More metric families of a process, as ``wire._metrics`` snapshots them.
MetricsSource = Callable[[], Awaitable[Mapping[str, Any]]]


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
    #: Bytes of those frames.
    backlog_bytes: int
    #: Peers forgotten since start, by reason (``bye``, ``heartbeat timeout``, ``not reading``,
    #: ``unreachable``, ``re-hello``, ``client key changed``).
    peers_gone: dict[str, int]


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
METRICS_SPEC = EndpointSpec(
    name="system/metrics",
    result=dict[str, Any],
    doc="This process's metric families (calls, latency, cancels, actors, ...), as data.",
)
#: The endpoints every server serves besides its registry (``system/metrics`` only when it
#: keeps metrics).
SYSTEM_SPECS = (_DESCRIBE, _STATS)


def observe_call(metrics: CallMetrics | None, record: CallRecord, outcome: Any, now: float) -> None:
    """Count a call's terminal outcome (``result``, an error code) and its latency, and log it
    at debug level with its fields (endpoint, call id, agent id, peer, outcome, duration)."""
    code: str
    if isinstance(outcome, Interrupted):
        code = (
            ErrorCode.CANCELLED if outcome is Interrupted.CANCELLED else ErrorCode.DEADLINE_EXCEEDED
        )
    elif isinstance(outcome, Error):
        code = outcome.code
    else:
        code = "result"
    seconds = max(0.0, now - record.received_at)
    if metrics is not None:
        if code == ErrorCode.CANCELLED:
            reason = record.cancel_reason
            metrics.cancelled(str(reason) if reason is not None else "caller")
        elif code == ErrorCode.DEADLINE_EXCEEDED:
            metrics.cancelled("deadline")
        metrics.finished(record.call.endpoint, str(code), seconds)
    if log.isEnabledFor(logging.DEBUG):
        agent = record.call.args.get("agentId") if isinstance(record.call.args, dict) else None
        fields = {
            "endpoint": record.call.endpoint,
            "call_id": record.call.id,
            "agent_id": agent if isinstance(agent, str) else None,
            "peer": record.peer.hex(),
            "outcome": str(code),
            "duration_ms": round(seconds * 1000, 3),
        }
        log.debug("%s %s in %.3f ms", record.call.endpoint, code, seconds * 1000, extra=fields)


#: The families every server reports of itself (a supervisor does not add up its workers').
SERVER_FAMILIES = frozenset(
    {"peers", "calls_in_flight", "backlog_frames", "backlog_bytes", "peers_gone_total"}
)


async def metrics_snapshot(
    statistics: Callable[[], ServerStatistics],
    call_metrics: CallMetrics | None,
    metrics: MetricsSource | None,
) -> dict[str, Any]:
    """What ``system/metrics`` answers: the server's own gauges, its process's cycle
    collections, its call metrics if it keeps them, and the families ``metrics`` adds."""
    s = statistics()
    families: dict[str, Any] = {
        "peers": gauge("Clients connected (said hello, not lost).", (), [((), s.peers)]),
        "calls_in_flight": gauge(
            "Calls in flight, by state.", ("state",), [([k], v) for k, v in sorted(s.calls.items())]
        ),
        "backlog_frames": gauge(
            "Frames held back for clients that are not reading.", (), [((), s.backlog_frames)]
        ),
        "backlog_bytes": gauge(
            "Bytes of the frames held back for clients that are not reading.",
            (),
            [((), s.backlog_bytes)],
        ),
        "peers_gone_total": counter(
            "Clients the server forgot, by reason (not-reading: dropped over a backlog bound).",
            ("reason",),
            [([reason.replace(" ", "-")], n) for reason, n in sorted(s.peers_gone.items())],
        ),
        **collector_families(),
    }
    if call_metrics is not None:
        families.update(call_metrics.snapshot())
    if metrics is not None:
        # Summed where both have a family: a supervisor's workers have cycle collectors too.
        families = merge([families, await metrics()])
    return families


def system_endpoints(
    registry: Registry,
    statistics: Callable[[], ServerStatistics],
    call_metrics: CallMetrics | None = None,
    metrics: MetricsSource | None = None,
) -> list[Endpoint]:
    """``system/describe`` (``registry`` described), ``system/stats`` (``statistics()``) and,
    given either source of metrics, ``system/metrics``."""

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

    async def metrics_now(context: Any, args: dict[str, Any]) -> dict[str, Any]:
        return await metrics_snapshot(statistics, call_metrics, metrics)

    optional = []
    if call_metrics is not None or metrics is not None:
        optional.append(Endpoint(spec=METRICS_SPEC, handler=metrics_now))
    return [
        *optional,
        # Inline: never blocks, and needs no task once encoded (a flood of describes from one
        # client then costs the others little).
        Endpoint(spec=_DESCRIBE, handler=describe, run_inline=describe_now),
        Endpoint(spec=_STATS, handler=stats),
    ]
