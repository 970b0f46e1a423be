"""The sans-IO client machine, driven against the real server machine (ProtocolPair)."""

from __future__ import annotations

import math

import pytest

from wire import (
    Bye,
    CallCancelledError,
    Cancel,
    CancelReason,
    Error,
    PeerLostError,
    Result,
    SessionReferenceError,
    TooLargeError,
    UnavailableError,
    decode,
    encode,
)
from wire._client_protocol import ClientState, Lost, Ready, Resolved, SendFrame
from wire._server_events import StartCall
from wire.testing import ProtocolPair


@pytest.fixture
def pair() -> ProtocolPair:
    pair = ProtocolPair()
    [ready] = pair.greet()
    assert isinstance(ready, Ready)
    return pair


def test_welcome_sets_limits(pair: ProtocolPair) -> None:
    """The client adopts the server's heartbeat, timeout and frame limit."""
    assert pair.client.state is ClientState.READY
    assert (pair.client.heartbeat, pair.client.peer_timeout) == (1.0, 2.5)


def test_call_round_trip(pair: ProtocolPair) -> None:
    """A call reaches the server and its result resolves the caller's handle."""
    call_id, frame = pair.client.start_call("h1", "a/b", {"x": 1})
    [start] = [e for e in pair.to_server(frame) if isinstance(e, StartCall)]
    assert start.record.call.args == {"x": 1}
    reply = pair.server.finish_call(start.record, Result(id=call_id, value=2))
    assert reply is not None
    assert pair.client.receive(reply, now=0.0) == [Resolved("h1", value=2)]
    assert pair.client.pending_calls == 0


def test_error_becomes_typed_exception(pair: ProtocolPair) -> None:
    """An error frame resolves with the exception class of its code."""
    call_id, _ = pair.client.start_call("h", "a/b", {})
    frame = encode(
        Error(id=call_id, code="cancelled", message="m", details={"reason": "superseded"})
    )
    [resolved] = pair.client.receive(frame, now=0.0)
    assert isinstance(resolved, Resolved) and isinstance(resolved.error, CallCancelledError)
    assert resolved.error.reason is CancelReason.SUPERSEDED


def test_session_reference_codes_pass_through(pair: ProtocolPair) -> None:
    """Upstream's SESSION_REFERENCE_* codes keep their spelling on the client."""
    call_id, _ = pair.client.start_call("h", "a/b", {})
    frame = encode(Error(id=call_id, code="SESSION_REFERENCE_TOO_MANY", message="m"))
    [resolved] = pair.client.receive(frame, now=0.0)
    assert isinstance(resolved, Resolved) and isinstance(resolved.error, SessionReferenceError)
    assert resolved.error.code == "SESSION_REFERENCE_TOO_MANY"


def test_unknown_code_is_kept(pair: ProtocolPair) -> None:
    """A code this client does not know becomes internal with the code in details."""
    call_id, _ = pair.client.start_call("h", "a/b", {})
    [resolved] = pair.client.receive(encode(Error(id=call_id, code="x-new", message="m")), 0.0)
    assert isinstance(resolved, Resolved) and resolved.error is not None
    assert resolved.error.details["code"] == "x-new"


def test_abandoned_call_sends_cancel_and_drops_late_result(pair: ProtocolPair) -> None:
    """After abandon, a cancel frame is produced and a late result resolves nothing."""
    call_id, _ = pair.client.start_call("h", "a/b", {})
    cancel = pair.client.abandon_call(call_id, CancelReason.DEADLINE)
    assert cancel is not None
    assert decode(cancel, max_frame_bytes=1 << 20) == Cancel(
        id=call_id, reason=CancelReason.DEADLINE
    )
    assert pair.client.receive(encode(Result(id=call_id, value=1)), now=0.0) == []
    assert pair.client.abandon_call(call_id, CancelReason.CALLER) is None


def test_silent_server_is_lost_within_the_bound(pair: ProtocolPair) -> None:
    """No frame for peerTimeout fails every pending call with peer-lost."""
    pair.client.start_call("h1", "a/b", {})
    pair.client.start_call("h2", "a/b", {})
    assert not any(isinstance(e, Lost) for e in pair.client.tick(2.4))
    events = pair.client.tick(2.6)
    failed = [e for e in events if isinstance(e, Resolved)]
    assert {e.handle for e in failed} == {"h1", "h2"}
    assert all(isinstance(e.error, PeerLostError) for e in failed)
    assert pair.client.state is ClientState.LOST
    with pytest.raises(PeerLostError):
        pair.client.start_call("h3", "a/b", {})


def test_lost_client_says_hello_again(pair: ProtocolPair) -> None:
    """While lost the client re-sends hello each heartbeat, and a welcome restores it."""
    pair.client.tick(2.6)
    frames = [e.frame for e in pair.client.tick(3.7) if isinstance(e, SendFrame)]
    assert [decode(f, max_frame_bytes=1 << 20).KIND for f in frames] == ["hello"]
    pair.deliver(pair.to_server(frames[0]))
    assert pair.client.state is ClientState.READY


def test_unknown_peer_error_loses_connection(pair: ProtocolPair) -> None:
    """A server that forgot us (restart) fails the calls in flight with peer-lost."""
    pair.client.start_call("h", "a/b", {})
    frame = encode(Error(id=None, code="peer-lost", message="unknown peer", details={"id": 1}))
    events = pair.client.receive(frame, now=0.0)
    assert isinstance(events[0], Resolved) and isinstance(events[0].error, PeerLostError)


def test_server_bye_fails_calls_unavailable(pair: ProtocolPair) -> None:
    """A bye from the server fails what is still pending with unavailable."""
    pair.client.start_call("h", "a/b", {})
    [failed, lost] = pair.client.receive(encode(Bye()), now=0.0)
    assert isinstance(failed, Resolved) and isinstance(failed.error, UnavailableError)
    assert isinstance(lost, Lost)


def test_oversized_call_is_refused_locally(pair: ProtocolPair) -> None:
    """A call over the server's frame limit never leaves the client."""
    pair.client.max_frame_bytes = 64
    with pytest.raises(TooLargeError):
        pair.client.start_call("h", "a/b", {"x": "y" * 100})
    assert pair.client.pending_calls == 0


def test_garbage_from_server_loses_connection(pair: ProtocolPair) -> None:
    """An undecodable frame from the server is treated as a lost peer."""
    pair.client.start_call("h", "a/b", {})
    events = pair.client.receive(b"\xc1", now=0.0)
    assert isinstance(events[-1], Lost)


def test_close_fails_calls_and_says_bye(pair: ProtocolPair) -> None:
    """Closing fails pending calls and produces a bye frame."""
    pair.client.start_call("h", "a/b", {})
    events = pair.client.close()
    assert isinstance(events[-1], SendFrame)
    assert decode(events[-1].frame, max_frame_bytes=1 << 20) == Bye()
    with pytest.raises(UnavailableError):
        pair.client.start_call("h", "a/b", {})


def test_silence_counts_only_up_to_the_last_verified_read(pair: ProtocolPair) -> None:
    """If this process was too busy to read its socket, a long gap is not the server's
    silence: loss is measured up to when the socket was last seen empty."""
    pair.client.start_call("h", "a/b", {})
    assert not any(isinstance(e, Lost) for e in pair.client.tick(10.0, verified_at=1.0))
    assert any(isinstance(e, Lost) for e in pair.client.tick(10.0, verified_at=2.6))


def test_next_due_is_the_next_ping_or_the_silence_bound(pair: ProtocolPair) -> None:
    """The client's timer may sleep until ``next_due``: its next ping, or the time the server's
    silence would make it lost; a closed client has nothing to wake for."""
    client = pair.client
    assert client.next_due() == pytest.approx(min(pair.now + client.heartbeat, pair.now + 2.5))
    client.close()
    assert client.next_due() == math.inf


def test_clients_of_one_process_ping_on_the_same_beats() -> None:
    """Pings fall on multiples of the heartbeat interval of the process's clock, so clients
    started at different moments wake together; each interval stays between a quarter and
    one and a quarter heartbeats, well inside the server's silence bound."""
    from wire._client_protocol import ClientProtocol

    def pings(start: float) -> list[float]:
        client = ClientProtocol(now=start)
        client.hello(start)
        times, now = [], start
        while len(times) < 3:
            now = client.next_due()
            if any(isinstance(e, SendFrame) for e in client.tick(now)):
                times.append(now)
        return times

    assert pings(100.1) == pings(100.6) == pytest.approx([101.0, 102.0, 103.0])
    assert pings(100.8) == pytest.approx([102.0, 103.0, 104.0])  # 1.0 would be too soon
