"""Property tests (hypothesis) for hostile input (issue 9, item 4).

The protocol codec and server: any bytes in gives a valid message or a typed error, never an
escaping exception, never a hang (each example has a deadline). The DSH log reader: any line
is accepted or rejected with a clear ``LogReadError``.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import LOG_HEADER, decode_frame, fuzz_frame, fuzz_log_line, read_log
from wire._codec import decode, encode
from wire._errors import CancelReason
from wire._limits import ArgumentLimits, check_arguments, salvage_call_id
from wire._messages import Call, Cancel, Error, Hello, Ping, Result

#: Every example must finish well within this: a hang or a quadratic blow-up fails the test.
FAST = settings(
    max_examples=100,
    deadline=timedelta(seconds=2),
    suppress_health_check=[HealthCheck.too_slow],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
#: msgpack values of any shape, including non-string keys (which the codec must reject).
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(max_size=8) | st.integers(-5, 5), children, max_size=5)
    ),
    max_leaves=30,
)
#: Keys the envelope readers look at, so generated maps reach the field checks.
envelope_keys = st.sampled_from(
    [
        "type",
        "id",
        "endpoint",
        "args",
        "deadlineMs",
        "supersede",
        "reason",
        "versions",
        "name",
        "code",
        "message",
        "details",
        "value",
        "version",
        "heartbeatMs",
        "peerTimeoutMs",
        "maxFrameBytes",
        "maxInFlight",
    ]
)
message_types = st.sampled_from(
    ["call", "cancel", "result", "error", "hello", "welcome", "ping", "pong", "bye", "warp"]
)


@st.composite
def near_valid_frames(draw: st.DrawFn) -> bytes:
    """A msgpack map with a real ``type`` and envelope keys holding arbitrary values."""
    fields: dict[Any, Any] = draw(st.dictionaries(envelope_keys, values, max_size=6))
    if draw(st.booleans()):
        fields["type"] = draw(message_types)
    frame: bytes = msgpack.packb(fields, use_bin_type=True)
    return frame


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """A valid frame with a few bytes flipped, cut or inserted."""
    message = draw(
        st.sampled_from(
            [
                Call(id=7, endpoint="a/b", args={"q": "x", "n": [1, 2, {"k": None}]}),
                Cancel(id=7, reason=CancelReason.CALLER),
                Result(id=3, value={"a": [1.5, b"\x00"]}),
                Error.of(None, __import__("wire").ErrorCode.BAD_REQUEST, "m", id=1),
                Hello(),
                Ping(),
            ]
        )
    )
    frame = bytearray(encode(message))
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, max(len(frame) - 1, 0)))
        action = draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip" and frame:
            frame[position] = draw(st.integers(0, 255))
        elif action == "cut":
            del frame[position:]
        else:
            frame[position:position] = draw(st.binary(min_size=1, max_size=4))
    return bytes(frame)


any_frames = st.binary(max_size=512) | near_valid_frames() | mutated_frames()


@FAST
@given(any_frames)
def test_decoder_gives_a_message_or_a_typed_error(frame: bytes) -> None:
    """decode() on any bytes returns a message or raises RemoteProtocolError with a reply."""
    decode_frame(frame)


@FAST
@given(any_frames)
def test_server_protocol_survives_any_frame(frame: bytes) -> None:
    """ServerProtocol.receive() on any bytes answers with valid frames and serves on."""
    fuzz_frame(frame)


@FAST
@given(st.binary(max_size=512) | near_valid_frames() | mutated_frames())
def test_salvaged_id_is_the_frames_own(frame: bytes) -> None:
    """A salvaged id is a valid call id, and equals the decoded id whenever the frame decodes."""
    salvaged = salvage_call_id(frame)
    assert salvaged is None or 0 <= salvaged <= 2**53 - 1
    try:
        raw = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except Exception:
        return
    if isinstance(raw, dict) and type(raw.get("id")) is int and 0 <= raw["id"] <= 2**53 - 1:
        if list(raw).count("id") == 1:
            assert salvaged == raw["id"]


@FAST
@given(
    st.dictionaries(st.text(max_size=5), values, max_size=6), st.integers(1, 6), st.integers(0, 6)
)
def test_argument_limits_are_exact(args: dict[str, Any], depth: int, items: int) -> None:
    """check_arguments() flags exactly the args whose depth or collection sizes exceed the
    limits (compared with a straightforward recursive measurement)."""

    def measure(value: Any) -> tuple[int, int]:
        if isinstance(value, list):
            inner = [measure(v) for v in value]
            return 1 + max((d for d, _ in inner), default=0), max(
                [len(value), *(n for _, n in inner)]
            )
        if isinstance(value, dict):
            inner = [measure(v) for v in value.values()]
            return 1 + max((d for d, _ in inner), default=0), max(
                [len(value), *(n for _, n in inner)]
            )
        return 0, 0

    deepest, widest = measure(args)
    exceeded = check_arguments(args, ArgumentLimits(max_depth=depth, max_items=items))
    assert (exceeded is not None) == (deepest > depth or widest > items)


@FAST
@given(st.binary(max_size=300))
def test_log_reader_accepts_or_rejects_any_line_bytes(line: bytes) -> None:
    """Any bytes as a header line or as an event line: accepted or a LogReadError."""
    fuzz_log_line(line)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)
event_types = st.sampled_from(
    [
        "message/user",
        "message/assistant",
        "turn/start",
        "turn/end",
        "session/title",
        "command/run",
        "tool/result",
        "chunk/text",
        "x-unknown",
    ]
)


@st.composite
def event_lines(draw: st.DrawFn) -> bytes:
    """A JSON event line with a plausible envelope and arbitrary data."""
    event: dict[str, Any] = {
        "type": draw(event_types | st.text(max_size=8)),
        "seq": draw(st.sampled_from([0, 1, -1, 0.0, "0", None])),
        "time": draw(st.integers(0, 2**53) | st.floats(allow_nan=False) | st.none()),
        "data": draw(json_values),
    }
    for key in draw(st.lists(st.sampled_from(["type", "seq", "time", "data"]), max_size=2)):
        event.pop(key, None)
    if draw(st.booleans()):
        event["ignorable"] = draw(st.booleans())
    return json.dumps(event).encode()


@FAST
@given(event_lines())
def test_log_reader_accepts_or_rejects_any_event_line(line: bytes) -> None:
    """A structured but arbitrary event after a good header: accepted or a LogReadError."""
    fuzz_log_line(line)


def test_log_reader_accepts_a_valid_line() -> None:
    """The harness is not vacuous: a good header alone and with one event is accepted."""
    read_log(LOG_HEADER + b"\n")
    read_log(LOG_HEADER + b'\n{"type":"x","seq":0,"time":1,"data":{},"ignorable":true}\n')


def test_decoder_accepts_valid_frames() -> None:
    """The harness is not vacuous: valid frames decode."""
    assert decode_frame(encode(Ping())) == Ping()
    assert decode(encode(Hello()), max_frame_bytes=100) == Hello()
