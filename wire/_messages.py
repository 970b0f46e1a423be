"""The messages of protocol v1: one frozen attrs class per wire ``type``.

The same classes are used to send and to receive. Field names are snake_case here; the codec
(:mod:`wire._codec`) owns the camelCase wire names. ``docs/protocol.md`` is the normative
description; keep the two in step (``tests/wire/test_docs.py`` checks the kinds and codes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from wire._codes import CancelReason, ErrorCode

__all__ = [
    "PROTOCOL_VERSION",
    "Bye",
    "Call",
    "Cancel",
    "Error",
    "Hello",
    "Message",
    "Ping",
    "Pong",
    "Result",
    "Welcome",
]

#: The protocol version this implementation speaks.
PROTOCOL_VERSION = 1


class Message:
    """Base of all messages; ``KIND`` is the value of the frame's ``type`` field."""

    __slots__ = ()
    KIND: ClassVar[str]


@attrs.frozen(kw_only=True)
class Hello(Message):
    """Client → server, first frame of a connection."""

    KIND = "hello"
    #: Protocol versions the client speaks, any order.
    versions: tuple[int, ...] = (PROTOCOL_VERSION,)
    #: Free-form client software name, for the server's log.
    name: str = ""


@attrs.frozen(kw_only=True)
class Welcome(Message):
    """Server → client, answer to hello: the chosen version and the limits in force."""

    KIND = "welcome"
    version: int = PROTOCOL_VERSION
    #: Free-form server software name.
    name: str = ""
    #: How often each side sends a ping when it has nothing else to send (milliseconds).
    heartbeat_ms: int
    #: A peer silent for longer than this is lost (milliseconds).
    peer_timeout_ms: int
    #: Largest frame either side may send (bytes).
    max_frame_bytes: int
    #: Most calls one client may have in flight at the server; more get ``overloaded``.
    max_in_flight: int


@attrs.frozen(kw_only=True)
class Call(Message):
    """Client → server: invoke ``endpoint`` with named ``args``."""

    KIND = "call"
    #: Client-chosen call id, unique among the client's calls in flight.
    id: int
    #: ``namespace/method``.
    endpoint: str
    #: Named arguments, wire names (``agentId``, ``query``, …).
    args: Mapping[str, Any] = attrs.field(factory=dict)
    #: Remaining budget in milliseconds when the call was sent; ``None`` means no deadline.
    deadline_ms: float | None = None
    #: Latest-wins key: a newer call with the same key from this client supersedes this one.
    supersede: str | None = None


@attrs.frozen(kw_only=True)
class Cancel(Message):
    """Client → server: stop call ``id``. Ignored if the call already ended."""

    KIND = "cancel"
    id: int
    reason: CancelReason = CancelReason.CALLER


@attrs.frozen(kw_only=True)
class Result(Message):
    """Server → client: call ``id`` succeeded (a terminal frame)."""

    KIND = "result"
    id: int
    value: Any = None


@attrs.frozen(kw_only=True)
class Error(Message):
    """Either direction: call ``id`` failed (a terminal frame), or, with ``id`` ``None``, the
    connection-level error (bad frame, unknown peer)."""

    KIND = "error"
    id: int | None
    code: str
    message: str
    details: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def of(
        cls,
        id: int | None,
        code: ErrorCode,
        message: str,
        /,
        **details: Any,
    ) -> Error:
        return cls(id=id, code=code.value, message=message, details=details)


@attrs.frozen(kw_only=True)
class Ping(Message):
    """Either direction: liveness probe; the receiver answers :class:`Pong`."""

    KIND = "ping"

    def response(self) -> Pong:
        return Pong()


@attrs.frozen(kw_only=True)
class Pong(Message):
    """Either direction: answer to :class:`Ping`."""

    KIND = "pong"


@attrs.frozen(kw_only=True)
class Bye(Message):
    """Either direction: the sender is going away on purpose.

    From a client: cancel my calls now (reason ``peer-lost``) and forget me. From a server: no
    more calls will be served; it is sent after every in-flight call got its terminal frame.
    """

    KIND = "bye"


#: Every message class by its wire ``type``.
MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.KIND: cls for cls in (Hello, Welcome, Call, Cancel, Result, Error, Ping, Pong, Bye)
}
