"""A peer that sends many expensive calls at once does not make another peer's call wait behind
a whole batch of them: the server's drain budget shrinks while handlers are slow.

Real ZeroMQ sockets inside one process; the handlers burn CPU without yielding, as an
expensive ``system/describe`` does.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgpack
import trio
import zmq

from wire import Endpoint, EndpointSpec, Registry, Server, open_client

#: CPU each greedy call burns (seconds): 32 of them, a full batch, take 64 ms.
BURN = 0.002


class Work:
    def __init__(self) -> None:
        self.burned = 0

    async def burn(self, ctx: Any, args: dict[str, Any]) -> None:
        until = time.perf_counter() + BURN
        while time.perf_counter() < until:
            pass
        self.burned += 1

    async def count(self, ctx: Any, args: dict[str, Any]) -> int:
        return self.burned


async def test_another_peers_call_waits_behind_a_few_slow_handlers_not_a_batch(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """While a raw peer's 400 slow calls are being served, each call of another client runs
    after at most 20 of them have run since it was sent, once the budget has adapted (a full
    batch is 32; one drain and the one after it were 64, and such a call waited for 40 to 80)."""
    work = Work()
    registry = Registry(
        [
            Endpoint(spec=EndpointSpec(name="t/burn"), handler=work.burn),
            Endpoint(spec=EndpointSpec(name="t/count"), handler=work.count),
        ]
    )
    server = Server(registry)
    [bound] = await nursery.start(server.run, f"ipc://{tmp_path}/s.sock")
    greedy: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    greedy.setsockopt(zmq.LINGER, 0)
    greedy.connect(bound)
    try:
        with trio.fail_after(60):
            async with open_client(bound) as other:
                greedy.send(msgpack.packb({"type": "hello", "versions": [1], "name": "greedy"}))
                for call_id in range(1, 401):
                    call = {"type": "call", "id": call_id, "endpoint": "t/burn", "args": {}}
                    greedy.send(msgpack.packb(call))
                waits = []
                while work.burned < 300:
                    before = work.burned
                    waits.append(await other.call("t/count") - before)
                # The first calls find the budget still adapting from its full size.
                assert len(waits) > 10, waits
                assert max(waits[3:]) <= 20, waits
        await server.aclose()
    finally:
        greedy.close(linger=0)
