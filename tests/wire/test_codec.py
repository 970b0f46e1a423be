"""The msgpack codec: every message kind round-trips; every class of bad input is a typed,
replyable error."""

from __future__ import annotations

import math
from typing import Any

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
    Message,
    Ping,
    Pong,
    RemoteProtocolError,
    Result,
    Welcome,
    decode,
    encode,
)
from wire._codec import MAX_CALL_ID
from wire._messages import MESSAGE_TYPES
from wire.testing import FrameFactory

LIMIT = 1 << 20

SAMPLES: list[Message] = [
    Hello(versions=(1, 2), name="ide"),
    Welcome(heartbeat_ms=1000, peer_timeout_ms=2500, max_frame_bytes=LIMIT, max_in_flight=8),
    Call(id=1, endpoint="ns/m", args={"agentId": "a", "query": "x"}),
    Call(id=MAX_CALL_ID, endpoint="ns/m", args={}, deadline_ms=12.5, supersede="typing"),
    Cancel(id=3, reason=CancelReason.SUPERSEDED),
    Result(id=4, value={"nested": [1, 2.5, None, True, "s", b"bin"]}),
    Error(id=5, code="cancelled", message="gone", details={"state": "queued"}),
    Error(id=None, code="bad-request", message="bad", details={}),
    Ping(),
    Pong(),
    Bye(),
]


def decoded(frame: bytes) -> Message:
    return decode(frame, max_frame_bytes=LIMIT)


def rejection(frame: bytes) -> Error:
    with pytest.raises(RemoteProtocolError) as info:
        decoded(frame)
    assert info.value.reply is not None
    return info.value.reply


class TestRoundTrip:
    def test_samples_cover_every_kind(self) -> None:
        """The sample list has at least one message of every kind."""
        assert {type(m) for m in SAMPLES} == set(MESSAGE_TYPES.values())

    @pytest.mark.parametrize("message", SAMPLES, ids=lambda m: m.KIND)
    def test_round_trip(self, message: Message) -> None:
        """Decoding an encoded message gives an equal message."""
        assert decoded(encode(message)) == message

    def test_wire_names_are_camel_case(self) -> None:
        """Optional call fields use the contract's camelCase names on the wire."""
        raw = msgpack.unpackb(encode(SAMPLES[3]))
        assert raw == {
            "type": "call",
            "id": MAX_CALL_ID,
            "endpoint": "ns/m",
            "args": {},
            "deadlineMs": 12.5,
            "supersede": "typing",
        }

    def test_absent_optionals_are_omitted(self) -> None:
        """A call without deadline or supersede key carries neither field."""
        assert set(msgpack.unpackb(encode(SAMPLES[2]))) == {"type", "id", "endpoint", "args"}

    def test_unknown_extra_fields_are_ignored(self) -> None:
        """Fields a later revision adds do not break an older reader."""
        frame = FrameFactory.map(type="ping", futureField=1)
        assert decoded(frame) == Ping()


class TestMalformed:
    def test_undecodable_bytes(self) -> None:
        """Bytes that are not msgpack are a connection-level bad-request."""
        reply = rejection(FrameFactory.undecodable())
        assert (reply.id, reply.code) == (None, ErrorCode.BAD_REQUEST)
        assert reply.message.startswith("undecodable frame")

    def test_truncated(self) -> None:
        """A frame cut in half is undecodable."""
        assert rejection(FrameFactory.truncated()).code == ErrorCode.BAD_REQUEST

    def test_empty_frame(self) -> None:
        """An empty frame is undecodable."""
        assert rejection(b"").code == ErrorCode.BAD_REQUEST

    def test_not_a_map(self) -> None:
        """A frame must be a map."""
        assert rejection(FrameFactory.not_a_map()).message == "frame must be a map, got an array"

    def test_unknown_kind_keeps_call_id(self) -> None:
        """An unknown type is rejected for the id it names."""
        reply = rejection(FrameFactory.map(type="launch", id=9))
        assert (reply.id, reply.message) == (9, "unknown message type 'launch'")

    def test_missing_type(self) -> None:
        """A map without a string type is rejected."""
        assert rejection(FrameFactory.map(id=1)).message == "frame has no string field 'type'"

    def test_non_string_map_keys(self) -> None:
        """Map keys must be strings."""
        frame = msgpack.packb({1: "x"})
        assert rejection(frame).code == ErrorCode.BAD_REQUEST

    def test_oversized_frame(self) -> None:
        """A frame over the limit is too-large, before any decoding."""
        reply = rejection(FrameFactory.oversized(LIMIT))
        assert reply.code == ErrorCode.TOO_LARGE
        assert reply.details == {"limit": LIMIT}

    @pytest.mark.parametrize(
        ("fields", "message"),
        [
            (
                {"type": "call", "endpoint": "a/b"},
                "call: missing field 'id' (an integer 0..2**53-1)",
            ),
            (
                {"type": "call", "id": -1, "endpoint": "a/b"},
                "call: field 'id' must be a call id (an integer 0..2**53-1)",
            ),
            (
                {"type": "call", "id": 2**53, "endpoint": "a/b"},
                "call: field 'id' must be a call id (an integer 0..2**53-1)",
            ),
            (
                {"type": "call", "id": True, "endpoint": "a/b"},
                "call: field 'id' must be a call id (an integer 0..2**53-1)",
            ),
            ({"type": "call", "id": 1}, "call: missing field 'endpoint'"),
            (
                {"type": "call", "id": 1, "endpoint": 5},
                "call: field 'endpoint' must be a string, got an integer",
            ),
            (
                {"type": "call", "id": 1, "endpoint": "a/b", "args": [1]},
                "call: field 'args' must be a map, got an array",
            ),
            (
                {"type": "call", "id": 1, "endpoint": "a/b", "deadlineMs": "soon"},
                "call: field 'deadlineMs' must be a number, got a string",
            ),
            (
                {"type": "call", "id": 1, "endpoint": "a/b", "deadlineMs": -5},
                "call: field 'deadlineMs' must be >= 0",
            ),
            (
                {"type": "call", "id": 1, "endpoint": "a/b", "deadlineMs": math.nan},
                "call: field 'deadlineMs' must be >= 0",
            ),
            (
                {"type": "call", "id": 1, "endpoint": "a/b", "supersede": 3},
                "call: field 'supersede' must be a string, got an integer",
            ),
            ({"type": "cancel"}, "cancel: missing field 'id' (an integer 0..2**53-1)"),
            ({"type": "cancel", "id": 1, "reason": "bored"}, "cancel: unknown reason 'bored'"),
            ({"type": "hello"}, "hello: missing field 'versions'"),
            (
                {"type": "hello", "versions": []},
                "hello: field 'versions' must be a non-empty array of integers",
            ),
            (
                {"type": "hello", "versions": ["1"]},
                "hello: field 'versions' must be a non-empty array of integers",
            ),
            ({"type": "welcome", "version": 1}, "welcome: missing field 'heartbeatMs'"),
            ({"type": "error", "id": 1}, "error: missing field 'code'"),
            (
                {"type": "error", "id": "x", "code": "c"},
                "error: field 'id' must be a call id or nil",
            ),
            ({"type": "result"}, "result: missing field 'id' (an integer 0..2**53-1)"),
        ],
    )
    def test_wrong_or_missing_fields(self, fields: dict[str, Any], message: str) -> None:
        """Each missing or mistyped field is named in the error message."""
        reply = rejection(FrameFactory.map(**fields))
        assert reply.code == ErrorCode.BAD_REQUEST
        assert reply.message == message

    def test_error_for_a_bad_call_is_scoped_to_that_call(self) -> None:
        """A call with a valid id but a bad field gets an error for its own id."""
        reply = rejection(FrameFactory.map(type="call", id=42, endpoint=None))
        assert reply.id == 42


def test_unencodable_value_is_a_local_error() -> None:
    """Encoding a value msgpack cannot carry is our bug, reported as LocalProtocolError."""
    from wire import LocalProtocolError

    with pytest.raises(LocalProtocolError, match=r"^cannot encode result: "):
        encode(Result(id=1, value=object()))
