"""Helpers for testing code that speaks protocol v1 (public, like ``trio.testing``).

:class:`FrameFactory` builds invalid frames of every class the codec must reject.
:class:`ProtocolPair` connects a :class:`~wire.ClientProtocol`-like driver to a
:class:`~wire.ServerProtocol` with no socket in between.
"""

from __future__ import annotations

from typing import Any

import msgpack

from wire._client_protocol import ClientEvent, ClientProtocol, SendFrame
from wire._codec import encode
from wire._messages import Message
from wire._server_events import Send, ServerEvent
from wire._server_protocol import ServerLimits, ServerProtocol

__all__ = ["FrameFactory", "ProtocolPair"]


class FrameFactory:
    """Raw frames, valid and not, for feeding a protocol machine."""

    @staticmethod
    def of(message: Message) -> bytes:
        return encode(message)

    @staticmethod
    def map(**fields: Any) -> bytes:
        """Any msgpack map, e.g. ``map(type="call", id="x")``."""
        packed: bytes = msgpack.packb(fields, use_bin_type=True)
        return packed

    @staticmethod
    def undecodable() -> bytes:
        return b"\xc1\xff\x00garbage"  # 0xc1 is never valid msgpack

    @staticmethod
    def truncated() -> bytes:
        return encode_prefix()

    @staticmethod
    def not_a_map() -> bytes:
        packed: bytes = msgpack.packb([1, 2, 3])
        return packed

    @staticmethod
    def oversized(limit: int) -> bytes:
        packed: bytes = msgpack.packb(
            {"type": "call", "id": 1, "endpoint": "a/b", "args": {"x": "y" * limit}}
        )
        return packed


def encode_prefix() -> bytes:
    whole: bytes = msgpack.packb({"type": "call", "id": 7, "endpoint": "a/b", "args": {}})
    return whole[: len(whole) // 2]


class ProtocolPair:
    """A client protocol and a server protocol joined by in-memory frame delivery.

    ``pair.call(...)`` sends a call through the client side into the server and returns the
    server's events; ``pair.deliver(events)`` hands server ``Send`` events back to the client.
    """

    PEER = b"peer-1"

    def __init__(self, limits: ServerLimits | None = None, now: float = 0.0) -> None:
        self.server = ServerProtocol(limits)
        self.client = ClientProtocol(now=now)
        self.now = now

    def greet(self) -> list[ClientEvent]:
        events = self.server.receive(self.PEER, self.client.hello(self.now), self.now)
        return self.deliver(events)

    def to_server(self, frame: bytes) -> list[ServerEvent]:
        return self.server.receive(self.PEER, frame, self.now)

    def deliver(self, events: list[ServerEvent]) -> list[ClientEvent]:
        out: list[ClientEvent] = []
        for event in events:
            if isinstance(event, Send) and event.peer == self.PEER:
                out.extend(self.client.receive(event.frame, self.now))
        return out

    def client_frames(self, events: list[ClientEvent]) -> list[bytes]:
        return [e.frame for e in events if isinstance(e, SendFrame)]
