"""RPyC: a ``ThreadedServer``; one connection per process, calls made with ``rpyc.async_`` and
kept in flight by completion callbacks while the process serves its connection."""

from __future__ import annotations

import time
from typing import Any

from bench._load_jobs import Go, Job, Samples, payload_of, split_address
from bench.peers import READY_PREFIX

__all__ = ["drive", "serve"]

_TIMEOUT = 30.0


def serve(address: str) -> None:
    import rpyc
    from rpyc.utils.server import ThreadedServer

    class EchoService(rpyc.Service):
        def exposed_echo(self, payload: Any) -> Any:
            return payload

    where = split_address(address)
    if isinstance(where, str):
        server = ThreadedServer(EchoService, socket_path=where)
        bound = address
    else:
        server = ThreadedServer(EchoService, hostname=where[0], port=where[1])
        bound = f"tcp://{where[0]}:{server.port}"
    print(f"{READY_PREFIX} {bound}", flush=True)
    server.start()


def drive(job: Job, go: Go) -> Samples:
    import rpyc
    from rpyc.utils.factory import unix_connect

    config = {"sync_request_timeout": _TIMEOUT}
    where = split_address(job.address)
    if isinstance(where, str):
        conn = unix_connect(where, config=config)
    else:
        conn = rpyc.connect(where[0], where[1], config=config)
    payload = payload_of(job.payload_bytes)
    try:
        remote_echo = conn.root.echo
        for _ in range(job.warmup_calls):
            if remote_echo(payload) != payload:
                raise RuntimeError("rpyc: echo returned something else than its payload")
        echo = rpyc.async_(remote_echo)
        samples = Samples(go(), job.duration)
        time.sleep(max(0.0, (samples.start_ns - time.monotonic_ns()) / 1e9))
        outstanding = 0

        def issue() -> None:
            nonlocal outstanding
            started = time.monotonic_ns()
            outstanding += 1
            echo(payload).add_callback(lambda result: done(result, started))

        def done(result: Any, started: int) -> None:
            nonlocal outstanding
            outstanding -= 1
            now = time.monotonic_ns()
            samples.call_done(started, now)
            if len(result.value) != len(payload):  # .value re-raises a remote exception
                raise RuntimeError("rpyc: short echo")
            if samples.open(now):
                issue()

        for _ in range(job.concurrency):
            issue()
        give_up = time.monotonic() + job.duration + _TIMEOUT
        while outstanding:
            if time.monotonic() > give_up:
                raise RuntimeError(f"rpyc: {outstanding} calls unanswered after the window")
            conn.serve(1.0)
        samples.stop_clock()
        return samples
    finally:
        conn.close()
