"""What the server protocol hands its driver: call records, and the events of a step.

:class:`~wire._server_protocol.ServerProtocol` returns a list of these from every input; the
driver (``wire/_server.py``) sends what a :class:`Send` says, runs the handler a
:class:`StartCall` names, cancels what a :class:`CancelCall` names, and forgets a peer on
:class:`PeerDropped`. A :class:`CallRecord` is shared between both for the life of its call.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from wire._errors import CancelReason
from wire._messages import Call, Hello
from wire._state import CallState

__all__ = [
    "CallRecord",
    "CancelCall",
    "EncodedResult",
    "Interrupted",
    "PeerDropped",
    "PeerGreeted",
    "Send",
    "ServerEvent",
    "StartCall",
]


class Interrupted(enum.Enum):
    """How a handler ended when it did not produce a value or an error of its own."""

    #: Its scope was cancelled through :class:`CancelCall`.
    CANCELLED = "cancelled"
    #: The server-enforced deadline passed.
    DEADLINE = "deadline"


@attrs.define(eq=False)
class CallRecord:
    """One call in flight. Mutable; owned by the protocol, shared with the driver."""

    peer: bytes
    call: Call
    state: CallState = CallState.QUEUED
    #: Absolute deadline on the driver's clock, or ``None``.
    deadline: float | None = None
    cancel_reason: CancelReason | None = None
    #: The driver's handle for the running handler (its cancel scope).
    handle: Any = None
    #: When the call arrived, on the driver's clock (set only by a server that keeps metrics).
    received_at: float = 0.0


@attrs.frozen
class EncodedResult:
    """A result whose value is msgpack already: a relay passes its owner's result on."""

    id: int
    value: bytes


@attrs.frozen
class Send:
    """Send ``frame`` to ``peer`` now; a ``droppable`` frame is dropped rather than held when
    the peer's pipe is full (advice to a peer the server does not know: holding it would let
    a stranger that never reads grow the server's memory without bound)."""

    peer: bytes
    frame: bytes
    droppable: bool = False


@attrs.frozen
class StartCall:
    """Run the handler for ``record``; report its end with ``finish_call``."""

    record: CallRecord


@attrs.frozen
class CancelCall:
    """Cancel the handler of ``record`` (its reason is ``record.cancel_reason``)."""

    record: CallRecord


@attrs.frozen
class PeerGreeted:
    peer: bytes
    hello: Hello


@attrs.frozen
class PeerDropped:
    """``peer`` is gone (``reason``: heartbeat timeout, bye, unreachable, overloaded)."""

    peer: bytes
    reason: str
    #: Whether the frames already queued for the peer are discarded; not on a re-hello, where
    #: the same peer starts over and they (a first ``welcome``, answers) are still its own.
    discard_frames: bool = True


ServerEvent = Send | StartCall | CancelCall | PeerGreeted | PeerDropped
