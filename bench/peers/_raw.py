"""Raw pyzmq+msgpack without a framework: the ceiling.

The server is a blocking ROUTER loop; the client a blocking DEALER keeping a window of requests
outstanding. Frames have the shape of the wire's ``call`` and ``result`` (msgpack maps with the
same keys), so the ceiling pays the same codec work as agent-actors and nothing else.
"""

from __future__ import annotations

import time

import msgpack
import zmq

from bench._load_jobs import Go, Job, Samples, payload_of
from bench.peers import READY_PREFIX

__all__ = ["drive", "serve"]

#: A reply later than this fails the process (seconds).
_REPLY_TIMEOUT = 30.0


def serve(address: str, *, ready: str = READY_PREFIX, hwm: int | None = 100_000) -> None:
    """The blocking ROUTER echo loop, until the process is killed; prints ``ready`` and the
    bound address first. ``hwm`` sets both high-water marks (``None``: ZeroMQ's default)."""
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
    socket.setsockopt(zmq.LINGER, 0)
    if hwm is not None:
        socket.setsockopt(zmq.SNDHWM, hwm)
        socket.setsockopt(zmq.RCVHWM, hwm)
    socket.bind(address)
    print(f"{ready} {socket.getsockopt_string(zmq.LAST_ENDPOINT)}", flush=True)
    while True:
        parts = socket.recv_multipart()
        if len(parts) != 2:
            continue
        try:
            request = msgpack.unpackb(parts[1])
            reply = {"type": "result", "id": request["id"], "value": request["args"]["payload"]}
        except (ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
            reply = {"type": "error", "id": None, "code": "bad-request", "message": str(exc)}
        try:
            socket.send_multipart((parts[0], msgpack.packb(reply)))
        except zmq.ZMQError:
            pass  # the peer went away: nobody to answer


def drive(job: Job, go: Go) -> Samples:
    payload = payload_of(job.payload_bytes)
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.SNDHWM, 100_000)
    socket.setsockopt(zmq.RCVHWM, 100_000)
    socket.setsockopt(zmq.RCVTIMEO, int(_REPLY_TIMEOUT * 1000))
    socket.connect(job.address)
    next_id = 0

    def send() -> int:
        nonlocal next_id
        next_id += 1
        args = {"agentId": "agent-raw", "payload": payload}
        socket.send(
            msgpack.packb(
                {"type": "call", "id": next_id, "endpoint": "diagnostics/echo", "args": args}
            )
        )
        return next_id

    def receive() -> int:
        try:
            reply = msgpack.unpackb(socket.recv())
        except zmq.Again:
            raise RuntimeError(f"raw: no reply within {_REPLY_TIMEOUT:g} s") from None
        if len(reply.get("value") or b"") != len(payload):
            raise RuntimeError(f"raw: unexpected reply {reply!r:.200}")
        call_id: int = reply["id"]
        return call_id

    try:
        for _ in range(job.warmup_calls):
            send()
            receive()
        samples = Samples(go(), job.duration)
        time.sleep(max(0.0, (samples.start_ns - time.monotonic_ns()) / 1e9))
        sent_at: dict[int, int] = {}
        for _ in range(job.concurrency):
            sent_at[send()] = time.monotonic_ns()
        while sent_at:
            call_id = receive()
            now = time.monotonic_ns()
            samples.call_done(sent_at.pop(call_id), now)
            if samples.open(now):
                sent_at[send()] = time.monotonic_ns()
        samples.stop_clock()
        return samples
    finally:
        socket.close(linger=0)
