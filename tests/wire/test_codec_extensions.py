"""msgpack extension types, timestamps included, are refused wherever they are in a frame
(docs/protocol.md § 2), with a `bad-request` for the call when its id can be read."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest

from wire import Call, ErrorCode, RemoteProtocolError, Result, decode

LIMIT = 1 << 20


def call(args: dict[str, Any], **envelope: Any) -> bytes:
    return msgpack.packb({"type": "call", "id": 9, "endpoint": "t/m", "args": args, **envelope})


def refused(frame: bytes) -> tuple[int | None, str, str]:
    with pytest.raises(RemoteProtocolError) as info:
        decode(frame, max_frame_bytes=LIMIT)
    reply = info.value.reply
    assert reply is not None
    return reply.id, reply.code, reply.message


# Timestamp headers: the same instant written as fixext 4, ext 8 and ext 32 (all valid msgpack).
SECONDS = struct.pack(">I", 1_700_000_000)
FIXEXT4 = b"\xd6\xff" + SECONDS
EXT8 = b"\xc7\x04\xff" + SECONDS
EXT32 = b"\xc9\x00\x00\x00\x04\xff" + SECONDS
FIXEXT8 = b"\xd7\xff" + struct.pack(">Q", 1_700_000_000)
EXT16 = b"\xc8\x00\x04\xff" + SECONDS
EXT8_96 = b"\xc7\x0c\xff" + struct.pack(">Iq", 0, 1_700_000_000)


@pytest.mark.parametrize(
    ("args", "where"),
    [
        ({"a": msgpack.ExtType(5, b"xy")}, "ext type 5 (2 bytes)"),
        ({"a": [1, {"b": msgpack.ExtType(0, b"")}]}, "ext type 0 (0 bytes)"),
        ({"a": msgpack.Timestamp(1, 0)}, "a timestamp (ext -1) at args.a"),
        ({"a": msgpack.Timestamp(2**40, 7)}, "a timestamp (ext -1) at args.a"),
        ({"a": [0, {"when": msgpack.Timestamp(-5, 0)}]}, "a timestamp (ext -1) at args.a[1].when"),
    ],
)
def test_extension_in_args_is_a_bad_request_for_the_call(args: dict[str, Any], where: str) -> None:
    """An ext or timestamp anywhere in args is a per-call bad-request naming what was found."""
    call_id, code, message = refused(call(args))
    assert (call_id, code) == (9, ErrorCode.BAD_REQUEST)
    assert message == f"msgpack extension types are not allowed: {where}"


@pytest.mark.parametrize(
    "encoded",
    [FIXEXT4, FIXEXT8, EXT8, EXT8_96, EXT16, EXT32],
    ids=["fixext4", "fixext8", "ext8", "ext8-96", "ext16", "ext32"],
)
@pytest.mark.parametrize("big_ints", [0, 1, 3], ids=["alone", "after-1-int", "after-3-ints"])
def test_every_timestamp_encoding_is_refused(encoded: bytes, big_ints: int) -> None:
    """A timestamp is refused whichever ext family carries it, also behind large integers
    whose 0xff bytes come first (seven each)."""
    head = msgpack.packb({"type": "call", "id": 4, "endpoint": "t/m"})
    ints = [2**56 - 1] * big_ints
    value = msgpack.packb(ints)
    args = b"\x82\xa1i" + value + b"\xa1a" + encoded
    frame = bytes([head[0] + 1]) + head[1:] + msgpack.packb("args") + args
    decoded = msgpack.unpackb(frame)["args"]
    assert decoded["a"] == msgpack.Timestamp(1_700_000_000, 0) and decoded["i"] == ints
    assert refused(frame)[:2] == (4, ErrorCode.BAD_REQUEST)


def test_reserved_negative_extension_is_refused() -> None:
    """An ext of a type msgpack reserves (-128..-2) is refused like any other."""
    head = msgpack.packb({"type": "call", "id": 4, "endpoint": "t/m"})
    frame = bytes([head[0] + 1]) + head[1:] + msgpack.packb("args") + b"\x81\xa1a\xd4\xfez"
    assert refused(frame) == (
        4,
        ErrorCode.BAD_REQUEST,
        "msgpack extension types are not allowed: ext type -2 (1 bytes)",
    )


def test_extension_outside_args_is_refused_too() -> None:
    """An ext in an envelope key the codec would otherwise ignore, or in a result, is refused."""
    assert refused(call({}, extra=msgpack.ExtType(3, b"")))[:2] == (9, ErrorCode.BAD_REQUEST)
    result = msgpack.packb({"type": "result", "id": 2, "value": msgpack.Timestamp(0, 1)})
    assert refused(result)[:2] == (2, ErrorCode.BAD_REQUEST)


def test_top_level_timestamp_is_a_connection_level_bad_request() -> None:
    """A frame that is a timestamp and not a map names no call."""
    call_id, code, _ = refused(msgpack.packb(msgpack.Timestamp(1, 0)))
    assert (call_id, code) == (None, ErrorCode.BAD_REQUEST)


@pytest.mark.parametrize(
    "value",
    [
        b"\xd6\xff\x00\x00\x00\x01",  # a timestamp header's bytes inside binary data
        -1,
        [b"\xc7\x04\xff", -1, 2**64 - 1],
        "\u05ff",  # 0xd7 0xbf: the lead byte of fixext 8, not followed by 0xff
    ],
)
def test_look_alike_bytes_are_not_refused(value: Any) -> None:
    """Bytes that look like a timestamp header inside other values do not trip the check."""
    assert decode(call({"a": value}), max_frame_bytes=LIMIT) == Call(
        id=9, endpoint="t/m", args={"a": value}
    )
    assert decode(
        msgpack.packb({"type": "result", "id": 1, "value": value}), max_frame_bytes=LIMIT
    ) == Result(id=1, value=value)


@pytest.mark.parametrize("value", [msgpack.ExtType(3, b"x"), msgpack.Timestamp(1, 0)])
def test_call_id_after_the_extension_is_still_named(value: Any) -> None:
    """The refusal names the call even when its id comes after the extension in the frame."""
    frame = msgpack.packb({"args": {"a": value}, "type": "call", "id": 77, "endpoint": "t/m"})
    assert refused(frame)[:2] == (77, ErrorCode.BAD_REQUEST)
