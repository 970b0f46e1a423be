"""The server half of protocol v1, sans-IO: frames and clock readings in, events out.

One :class:`ServerProtocol` serves every peer of a ROUTER socket, keyed by the peer's routing
identity (h2's many-streams-per-connection shape: one record per call). It never touches a
socket, a clock or trio: the driver passes ``now`` in, runs handlers when told to
(:class:`StartCall`), cancels them when told to (:class:`CancelCall`), sends what it is handed
(:class:`Send`), and reports each handler's end with :meth:`ServerProtocol.finish_call`, which
returns the call's single terminal frame.
"""

from __future__ import annotations

import math

import attrs

from wire._codec import decode, encode, encode_result
from wire._codec_relay import encode_encoded_result
from wire._errors import CancelReason, ErrorCode, LocalProtocolError, RemoteProtocolError
from wire._limits import ArgumentLimits, check_arguments, is_flat
from wire._limits import ServerLimits as ServerLimits
from wire._messages import (
    PROTOCOL_VERSION,
    Bye,
    Call,
    Cancel,
    Error,
    Hello,
    Message,
    Ping,
    Pong,
    Result,
    Welcome,
)
from wire._server_events import (
    CallRecord,
    CancelCall,
    EncodedResult,
    Interrupted,
    PeerDropped,
    PeerGreeted,
    Send,
    ServerEvent,
    StartCall,
)
from wire._state import CallInput, CallState, next_call_state

__all__ = ["ServerLimits", "ServerProtocol", "cancelled_error", "deadline_error"]

#: Heartbeats of silence after which the server pings a peer (a client pings every one).
_QUIET_HEARTBEATS = 1.5


@attrs.define(eq=False)
class _Peer:
    identity: bytes
    name: str
    last_seen: float
    next_ping: float
    calls: dict[int, CallRecord] = attrs.field(factory=dict)
    #: supersede key → the newest call that carried it.
    latest: dict[str, CallRecord] = attrs.field(factory=dict)


class ServerProtocol:
    """Protocol state for every peer of one server socket."""

    def __init__(self, limits: ServerLimits | None = None) -> None:
        self.limits = limits or ServerLimits()
        self._peers: dict[bytes, _Peer] = {}
        self._in_flight = 0
        #: Peers forgotten since start, by the reason they were dropped.
        self._gone: dict[str, int] = {}
        self._arg_limits = ArgumentLimits(
            max_depth=self.limits.max_arg_depth, max_items=self.limits.max_arg_items
        )
        self._welcome = encode(
            Welcome(
                name=self.limits.name,
                heartbeat_ms=round(self.limits.heartbeat * 1000),
                peer_timeout_ms=round(self.limits.peer_timeout * 1000),
                max_frame_bytes=self.limits.max_frame_bytes,
                max_in_flight=self.limits.max_in_flight,
            )
        )
        self._ping = encode(Ping())
        self._pong = encode(Pong())
        self._bye = encode(Bye())

    # -- input from peers -------------------------------------------------------------------

    def receive(self, peer: bytes, frame: bytes, now: float) -> list[ServerEvent]:
        """Process one frame from ``peer``."""
        received = self.receive_call(peer, frame, now)
        return [StartCall(received)] if isinstance(received, CallRecord) else received

    def receive_call(self, peer: bytes, frame: bytes, now: float) -> CallRecord | list[ServerEvent]:
        """:meth:`receive`, but a call admitted with nothing else to do comes back as its
        record, to be started as a :class:`StartCall` would be: nearly every frame a busy
        server reads, spared an event and a list."""
        known = self._peers.get(peer)
        if known is not None:
            known.last_seen = now
        try:
            message = decode(frame, max_frame_bytes=self.limits.max_frame_bytes)
        except RemoteProtocolError as exc:
            if exc.reply is None:
                return []
            rejection = encode(self._scoped_rejection(known, exc.reply))
            return [Send(peer, rejection, droppable=known is None)]
        if known is None:
            return self._receive_from_stranger(peer, message, now)
        match message:
            case Call():
                return self._admit(known, message, now)
            case Cancel():
                record = known.calls.get(message.id)
                # A cancel for a call that already ended crossed its terminal frame: ignore it.
                return self._cancel(record, message.reason) if record is not None else []
            case Ping():
                return [Send(peer, self._pong)]
            case Pong():
                return []
            case Hello():
                # The client starts over: each abandoned call still gets its terminal frame
                # (peer-lost), before the new welcome so none passes for the new session's.
                abandoned = sorted(known.calls)
                events = self._drop(known, "re-hello", discard_frames=False)
                notices = [Send(peer, encode(_abandoned(call_id))) for call_id in abandoned]
                return [*events, *notices, *self._greet(peer, message, now)]
            case Bye():
                return self._drop(known, "bye")
        return [Send(peer, encode(_unexpected(message)))]

    def _scoped_rejection(self, peer: _Peer | None, reply: Error) -> Error:
        """A bad frame that names a call still in flight must not end that call: its error
        becomes connection-level (``id`` nil, ``details.id`` naming it), so the call keeps its
        single terminal frame."""
        if peer is None or reply.id is None or reply.id not in peer.calls:
            return reply
        return Error(
            id=None,
            code=reply.code,
            message=reply.message,
            details={**reply.details, "id": reply.id},
        )

    def _receive_from_stranger(
        self, peer: bytes, message: Message, now: float
    ) -> list[ServerEvent]:
        match message:
            case Hello():
                return self._greet(peer, message, now)
            case Cancel() | Bye() | Pong() | Error():
                return []
            case Call() | Ping():
                details = {"id": message.id} if isinstance(message, Call) else {}
                reply = Error.of(
                    None, ErrorCode.PEER_LOST, "unknown peer: send hello first", **details
                )
                return [Send(peer, encode(reply), droppable=True)]
        return [Send(peer, encode(_unexpected(message)), droppable=True)]

    def _greet(self, peer: bytes, hello: Hello, now: float) -> list[ServerEvent]:
        if PROTOCOL_VERSION not in hello.versions:
            reply = Error.of(
                None,
                ErrorCode.UNSUPPORTED_VERSION,
                f"no common protocol version: server speaks {[PROTOCOL_VERSION]}, "
                f"client offered {list(hello.versions)}",
                supported=[PROTOCOL_VERSION],
            )
            return [Send(peer, encode(reply), droppable=True)]
        self._peers[peer] = _Peer(
            identity=peer, name=hello.name, last_seen=now, next_ping=now + self.limits.heartbeat
        )
        return [PeerGreeted(peer, hello), Send(peer, self._welcome)]

    def _admit(self, peer: _Peer, call: Call, now: float) -> CallRecord | list[ServerEvent]:
        """The record of ``call`` when it is admitted with nothing else to do, else the
        events (a refusal; a supersede's cancel of the older call, then its start)."""
        if call.id in peer.calls:
            reply = Error.of(
                None, ErrorCode.BAD_REQUEST, f"call id {call.id} is already in flight", id=call.id
            )
            return [Send(peer.identity, encode(reply))]
        limits = self.limits
        if len(peer.calls) >= limits.max_in_flight or self._in_flight >= limits.max_in_flight_total:
            reply = Error.of(
                call.id,
                ErrorCode.OVERLOADED,
                "too many calls in flight",
                limit=limits.max_in_flight,
            )
            return [Send(peer.identity, encode(reply))]
        args = call.args
        exceeded = (
            check_arguments(args, self._arg_limits)
            if args and (len(args) > limits.max_arg_items or not is_flat(args))
            else None
        )
        if exceeded is not None:
            # Refused before admission (docs/protocol.md § 11.4): never in flight, never run.
            where = f"{exceeded.path}: " if exceeded.path else ""
            reply = Error.of(
                call.id,
                ErrorCode.ARGUMENTS_INVALID,
                f"{call.endpoint}: {where}{exceeded.problem}",
                path=exceeded.path,
                limit=exceeded.limit,
            )
            return [Send(peer.identity, encode(reply))]
        deadline = None
        if call.deadline_ms is not None:
            if call.deadline_ms <= 0:
                reply = Error.of(
                    call.id, ErrorCode.DEADLINE_EXCEEDED, "deadline passed before the call arrived"
                )
                return [Send(peer.identity, encode(reply))]
            deadline = now + call.deadline_ms / 1000
        record = CallRecord(peer=peer.identity, call=call, deadline=deadline)
        peer.calls[call.id] = record
        self._in_flight += 1
        if call.supersede is None:
            return record
        events: list[ServerEvent] = []
        older = peer.latest.get(call.supersede)
        if older is not None:
            events.extend(self._cancel(older, CancelReason.SUPERSEDED))
        peer.latest[call.supersede] = record
        events.append(StartCall(record))
        return events

    def _cancel(self, record: CallRecord, reason: CancelReason) -> list[ServerEvent]:
        if record.state in (CallState.CANCELLING_QUEUED, CallState.CANCELLING_RUNNING):
            return []
        record.state = next_call_state(record.state, CallInput.CANCEL)
        record.cancel_reason = reason
        return [CancelCall(record)]

    # -- input from the driver --------------------------------------------------------------

    def call_started(self, record: CallRecord) -> None:
        """The handler of ``record`` was admitted and is now executing."""
        record.state = next_call_state(record.state, CallInput.START)

    def finish_call(
        self, record: CallRecord, outcome: Result | Error | EncodedResult | Interrupted
    ) -> bytes | None:
        """The handler of ``record`` ended; return its terminal frame (``None``: peer gone).

        Exactly one call of this per record is valid; a second raises ``LocalProtocolError``.
        """
        state_at_end = record.state
        record.state = next_call_state(record.state, CallInput.FINISH)
        peer = self._peers.get(record.peer)
        if peer is not None and peer.calls.get(record.call.id) is record:
            del peer.calls[record.call.id]
            key = record.call.supersede
            if key is not None and peer.latest.get(key) is record:
                del peer.latest[key]
            self._in_flight -= 1
        else:
            # The peer was dropped (its calls were cancelled with reason peer-lost): nobody is
            # left to read a terminal frame.
            return None
        reply = (
            outcome
            if not isinstance(outcome, Interrupted)
            else _interruption(record, state_at_end, outcome)
        )
        frame = _encode_reply(reply)
        if len(frame) > self.limits.max_frame_bytes:
            frame = encode(
                Error.of(
                    record.call.id,
                    ErrorCode.TOO_LARGE,
                    f"reply of {len(frame)} bytes exceeds the limit of "
                    f"{self.limits.max_frame_bytes} bytes",
                    limit=self.limits.max_frame_bytes,
                )
            )
        return frame

    def tick(self, now: float, *, verified_at: float | None = None) -> list[ServerEvent]:
        """Advance timers: ping due peers quiet for an interval, drop peers silent too long."""
        events: list[ServerEvent] = []
        heard_up_to = now if verified_at is None else min(now, verified_at)
        for peer in list(self._peers.values()):
            if heard_up_to - peer.last_seen > self.limits.peer_timeout:
                events.extend(self._drop(peer, "heartbeat timeout"))
            elif now >= self._ping_due(peer):
                peer.next_ping = now + self.limits.heartbeat
                events.append(Send(peer.identity, self._ping))
        return events

    def _ping_due(self, peer: _Peer) -> float:
        # A peer that pings gets a pong, which tells it we are alive: a ping of ours on the
        # same beat would double the idle traffic (and the wake-ups) for nothing.
        return max(peer.next_ping, peer.last_seen + self.limits.heartbeat * _QUIET_HEARTBEATS)

    def next_due(self) -> float:
        """When :meth:`tick` next has work (a ping or a silence bound; ``inf``: no peers)."""
        timeout = self.limits.peer_timeout
        return min(
            (min(self._ping_due(p), p.last_seen + timeout) for p in self._peers.values()),
            default=math.inf,
        )

    def peer_unreachable(self, peer: bytes) -> list[ServerEvent]:
        """The transport could not deliver to ``peer`` (it disconnected)."""
        known = self._peers.get(peer)
        return self._drop(known, "unreachable") if known is not None else []

    def drop_peer(self, peer: bytes, reason: str) -> list[ServerEvent]:
        """Forget ``peer`` (e.g. it stopped reading), cancelling its calls."""
        known = self._peers.get(peer)
        return self._drop(known, reason) if known is not None else []

    def shutdown(self) -> list[ServerEvent]:
        """Cancel every call in flight with reason ``shutdown``; terminal frames still go out."""
        events: list[ServerEvent] = []
        for peer in self._peers.values():
            for record in list(peer.calls.values()):
                events.extend(self._cancel(record, CancelReason.SHUTDOWN))
        return events

    def goodbyes(self) -> list[Send]:
        """A bye for every peer; send after the last terminal frame of a shutdown."""
        return [Send(identity, self._bye) for identity in self._peers]

    def _drop(self, peer: _Peer, reason: str, *, discard_frames: bool = True) -> list[ServerEvent]:
        del self._peers[peer.identity]
        self._gone[reason] = self._gone.get(reason, 0) + 1
        events: list[ServerEvent] = [PeerDropped(peer.identity, reason, discard_frames)]
        for record in peer.calls.values():
            self._in_flight -= 1
            events.extend(self._cancel(record, CancelReason.PEER_LOST))
        return events

    # -- introspection ----------------------------------------------------------------------

    def is_live(self, record: CallRecord) -> bool:
        return record.state is not CallState.DONE

    @property
    def peer_count(self) -> int:
        return len(self._peers)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def peers_gone(self) -> dict[str, int]:
        """Peers forgotten since start, by reason: ``bye``, ``heartbeat timeout``, ``not
        reading``, ``unreachable``, ``re-hello`` (the peer started over), or the driver's own."""
        return dict(self._gone)

    def calls_by_state(self) -> dict[str, int]:
        counts = {state.value: 0 for state in CallState if state is not CallState.DONE}
        for peer in self._peers.values():
            for record in peer.calls.values():
                counts[record.state.value] += 1
        return counts


#: Result values that cannot hold a map key, so their encoding needs no second look.
_SCALARS = frozenset((bytes, str, int, float, bool, type(None)))


def _encode_reply(reply: Result | Error | EncodedResult) -> bytes:
    """Encode a terminal frame; a result the client could not decode becomes ``internal``.

    msgpack writes a non-string map key (forbidden by ``docs/protocol.md`` § 2.1), and the
    client's strict decoder would reject the frame and the connection with it. So a result with
    containers is decoded once more with the client's rules; failing that, only this call fails
    (§ 5.3 step 9)."""
    if isinstance(reply, EncodedResult):
        # Checked where it was encoded: the owner's server ran this function on it.
        return encode_encoded_result(reply.id, reply.value)
    try:
        if type(reply) is Result and type(reply.value) in _SCALARS:
            return encode_result(reply.id, reply.value)
        frame = encode(reply)
        if isinstance(reply, Result):
            decode(frame, max_frame_bytes=len(frame))
        return frame
    except LocalProtocolError as exc:
        reason = str(exc)
    except RemoteProtocolError as exc:
        reason = f"cannot encode result: {exc.reply.message if exc.reply else exc}"
    return encode(Error.of(reply.id, ErrorCode.INTERNAL, reason))


def cancelled_error(call_id: int, stage: str, reason: CancelReason) -> Error:
    """The ``cancelled`` frame of a call stopped while ``stage`` (``queued``/``running``)."""
    return Error.of(
        call_id,
        ErrorCode.CANCELLED,
        f"call cancelled while {stage} ({reason.value})",
        state=stage,
        reason=reason.value,
    )


def deadline_error(call_id: int, stage: str) -> Error:
    """The ``deadline-exceeded`` frame of a call whose deadline passed while ``stage``."""
    return Error.of(
        call_id,
        ErrorCode.DEADLINE_EXCEEDED,
        f"deadline exceeded while {stage}",
        state=stage,
        reason=CancelReason.DEADLINE.value,
    )


def _interruption(record: CallRecord, state: CallState, how: Interrupted) -> Error:
    call_id = record.call.id
    if state is CallState.CANCELLING_QUEUED or state is CallState.CANCELLING_RUNNING:
        stage = "queued" if state is CallState.CANCELLING_QUEUED else "running"
        return cancelled_error(call_id, stage, record.cancel_reason or CancelReason.CALLER)
    stage = "queued" if state is CallState.QUEUED else "running"
    if how is Interrupted.DEADLINE:
        return deadline_error(call_id, stage)
    # Cancelled without a cancel request: the server's own scope ended the handler.
    return cancelled_error(call_id, stage, CancelReason.SHUTDOWN)


def _abandoned(call_id: int) -> Error:
    return Error.of(
        call_id,
        ErrorCode.PEER_LOST,
        "call abandoned: the client said hello again before it ended",
        reason="re-hello",
    )


def _unexpected(message: Message) -> Error:
    return Error.of(None, ErrorCode.BAD_REQUEST, f"a client may not send {message.KIND}")
