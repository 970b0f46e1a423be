"""Nested calls a handler makes inherit its remaining deadline."""

from __future__ import annotations

from typing import Any

import msgpack
import trio
import zmq

from wire import Endpoint, EndpointSpec, Registry, Server, open_client


def fake_downstream(sock: zmq.Socket[bytes], seen: list[dict[str, Any]]) -> None:
    """A bare ROUTER that welcomes one client, records its call, and answers it."""
    while True:
        identity, frame = sock.recv_multipart()
        message = msgpack.unpackb(frame)
        if message["type"] == "hello":
            welcome = {
                "type": "welcome",
                "version": 1,
                "heartbeatMs": 1000,
                "peerTimeoutMs": 2500,
                "maxFrameBytes": 1 << 20,
                "maxInFlight": 16,
            }
            sock.send_multipart([identity, msgpack.packb(welcome)])
        elif message["type"] == "call":
            seen.append(message)
            reply = {"type": "result", "id": message["id"], "value": "downstream"}
            sock.send_multipart([identity, msgpack.packb(reply)])
            return


async def test_handler_calls_carry_the_remaining_budget(nursery: trio.Nursery) -> None:
    """A call made inside a handler carries deadlineMs no larger than what the original
    caller had left, because the handler runs under the server-enforced deadline."""
    downstream = zmq.Context.instance().socket(zmq.ROUTER)
    downstream.setsockopt(zmq.LINGER, 0)
    downstream.bind("tcp://127.0.0.1:0")
    downstream_address = downstream.getsockopt_string(zmq.LAST_ENDPOINT)
    seen: list[dict[str, Any]] = []

    async def relay(context: Any, args: dict[str, Any]) -> Any:
        await trio.sleep(0.2)  # spend part of the budget first
        async with open_client(downstream_address) as inner:
            return await inner.call("down/stream")

    server = Server(Registry([Endpoint(spec=EndpointSpec(name="up/relay"), handler=relay)]))
    [address] = await nursery.start(server.run, "tcp://127.0.0.1:0")
    try:
        async with trio.open_nursery() as threads:
            threads.start_soon(lambda: trio.to_thread.run_sync(fake_downstream, downstream, seen))
            with trio.fail_after(10):
                async with open_client(address) as client:
                    with trio.move_on_after(2.0):
                        assert await client.call("up/relay") == "downstream"
    finally:
        downstream.close()
    [call] = seen
    assert 0 < call["deadlineMs"] <= 1800
    await server.aclose()
