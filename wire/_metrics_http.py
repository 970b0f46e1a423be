"""``serve --metrics HOST:PORT``: the metrics of ``wire._metrics`` over HTTP, for Prometheus.

``GET /metrics`` answers Prometheus' text format, written by the maintained
``prometheus_client`` library from a fresh snapshot (every name prefixed ``agent_actors_``);
``GET /healthz`` answers 200 while the process serves HTTP at all (a liveness probe) and
``GET /readyz`` 200 once the server accepts calls, 503 before and while it shuts down (a
readiness probe). HTTP/1.1 is parsed by ``h11``; one request per connection, which is what a
scraper or a probe makes. The listener runs in the server's nursery like every other task.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import h11
import trio

if TYPE_CHECKING:
    from prometheus_client.core import Metric

__all__ = ["PREFIX", "render_prometheus", "serve_metrics"]

log = logging.getLogger("wire.metrics")

#: The prefix of every exported metric name.
PREFIX = "agent_actors_"

#: Longest request head read before the connection is dropped.
_MAX_REQUEST = 16 * 1024
#: A client that sends nothing for this long is dropped.
_REQUEST_TIMEOUT = 10.0

Snapshot = Callable[[], Awaitable[Mapping[str, Any]]]


class _Families:
    """A ``prometheus_client`` collector over one snapshot."""

    def __init__(self, snapshot: Mapping[str, Any]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        for name, family in sorted(self._snapshot.items()):
            yield _family(PREFIX + name, family)


def _family(name: str, family: Mapping[str, Any]) -> Metric:
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    labels = list(family["labels"])
    kind = family["kind"]
    if kind == "histogram":
        histogram = HistogramMetricFamily(name, family["help"], labels=labels)
        bounds = [*(repr(float(b)) for b in family["buckets"]), "+Inf"]
        for sample in family["samples"]:
            cumulative, running = [], 0
            for bound, count in zip(bounds, sample["counts"], strict=True):
                running += count
                cumulative.append((bound, running))
            histogram.add_metric(sample["labels"], cumulative, sum_value=sample["sum"])
        return histogram
    metric: CounterMetricFamily | GaugeMetricFamily = (
        CounterMetricFamily(name, family["help"], labels=labels)
        if kind == "counter"
        else GaugeMetricFamily(name, family["help"], labels=labels)
    )
    for sample in family["samples"]:
        metric.add_metric(sample["labels"], sample["value"])
    return metric


def render_prometheus(snapshot: Mapping[str, Any]) -> bytes:
    """``snapshot`` in Prometheus' text exposition format."""
    # Imported here: every client imports wire, and only a server with --metrics needs it.
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(snapshot))
    return generate_latest(registry)


async def serve_metrics(
    host: str,
    port: int,
    snapshot: Snapshot,
    ready: Callable[[], bool],
    *,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Answer metrics and probes on ``host:port`` until cancelled; ``task_status`` gets the
    bound address (port 0 picks a free one)."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()
    task_status.started((bound[0], bound[1]))

    async def handle(stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(_REQUEST_TIMEOUT):
                await _answer(stream, snapshot, ready)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass  # a client that went away or spoke no HTTP: nothing to answer
        finally:
            await trio.aclose_forcefully(stream)

    await trio.serve_listeners(handle, listeners)


async def _answer(stream: trio.SocketStream, snapshot: Snapshot, ready: Callable[[], bool]) -> None:
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_REQUEST)
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(4096)
            connection.receive_data(data)
            continue
        if isinstance(event, h11.Request):
            break
        return
    target = event.target.split(b"?", 1)[0]
    if event.method not in (b"GET", b"HEAD"):
        status, body, kind = 405, b"only GET\n", b"text/plain; charset=utf-8"
    elif target == b"/metrics":
        try:
            status, body = 200, render_prometheus(await snapshot())
        except Exception:
            log.exception("metrics: the snapshot failed")
            status, body = 500, b"the metrics snapshot failed; see the server log\n"
        kind = b"text/plain; version=0.0.4; charset=utf-8"
    elif target == b"/healthz":
        status, body, kind = 200, b"ok\n", b"text/plain; charset=utf-8"
    elif target == b"/readyz":
        is_ready = ready()
        status, body = (200, b"ready\n") if is_ready else (503, b"not ready\n")
        kind = b"text/plain; charset=utf-8"
    else:
        status, body, kind = 404, b"try /metrics, /healthz or /readyz\n", b"text/plain"
    headers = [
        (b"content-type", kind),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await stream.send_all(connection.send(h11.Response(status_code=status, headers=headers)))
    if event.method == b"GET":
        await stream.send_all(connection.send(h11.Data(data=body)))
    await stream.send_all(connection.send(h11.EndOfMessage()) or b"")
