"""The sans-IO server machine: greeting, admission, cancellation, supersede, heartbeats."""

from __future__ import annotations

import math

import msgpack
import pytest

from wire import (
    Bye,
    Call,
    Cancel,
    CancelReason,
    Error,
    ErrorCode,
    Hello,
    LocalProtocolError,
    Ping,
    Pong,
    Result,
    ServerLimits,
    ServerProtocol,
    Welcome,
    decode,
    encode,
)
from wire._server_events import (
    CancelCall,
    Interrupted,
    PeerDropped,
    PeerGreeted,
    Send,
    ServerEvent,
    StartCall,
)

PEER = b"p1"


def sent(events: list[ServerEvent]) -> list[object]:
    return [decode(e.frame, max_frame_bytes=1 << 24) for e in events if isinstance(e, Send)]


def started(events: list[ServerEvent]) -> list[StartCall]:
    return [e for e in events if isinstance(e, StartCall)]


@pytest.fixture
def proto() -> ServerProtocol:
    server = ServerProtocol(ServerLimits(max_in_flight=3, heartbeat=1.0, peer_timeout=2.5))
    events = server.receive(PEER, encode(Hello(name="t")), now=0.0)
    assert isinstance(events[0], PeerGreeted)
    return server


def call(proto: ServerProtocol, call_id: int, now: float = 0.0, **kw: object) -> list[ServerEvent]:
    return proto.receive(PEER, encode(Call(id=call_id, endpoint="a/b", **kw)), now)  # type: ignore[arg-type]


class TestGreeting:
    def test_welcome_announces_limits(self) -> None:
        """hello is answered with a welcome carrying the configured limits."""
        server = ServerProtocol(ServerLimits(heartbeat=0.5, peer_timeout=2.0, max_in_flight=7))
        [welcome] = sent(server.receive(PEER, encode(Hello()), now=0.0))
        assert welcome == Welcome(
            name="agent-actors",
            heartbeat_ms=500,
            peer_timeout_ms=2000,
            max_frame_bytes=8 * 1024 * 1024,
            max_in_flight=7,
        )

    def test_no_common_version(self) -> None:
        """A hello without version 1 gets unsupported-version and no session."""
        server = ServerProtocol()
        [reply] = sent(server.receive(PEER, encode(Hello(versions=(7, 9))), now=0.0))
        assert isinstance(reply, Error)
        assert (reply.id, reply.code) == (None, ErrorCode.UNSUPPORTED_VERSION)
        assert reply.details == {"supported": [1]}
        assert server.peer_count == 0

    def test_call_before_hello(self) -> None:
        """A stranger's call is refused as peer-lost, naming the call id."""
        server = ServerProtocol()
        [reply] = sent(server.receive(PEER, encode(Call(id=4, endpoint="a/b")), now=0.0))
        assert reply == Error(
            id=None, code="peer-lost", message="unknown peer: send hello first", details={"id": 4}
        )

    def test_re_hello_ends_each_abandoned_call_before_the_new_welcome(
        self, proto: ServerProtocol
    ) -> None:
        """A second hello abandons the peer's calls, but each gets one peer-lost frame, sent
        before the new welcome; the frames already queued for the peer are kept."""
        [first] = started(call(proto, 1))
        [second] = started(call(proto, 2))
        events = proto.receive(PEER, encode(Hello(name="again")), now=1.0)
        dropped = [e for e in events if isinstance(e, PeerDropped)]
        assert dropped == [PeerDropped(PEER, "re-hello", discard_frames=False)]
        assert [e.record for e in events if isinstance(e, CancelCall)] == [
            first.record,
            second.record,
        ]
        frames = sent(events)
        assert [(f.id, f.code, f.details) for f in frames[:2]] == [  # type: ignore[attr-defined]
            (1, "peer-lost", {"reason": "re-hello"}),
            (2, "peer-lost", {"reason": "re-hello"}),
        ]
        assert isinstance(frames[2], Welcome)
        # The abandoned handlers' own ends send nothing: their one frame has gone out.
        assert proto.finish_call(first.record, Interrupted.CANCELLED) is None
        assert proto.finish_call(second.record, Result(id=2, value=None)) is None
        # The new session may use the same ids again.
        assert len(started(call(proto, 1, now=1.0))) == 1

    @pytest.mark.parametrize("message", [Cancel(id=1), Bye(), Pong()])
    def test_harmless_frames_from_strangers_are_ignored(self, message: object) -> None:
        """cancel, bye and pong from an unknown peer need no answer."""
        assert ServerProtocol().receive(PEER, encode(message), now=0.0) == []  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "message",
        [
            Result(id=1),
            Welcome(heartbeat_ms=1, peer_timeout_ms=2, max_frame_bytes=3, max_in_flight=4),
        ],
    )
    def test_server_only_messages_from_a_client(
        self, proto: ServerProtocol, message: object
    ) -> None:
        """A client sending a server's message kind gets bad-request."""
        [reply] = sent(proto.receive(PEER, encode(message), now=0.0))  # type: ignore[arg-type]
        assert isinstance(reply, Error) and reply.code == ErrorCode.BAD_REQUEST

    def test_ping_is_answered(self, proto: ServerProtocol) -> None:
        """A ping gets a pong."""
        assert sent(proto.receive(PEER, encode(Ping()), now=0.0)) == [Pong()]

    def test_garbage_keeps_the_peer(self, proto: ServerProtocol) -> None:
        """An undecodable frame is answered and the peer stays connected."""
        [reply] = sent(proto.receive(PEER, b"\xc1", now=0.0))
        assert isinstance(reply, Error) and reply.code == ErrorCode.BAD_REQUEST
        assert proto.peer_count == 1


class TestCalls:
    def test_call_starts_a_handler(self, proto: ServerProtocol) -> None:
        """An admitted call asks the driver to start its handler."""
        [start] = started(call(proto, 1))
        assert start.record.call.id == 1
        assert proto.in_flight == 1

    def test_result_is_the_single_terminal_frame(self, proto: ServerProtocol) -> None:
        """finish_call yields the result once; a second finish is a local error."""
        [start] = started(call(proto, 1))
        proto.call_started(start.record)
        frame = proto.finish_call(start.record, Result(id=1, value="v"))
        assert frame is not None and decode(frame, max_frame_bytes=1 << 20) == Result(
            id=1, value="v"
        )
        assert proto.in_flight == 0
        with pytest.raises(LocalProtocolError):
            proto.finish_call(start.record, Result(id=1, value="again"))

    def test_duplicate_id_in_flight(self, proto: ServerProtocol) -> None:
        """Reusing an id still in flight is a connection-level bad-request naming the id."""
        call(proto, 1)
        [reply] = sent(call(proto, 1))
        assert isinstance(reply, Error)
        assert (reply.id, reply.code, reply.details) == (None, "bad-request", {"id": 1})

    def test_in_flight_limit(self, proto: ServerProtocol) -> None:
        """A call beyond maxInFlight is answered overloaded and nothing starts."""
        for call_id in (1, 2, 3):
            call(proto, call_id)
        events = call(proto, 4)
        assert started(events) == []
        [reply] = sent(events)
        assert isinstance(reply, Error)
        assert (reply.id, reply.code, reply.details) == (4, "overloaded", {"limit": 3})

    def test_passed_deadline(self, proto: ServerProtocol) -> None:
        """A call whose budget is already spent is refused without starting."""
        events = call(proto, 1, deadline_ms=0.0)
        assert started(events) == []
        [reply] = sent(events)
        assert isinstance(reply, Error) and reply.code == ErrorCode.DEADLINE_EXCEEDED

    def test_deadline_is_made_absolute(self, proto: ServerProtocol) -> None:
        """deadlineMs is a budget from arrival on the server's clock."""
        [start] = started(call(proto, 1, now=10.0, deadline_ms=250.0))
        assert start.record.deadline == pytest.approx(10.25)

    @pytest.mark.parametrize(("admitted", "state"), [(False, "queued"), (True, "running")])
    def test_cancel_says_where_the_call_was(
        self, proto: ServerProtocol, admitted: bool, state: str
    ) -> None:
        """A cancelled call's error names the state the cancel found it in, and the reason."""
        [start] = started(call(proto, 1))
        if admitted:
            proto.call_started(start.record)
        events = proto.receive(PEER, encode(Cancel(id=1)), now=0.0)
        assert events == [CancelCall(start.record)]
        frame = proto.finish_call(start.record, Interrupted.CANCELLED)
        assert frame is not None
        assert decode(frame, max_frame_bytes=1 << 20) == Error(
            id=1,
            code="cancelled",
            message=f"call cancelled while {state} (caller)",
            details={"state": state, "reason": "caller"},
        )

    def test_second_cancel_is_idempotent(self, proto: ServerProtocol) -> None:
        """Cancelling twice asks the driver to cancel once."""
        call(proto, 1)
        assert len(proto.receive(PEER, encode(Cancel(id=1)), now=0.0)) == 1
        assert proto.receive(PEER, encode(Cancel(id=1)), now=0.0) == []

    def test_cancel_after_finish_is_ignored(self, proto: ServerProtocol) -> None:
        """A cancel that crossed the terminal frame changes nothing."""
        [start] = started(call(proto, 1))
        proto.call_started(start.record)
        proto.finish_call(start.record, Result(id=1))
        assert proto.receive(PEER, encode(Cancel(id=1)), now=0.0) == []

    def test_result_after_cancel_is_still_truthful(self, proto: ServerProtocol) -> None:
        """A handler that finished despite a late cancel reports its result, not a lie."""
        [start] = started(call(proto, 1))
        proto.call_started(start.record)
        proto.receive(PEER, encode(Cancel(id=1)), now=0.0)
        frame = proto.finish_call(start.record, Result(id=1, value=5))
        assert frame is not None and decode(frame, max_frame_bytes=1 << 20) == Result(id=1, value=5)

    def test_deadline_interruption(self, proto: ServerProtocol) -> None:
        """A handler stopped by its deadline ends deadline-exceeded with its state."""
        [start] = started(call(proto, 1, deadline_ms=5.0))
        proto.call_started(start.record)
        frame = proto.finish_call(start.record, Interrupted.DEADLINE)
        assert frame is not None
        reply = decode(frame, max_frame_bytes=1 << 20)
        assert isinstance(reply, Error)
        assert (reply.code, reply.details) == (
            "deadline-exceeded",
            {"state": "running", "reason": "deadline"},
        )

    def test_oversized_reply_becomes_too_large(self) -> None:
        """A result over the frame limit is replaced by a too-large error for that call."""
        server = ServerProtocol(ServerLimits(max_frame_bytes=100))
        server.receive(PEER, encode(Hello()), now=0.0)
        [start] = started(server.receive(PEER, encode(Call(id=1, endpoint="a/b")), now=0.0))
        frame = server.finish_call(start.record, Result(id=1, value="x" * 500))
        assert frame is not None
        assert msgpack.unpackb(frame)["code"] == "too-large"

    def test_unencodable_result_becomes_internal(self, proto: ServerProtocol) -> None:
        """A result msgpack cannot carry is an internal error for that call."""
        [start] = started(call(proto, 1))
        frame = proto.finish_call(start.record, Result(id=1, value=object()))
        assert frame is not None and msgpack.unpackb(frame)["code"] == "internal"


class TestSupersede:
    def test_newer_call_cancels_older_in_the_same_step(self, proto: ServerProtocol) -> None:
        """A call with a supersede key cancels the older call with that key, reason superseded."""
        [old] = started(call(proto, 1, supersede="k"))
        proto.call_started(old.record)
        events = call(proto, 2, supersede="k")
        assert events[0] == CancelCall(old.record)
        assert old.record.cancel_reason is CancelReason.SUPERSEDED
        assert started(events)[0].record.call.id == 2
        frame = proto.finish_call(old.record, Interrupted.CANCELLED)
        assert frame is not None
        assert msgpack.unpackb(frame)["details"] == {"state": "running", "reason": "superseded"}

    def test_different_keys_do_not_interfere(self, proto: ServerProtocol) -> None:
        """Only calls with the same key supersede each other."""
        call(proto, 1, supersede="a")
        assert not any(isinstance(e, CancelCall) for e in call(proto, 2, supersede="b"))

    def test_finished_call_is_not_superseded(self, proto: ServerProtocol) -> None:
        """A key whose call already ended cancels nothing."""
        [old] = started(call(proto, 1, supersede="k"))
        proto.finish_call(old.record, Result(id=1))
        assert not any(isinstance(e, CancelCall) for e in call(proto, 2, supersede="k"))


class TestLiveness:
    def test_pings_when_due(self, proto: ServerProtocol) -> None:
        """A peer quiet for one and a half heartbeat intervals is pinged, then once per
        interval while it stays quiet."""
        assert proto.tick(1.0) == []
        assert sent(proto.tick(1.5)) == [Ping()]
        assert proto.tick(2.0) == []

    def test_silent_peer_is_dropped_and_its_calls_cancelled(self, proto: ServerProtocol) -> None:
        """A peer silent past peerTimeout is dropped; its calls are cancelled with peer-lost and
        their terminal frames are not sent."""
        [start] = started(call(proto, 1))
        events = proto.tick(2.6)
        assert PeerDropped(PEER, "heartbeat timeout") in events
        assert CancelCall(start.record) in events
        assert start.record.cancel_reason is CancelReason.PEER_LOST
        assert proto.finish_call(start.record, Interrupted.CANCELLED) is None
        assert proto.peer_count == 0 and proto.in_flight == 0

    def test_any_frame_keeps_a_peer_alive(self, proto: ServerProtocol) -> None:
        """Traffic resets the silence clock."""
        proto.receive(PEER, encode(Pong()), now=2.0)
        assert not any(isinstance(e, PeerDropped) for e in proto.tick(4.0))

    def test_bye_cancels_calls(self, proto: ServerProtocol) -> None:
        """A client's bye cancels its calls at once."""
        [start] = started(call(proto, 1))
        events = proto.receive(PEER, encode(Bye()), now=0.0)
        assert CancelCall(start.record) in events
        assert proto.peer_count == 0

    def test_shutdown_cancels_and_still_replies(self, proto: ServerProtocol) -> None:
        """Shutdown cancels every call with reason shutdown; terminal frames still go out."""
        [start] = started(call(proto, 1))
        proto.call_started(start.record)
        assert proto.shutdown() == [CancelCall(start.record)]
        frame = proto.finish_call(start.record, Interrupted.CANCELLED)
        assert frame is not None
        assert msgpack.unpackb(frame)["details"] == {"state": "running", "reason": "shutdown"}
        assert [s.peer for s in proto.goodbyes()] == [PEER]


def test_bad_frame_naming_a_live_call_does_not_end_it(proto: ServerProtocol) -> None:
    """A malformed frame that names an in-flight call gets a connection-level error naming
    the id, so the call still has exactly one terminal frame to come."""
    [start] = started(call(proto, 1))
    bad_cancel = msgpack.packb({"type": "cancel", "id": 1, "reason": "bored"})
    [reply] = sent(proto.receive(PEER, bad_cancel, now=0.0))
    assert isinstance(reply, Error)
    assert (reply.id, reply.code, reply.details) == (None, "bad-request", {"id": 1})
    frame = proto.finish_call(start.record, Result(id=1, value="only terminal"))
    assert frame is not None


def test_peer_silence_counts_only_up_to_the_last_verified_read(proto: ServerProtocol) -> None:
    """A server that could not read its socket does not drop peers for that gap."""
    assert not any(isinstance(e, PeerDropped) for e in proto.tick(10.0, verified_at=1.0))
    assert PeerDropped(PEER, "heartbeat timeout") in proto.tick(10.0, verified_at=2.6)


def test_next_due_is_the_earliest_ping_or_silence_bound(proto: ServerProtocol) -> None:
    """The driver may sleep until ``next_due``: the next ping, then the peer's silence bound;
    with no peers there is nothing to wake for."""
    assert proto.next_due() == 1.5
    assert sent(proto.tick(1.5)) == [Ping()]
    assert proto.next_due() == 2.5  # heard last at 0.0, timeout 2.5 (and the next ping)
    assert PeerDropped(PEER, "heartbeat timeout") in proto.tick(2.6)
    assert proto.next_due() == math.inf


def test_a_peer_heard_within_the_interval_is_not_pinged(proto: ServerProtocol) -> None:
    """The server pings only a peer it has not heard from for longer than an interval: a
    client's own ping (answered with a pong) already shows both sides alive, so a client that
    pings every interval is never pinged, even when its ping lands on the server's beat."""
    assert sent(proto.receive(PEER, encode(Ping()), now=0.9)) == [Pong()]
    assert sent(proto.tick(1.0)) == []
    assert proto.next_due() == 2.4
    for beat in (1.9, 2.9, 3.9):
        assert sent(proto.tick(beat)) == []
        assert sent(proto.receive(PEER, encode(Ping()), now=beat)) == [Pong()]
    assert sent(proto.tick(5.4)) == [Ping()]  # silent since 3.9


def test_receive_call_returns_an_admitted_call_as_its_record(proto: ServerProtocol) -> None:
    """``receive_call`` hands a call admitted with nothing else to do back as its record (what
    ``receive`` wraps in a StartCall), and everything else as the events ``receive`` gives: a
    supersede's cancel of the older call with its start, a refusal, a ping's pong."""
    frame = encode(Call(id=1, endpoint="a/b", args={"x": 1}))
    record = proto.receive_call(PEER, frame, 0.0)
    assert not isinstance(record, list)
    assert (record.call.id, record.call.args, record.peer) == (1, {"x": 1}, PEER)
    assert proto.in_flight == 1
    [older] = started(call(proto, 2, supersede="k"))
    events = proto.receive_call(PEER, encode(Call(id=3, endpoint="a/b", supersede="k")), 0.0)
    assert isinstance(events, list)
    assert [type(e) for e in events] == [CancelCall, StartCall]
    assert events[0].record is older.record  # type: ignore[union-attr]
    refused = proto.receive_call(PEER, encode(Call(id=1, endpoint="a/b")), 0.0)
    assert isinstance(refused, list)
    assert [type(e) for e in refused] == [Send]  # id 1 is in flight: a bad request
    assert proto.receive_call(PEER, encode(Ping()), 0.0) == [Send(PEER, encode(Pong()))]
