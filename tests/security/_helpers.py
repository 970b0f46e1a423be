"""Shared helpers of the security tests: a bare DEALER and in-process servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgpack
import trio
import zmq

from actors._config import Config
from actors._query_limits import limit_queries
from actors._serve import open_runtime
from wire import Server


class RawPeer:
    """A DEALER speaking protocol v1 by hand (blocking socket, read from a worker thread)."""

    def __init__(self, address: str, *, context: zmq.Context[Any] | None = None) -> None:
        self.socket = (context or zmq.Context.instance()).socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVTIMEO, 5000)
        self.socket.connect(address)

    def send(self, frame: bytes | dict[str, Any]) -> None:
        self.socket.send(frame if isinstance(frame, bytes) else msgpack.packb(frame))

    async def receive(self) -> dict[str, Any]:
        """The next frame that is not a ping (raises ``zmq.Again`` after 5 s of silence)."""
        while True:
            raw = await trio.to_thread.run_sync(self.socket.recv)
            reply: dict[str, Any] = msgpack.unpackb(raw, raw=False)
            if reply.get("type") != "ping":
                return reply

    async def greet(self) -> dict[str, Any]:
        self.send({"type": "hello", "versions": [1], "name": "raw"})
        welcome = await self.receive()
        assert welcome["type"] == "welcome", welcome
        return welcome

    def close(self) -> None:
        self.socket.close(linger=0)


@asynccontextmanager
async def runtime_server(
    data: Path, config: Config | None = None, address: str = "tcp://127.0.0.1:0"
) -> AsyncIterator[str]:
    """The full ``agent-actors serve`` stack inside this process; yields the bound address."""
    config = config or Config()
    async with open_runtime(config, data) as runtime:
        server = Server(
            limit_queries(runtime.system.registry, config.max_query_length), limits=config.wire
        )
        async with trio.open_nursery() as nursery:
            [bound] = await nursery.start(server.run, address)
            try:
                yield bound
            finally:
                with trio.CancelScope(shield=True):
                    await server.aclose(grace=1.0)
                nursery.cancel_scope.cancel()
