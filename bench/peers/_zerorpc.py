"""zerorpc: msgpack over ZeroMQ with gevent; one ``Client`` per process, a greenlet per call."""

from __future__ import annotations

import time
from typing import Any

from bench._load_jobs import Go, Job, Samples, payload_of
from bench.peers import READY_PREFIX

__all__ = ["drive", "serve"]

_TIMEOUT = 30


class _Echo:
    def echo(self, payload: Any) -> Any:
        return payload


def serve(address: str) -> None:
    import zerorpc
    import zmq

    server = zerorpc.Server(_Echo())
    server.bind(address)
    # zerorpc keeps its ZeroMQ socket inside its Events object; ask it which port it bound.
    bound = server._events._socket.getsockopt(zmq.LAST_ENDPOINT).decode()
    print(f"{READY_PREFIX} {bound}", flush=True)
    server.run()


def drive(job: Job, go: Go) -> Samples:
    import gevent
    import zerorpc

    payload = payload_of(job.payload_bytes)
    client = zerorpc.Client(timeout=_TIMEOUT)
    client.connect(job.address)
    try:
        for _ in range(job.warmup_calls):
            if client.echo(payload) != payload:
                raise RuntimeError("zerorpc: echo returned something else than its payload")
        samples = Samples(go(), job.duration)
        gevent.sleep(max(0.0, (samples.start_ns - time.monotonic_ns()) / 1e9))

        def caller() -> None:
            while samples.open():
                started = time.monotonic_ns()
                reply = client.echo(payload)
                samples.call_done(started, time.monotonic_ns())
                if len(reply) != len(payload):
                    raise RuntimeError("zerorpc: short echo")

        callers = [gevent.spawn(caller) for _ in range(job.concurrency)]
        gevent.joinall(callers, timeout=job.duration + _TIMEOUT, raise_error=True)
        if not all(c.ready() for c in callers):
            raise RuntimeError("zerorpc: callers still running after the window")
        samples.stop_clock()
        return samples
    finally:
        client.close()
