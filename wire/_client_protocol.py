"""The client half of protocol v1, sans-IO.

:class:`ClientProtocol` tracks the connection state (greeting → ready → lost) and the calls in
flight, each with an opaque handle the driver uses to wake its caller. It turns received frames
into :class:`Resolved`, :class:`Ready` and :class:`Lost` events and tells the driver when to ping
and when the server has been silent too long.
"""

from __future__ import annotations

import enum
import math
from typing import Any

import attrs

from wire._codec import decode, encode, encode_call
from wire._codec_relay import read_result, split_result
from wire._errors import (
    ArgumentsInvalidError,
    CancelReason,
    ErrorCode,
    LocalProtocolError,
    PeerLostError,
    RemoteProtocolError,
    TooLargeError,
    UnavailableError,
    WireError,
    error_from_wire,
)
from wire._messages import Bye, Cancel, Error, Hello, Ping, Pong, Result, Welcome

__all__ = [
    "ClientEvent",
    "ClientProtocol",
    "ClientState",
    "Lost",
    "Ready",
    "Resolved",
    "SendFrame",
]


class ClientState(enum.Enum):
    #: hello sent, no welcome yet.
    GREETING = "greeting"
    READY = "ready"
    #: The server went silent or said it does not know us; calls fail fast until a new welcome.
    LOST = "lost"
    CLOSED = "closed"


@attrs.frozen
class SendFrame:
    frame: bytes


@attrs.frozen
class Resolved:
    """Call ``handle`` ended with ``value`` or ``error``."""

    handle: Any
    value: Any = None
    error: WireError | None = None


@attrs.frozen
class Ready:
    welcome: Welcome


@attrs.frozen
class Lost:
    """The server is lost; every call in flight was failed with ``error``."""

    error: WireError


ClientEvent = SendFrame | Resolved | Ready | Lost


class ClientProtocol:
    """Protocol state of one client connection."""

    #: Client limits before a welcome says otherwise.
    DEFAULT_HEARTBEAT = 1.0
    DEFAULT_PEER_TIMEOUT = 2.5
    DEFAULT_MAX_FRAME_BYTES = 8 * 1024 * 1024

    def __init__(self, *, name: str = "agent-actors", now: float) -> None:
        self.state = ClientState.GREETING
        self.name = name
        self.welcome: Welcome | None = None
        self.heartbeat = self.DEFAULT_HEARTBEAT
        self.peer_timeout = self.DEFAULT_PEER_TIMEOUT
        self.max_frame_bytes = self.DEFAULT_MAX_FRAME_BYTES
        self._pending: dict[int, Any] = {}
        #: Calls whose result value is handed over still encoded (a relay passes it on).
        self._encoded: set[int] = set()
        self._next_id = 1
        self._last_heard = now
        self._next_ping = self._beat_after(now)
        self._ping = encode(Ping())

    def hello(self, now: float) -> bytes:
        """The hello frame; send it first, and again to start over after a loss."""
        self._next_ping = self._beat_after(now)
        return encode(Hello(name=self.name))

    def _beat_after(self, now: float) -> float:
        """The first multiple of the heartbeat interval at least a quarter interval after
        ``now``: every client of a process pings on the same beats of its clock, so an idle
        process with many connections wakes once per interval, not once per connection."""
        beat = math.ceil(now / self.heartbeat) * self.heartbeat
        return beat if beat - now >= self.heartbeat / 4 else beat + self.heartbeat

    def start_call(
        self,
        handle: Any,
        endpoint: str,
        args: Any,
        *,
        deadline_ms: float | None = None,
        supersede: str | None = None,
        encoded_result: bool = False,
    ) -> tuple[int, bytes]:
        """Register a call and return ``(id, frame)``. With ``encoded_result`` its result
        value is resolved as the msgpack bytes the server sent, not decoded.

        Raises:
            PeerLostError: the server is lost (calls fail fast until it welcomes us again).
            UnavailableError: the client is closed.
            TooLargeError: the encoded call exceeds the server's frame limit.
        """
        if self.state is ClientState.LOST:
            raise PeerLostError("server is not answering (heartbeat bound passed)")
        if self.state is ClientState.CLOSED:
            raise UnavailableError("client is closed")
        call_id = self._next_id
        self._next_id += 1
        try:
            frame = encode_call(call_id, endpoint, args, deadline_ms, supersede)
        except LocalProtocolError as exc:
            raise ArgumentsInvalidError(str(exc)) from None
        if len(frame) > self.max_frame_bytes:
            raise TooLargeError(
                f"call of {len(frame)} bytes exceeds the limit of {self.max_frame_bytes} bytes",
                details={"limit": self.max_frame_bytes},
            )
        self._pending[call_id] = handle
        if encoded_result:
            self._encoded.add(call_id)
        return call_id, frame

    def abandon_call(self, call_id: int, reason: CancelReason) -> bytes | None:
        """The caller gave up on ``call_id``: forget it and return the cancel frame to send.

        Any result that arrives later is dropped. Returns ``None`` if the call already ended.
        """
        self._encoded.discard(call_id)
        if self._pending.pop(call_id, None) is None:
            return None
        return encode(Cancel(id=call_id, reason=reason))

    def cancel_frame(self, call_id: int, reason: CancelReason) -> bytes | None:
        """The cancel frame for ``call_id``, which stays tracked: its terminal frame is still
        resolved (a relay passes a cancel on and answers with the outcome, which may be a
        result). Returns ``None`` if the call already ended."""
        if call_id not in self._pending:
            return None
        return encode(Cancel(id=call_id, reason=reason))

    def forget_call(self, call_id: int) -> None:
        """Drop ``call_id`` without telling the server (it was never sent)."""
        self._encoded.discard(call_id)
        self._pending.pop(call_id, None)

    def receive_encoded(self, frame: bytes, now: float) -> tuple[Any, bytes] | None:
        """``frame`` read as the result of a call started with ``encoded_result``: its handle
        (``None`` if that call was given up) and the value still encoded, as :meth:`receive`
        would resolve it. ``None`` for any other frame, which is then :meth:`receive`'s to
        read. A relay's receive path takes this first: no event list, no event."""
        if not self._encoded or len(frame) > self.max_frame_bytes:
            return None
        split = split_result(frame)
        if split is None or split[0] not in self._encoded:
            return None
        self._last_heard = now
        call_id, value = split
        self._encoded.discard(call_id)
        return self._pending.pop(call_id, None), value

    def receive_value(self, frame: bytes, now: float) -> tuple[Any, Any] | None:
        """``frame`` read as a call's result laid out as the codec writes one, after
        :meth:`receive_encoded` did not take it: the call's handle (``None`` if the call was
        given up) and the decoded value, as :meth:`receive` would resolve it. ``None`` for any
        other frame, which :meth:`receive_decoded` then reads. Nearly every frame a client
        reads: one decode of the value, and no message, event list or event (about a tenth
        of a busy client's CPU per call)."""
        if len(frame) > self.max_frame_bytes:
            return None
        read = read_result(frame)
        if read is None:
            return None
        self._last_heard = now
        call_id, value = read
        return self._pending.pop(call_id, None), value

    def receive(self, frame: bytes, now: float) -> list[ClientEvent]:
        # receive_encoded takes every frame that read_result would take for a call whose
        # value is wanted still encoded, so the order keeps such calls' values encoded.
        result = self.receive_encoded(frame, now) or self.receive_value(frame, now)
        if result is not None:
            handle, value = result
            return [] if handle is None else [Resolved(handle, value=value)]
        return self.receive_decoded(frame, now)

    def receive_decoded(self, frame: bytes, now: float) -> list[ClientEvent]:
        """:meth:`receive` for a frame :meth:`receive_encoded` did not take."""
        self._last_heard = now
        try:
            message = decode(frame, max_frame_bytes=self.max_frame_bytes)
        except RemoteProtocolError:
            # A server that sends garbage is not one we can trust with our calls.
            return self.lose(PeerLostError("server sent an invalid frame"))
        match message:
            case Result():
                handle = self._pending.pop(message.id, None)
                return [] if handle is None else [Resolved(handle, value=message.value)]
            case Error(id=None):
                return self._connection_error(message)
            case Error():
                assert message.id is not None
                self._encoded.discard(message.id)
                handle = self._pending.pop(message.id, None)
                if handle is None:
                    return []
                return [Resolved(handle, error=error_from_wire(message))]
            case Ping():
                return [SendFrame(encode(Pong()))]
            case Pong():
                return []
            case Welcome():
                self.welcome = message
                self.heartbeat = message.heartbeat_ms / 1000
                self.peer_timeout = message.peer_timeout_ms / 1000
                self.max_frame_bytes = message.max_frame_bytes
                self._next_ping = min(self._next_ping, self._beat_after(now))
                self.state = ClientState.READY
                return [Ready(message)]
            case Bye():
                return self.lose(UnavailableError("server is shutting down"))
        return []

    def _connection_error(self, error: Error) -> list[ClientEvent]:
        if error.code == ErrorCode.PEER_LOST:
            # The server forgot us (it restarted, or timed us out): start over.
            return self.lose(error_from_wire(error))
        if error.code == ErrorCode.UNSUPPORTED_VERSION:
            return self.lose(error_from_wire(error))
        bad_id = error.details.get("id")
        if isinstance(bad_id, int) and bad_id in self._pending:
            self._encoded.discard(bad_id)
            return [Resolved(self._pending.pop(bad_id), error=error_from_wire(error))]
        return []

    def lose(self, error: WireError) -> list[ClientEvent]:
        if self.state is not ClientState.CLOSED:
            self.state = ClientState.LOST
        failed: list[ClientEvent] = [Resolved(h, error=error) for h in self._pending.values()]
        self._pending.clear()
        self._encoded.clear()
        return [*failed, Lost(error)]

    def tick(self, now: float, *, verified_at: float | None = None) -> list[ClientEvent]:
        """Advance timers: ping when due (and re-hello while lost); detect a silent server."""
        events: list[ClientEvent] = []
        if self.state is ClientState.CLOSED:
            return events
        heard_up_to = now if verified_at is None else min(now, verified_at)
        if self.state is ClientState.READY and heard_up_to - self._last_heard > self.peer_timeout:
            events.extend(
                self.lose(
                    PeerLostError(
                        f"server silent for more than {self.peer_timeout:g} s (heartbeat bound)"
                    )
                )
            )
        if now >= self._next_ping:
            self._next_ping = self._beat_after(now)
            frame = self._ping if self.state is ClientState.READY else self.hello(now)
            events.append(SendFrame(frame))
        return events

    def next_due(self) -> float:
        """When :meth:`tick` next has work: the next ping (or hello), or the server's silence
        bound. A driver may sleep until then instead of polling."""
        if self.state is ClientState.CLOSED:
            return math.inf
        if self.state is ClientState.READY:
            return min(self._next_ping, self._last_heard + self.peer_timeout)
        return self._next_ping

    def close(self) -> list[ClientEvent]:
        """Fail every call in flight and return the bye to send."""
        events = self.lose(UnavailableError("client closed"))
        self.state = ClientState.CLOSED
        return [*events, SendFrame(encode(Bye()))]

    @property
    def pending_calls(self) -> int:
        return len(self._pending)

    @property
    def calls_started(self) -> int:
        """Calls started since this protocol was made (ids are handed out in order)."""
        return self._next_id - 1

    @property
    def heard_recently(self) -> bool:
        return self.state is ClientState.READY
