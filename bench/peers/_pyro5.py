"""Pyro5: a threadpool ``Daemon`` and the msgpack serializer (the same codec as agent-actors; the
default, serpent, would ship bytes as base64 text). A Pyro5 proxy carries one call at a time, so
each call in flight has its own proxy (connection) and thread."""

from __future__ import annotations

import threading
import time
from typing import Any

from bench._load_jobs import Go, Job, Samples, payload_of, split_address
from bench.peers import READY_PREFIX

__all__ = ["drive", "serve"]

_OBJECT = "bench.echo"
_TIMEOUT = 30.0


def serve(address: str) -> None:
    import Pyro5.api

    # One server thread per connection; the default pool (80) is smaller than the load.
    Pyro5.api.config.THREADPOOL_SIZE = 2048

    @Pyro5.api.expose
    class Echo:
        def echo(self, payload: Any) -> Any:
            return payload

    where = split_address(address)
    if isinstance(where, str):
        daemon = Pyro5.api.Daemon(unixsocket=where)
        bound = address
    else:
        daemon = Pyro5.api.Daemon(host=where[0], port=where[1])
        bound = f"tcp://{where[0]}:{daemon.sock.getsockname()[1]}"
    daemon.register(Echo(), _OBJECT)
    print(f"{READY_PREFIX} {bound}", flush=True)
    daemon.requestLoop()


def _uri(address: str) -> str:
    where = split_address(address)
    if isinstance(where, str):
        return f"PYRO:{_OBJECT}@./u:{where}"
    return f"PYRO:{_OBJECT}@{where[0]}:{where[1]}"


def drive(job: Job, go: Go) -> Samples:
    import Pyro5.api

    Pyro5.api.config.SERIALIZER = "msgpack"
    Pyro5.api.config.COMMTIMEOUT = _TIMEOUT
    payload = payload_of(job.payload_bytes)
    uri = _uri(job.address)
    ready = threading.Barrier(job.concurrency + 1, timeout=_TIMEOUT)
    started = threading.Event()
    failures: list[BaseException] = []
    box: list[Samples] = []
    warmup = max(1, job.warmup_calls // job.concurrency)

    def caller() -> None:
        try:
            with Pyro5.api.Proxy(uri) as proxy:
                for _ in range(warmup):
                    if proxy.echo(payload) != payload:
                        raise RuntimeError("pyro5: echo returned something else")
                ready.wait()
                started.wait(_TIMEOUT)
                samples = box[0]
                time.sleep(max(0.0, (samples.start_ns - time.monotonic_ns()) / 1e9))
                while samples.open():
                    begun = time.monotonic_ns()
                    reply = proxy.echo(payload)
                    samples.call_done(begun, time.monotonic_ns())
                    if len(reply) != len(payload):
                        raise RuntimeError("pyro5: short echo")
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
            ready.abort()

    threads = [threading.Thread(target=caller, daemon=True) for _ in range(job.concurrency)]
    for thread in threads:
        thread.start()
    try:
        ready.wait()
    except threading.BrokenBarrierError:
        raise RuntimeError(f"pyro5: a caller failed to connect: {failures[:1]!r}") from None
    box.append(Samples(go(), job.duration))
    started.set()
    for thread in threads:
        thread.join(job.duration + _TIMEOUT)
    if failures:
        raise RuntimeError(f"pyro5: {len(failures)} callers failed: {failures[0]!r}")
    box[0].stop_clock()
    return box[0]
