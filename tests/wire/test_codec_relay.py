"""Passing a result on without decoding its value: ``split_result`` and
``encode_encoded_result`` (wire/_codec.py), which the cluster supervisor's relay uses."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from wire._codec import MAX_CALL_ID, decode, encode_result
from wire._codec_relay import (
    Encoded,
    _split_any,
    encode_encoded_result,
    read_result,
    split_result,
)
from wire._errors import RemoteProtocolError
from wire._messages import Result

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


#: A result frame's parts: any id msgpack can hold, any value, and how much to cut off its end
#: or add after it.
_FRAME_PARTS = {
    "call_id": st.integers(min_value=0, max_value=2**64 - 1),
    "value": values,
    "cut": st.integers(min_value=0, max_value=64),
    "tail": st.binary(max_size=3),
}


@given(call_id=st.integers(min_value=0, max_value=MAX_CALL_ID), value=values)
def test_a_result_splits_into_its_id_and_encoded_value_and_joins_back(
    call_id: int, value: Any
) -> None:
    """Any result frame splits into its id and the exact bytes of its value, and joining them
    gives the frame back byte for byte."""
    frame = encode_result(call_id, value)
    split = split_result(frame)
    assert split is not None
    assert split[0] == call_id
    assert msgpack.unpackb(split[1], raw=False, strict_map_key=True) == value
    assert encode_encoded_result(*split) == frame
    assert decode(encode_encoded_result(*split), max_frame_bytes=len(frame)) == Result(
        id=call_id, value=value
    )


@given(**_FRAME_PARTS)
@example(call_id=MAX_CALL_ID + 1, value=None, cut=0, tail=b"")
def test_the_fast_reading_of_a_result_agrees_with_the_general_one(
    call_id: int, value: Any, cut: int, tail: bytes
) -> None:
    """A frame laid out as this codec writes results is read by byte comparisons; whatever it
    holds (ids past 2**53, values cut short, bytes after the value, extension types), the
    answer is the one the general reading gives."""
    whole = msgpack.packb({"type": "result", "id": call_id, "value": value})
    for frame in (whole, whole[: len(whole) - cut], whole + tail):
        assert split_result(frame) == _split_any(frame)
    for odd in (msgpack.ExtType(5, b"ab"), msgpack.Timestamp(1, 2)):
        frame = msgpack.packb({"type": "result", "id": call_id % 2**53, "value": [odd]})
        assert split_result(frame) == _split_any(frame) is not None


def _decoded(frame: bytes) -> tuple[int, Any] | None:
    """What decode makes of ``frame``, as read_result answers: a result's id and value."""
    try:
        message = decode(frame, max_frame_bytes=len(frame) + 1)
    except RemoteProtocolError:
        return None
    return (message.id, message.value) if type(message) is Result else None


@given(**_FRAME_PARTS)
@example(call_id=MAX_CALL_ID + 1, value=None, cut=0, tail=b"")
@example(call_id=7, value=msgpack.ExtType(5, b"ab"), cut=0, tail=b"")
@example(call_id=7, value=[msgpack.Timestamp(1, 2)], cut=0, tail=b"")
@example(call_id=7, value={"k": {1: 2}}, cut=0, tail=b"")
def test_a_clients_quick_reading_of_a_result_agrees_with_decode(
    call_id: int, value: Any, cut: int, tail: bytes
) -> None:
    """Whatever a result frame holds (ids past 2**53, values cut short, bytes after the value,
    extension types, timestamps, keys that are not strings), the client's quick reading takes
    it only as decode reads it, and takes every well-formed one; the relay's split takes
    whatever it takes, so a call whose value is wanted encoded never meets it."""
    whole = msgpack.packb({"type": "result", "id": call_id, "value": value}, datetime=False)
    for frame in (whole, whole[: len(whole) - cut], whole + tail):
        read = read_result(frame)
        decoded = _decoded(frame)
        assert read is None or read == decoded
        if read is not None:
            split = split_result(frame)
            assert split is not None and split[0] == read[0]
    if call_id <= MAX_CALL_ID and _decoded(whole) is not None:
        assert read_result(whole) == _decoded(whole)


def test_an_id_in_a_wider_encoding_than_needed_is_read() -> None:
    """An id packed wider than msgpack's shortest form (uint 8 for 5) still splits."""
    frame = b"\x83\xa4type\xa6result\xa2id\xcc\x05\xa5value\xa1v"
    assert split_result(frame) == (5, msgpack.packb("v"))
    assert read_result(frame) == (5, "v")


@pytest.mark.parametrize(
    "frame",
    [
        msgpack.packb({"type": "error", "id": 3, "code": "internal", "message": "x"}),
        msgpack.packb({"type": "ping"}),
        msgpack.packb({"type": "result", "id": -1, "value": 1}),
        msgpack.packb({"type": "result", "id": "3", "value": 1}),
        msgpack.packb({"type": "result", "value": 1}),
        msgpack.packb({"type": "result", "id": 3, "value": 1}) + b"\x00",
        msgpack.packb([1, 2, 3]),
        b"\xc1garbage",
        b"",
    ],
    ids=[
        "error",
        "ping",
        "negative-id",
        "string-id",
        "no-id",
        "trailing-bytes",
        "not-a-map",
        "garbage",
        "empty",
    ],
)
def test_anything_but_a_well_formed_result_is_left_to_decode(frame: bytes) -> None:
    """Frames that are not well-formed results are not split (decode reads or rejects them)."""
    assert split_result(frame) is None


def test_a_result_without_a_value_splits_to_nil_and_extra_keys_are_skipped() -> None:
    """A result with no value carries nil, as decode reads it, and unknown keys are ignored."""
    assert split_result(msgpack.packb({"type": "result", "id": 4})) == (4, msgpack.packb(None))
    frame = msgpack.packb({"later": [1, {"a": 2}], "type": "result", "value": "v", "id": 5})
    assert split_result(frame) == (5, msgpack.packb("v"))


@given(call_id=st.integers(min_value=0, max_value=MAX_CALL_ID), value=values)
def test_an_encoded_handler_result_is_sent_byte_for_byte_as_the_value(
    call_id: int, value: Any
) -> None:
    """A handler's ``Encoded.of(value)`` answers with exactly the frame ``value`` would."""
    assert encode_encoded_result(call_id, Encoded.of(value).value) == encode_result(call_id, value)


@pytest.mark.parametrize("value", [{1: "a"}, {"k": {2: 1}}, msgpack.ExtType(3, b"x")])
def test_an_encoded_result_a_client_could_not_decode_is_refused(value: Any) -> None:
    """``Encoded.of`` refuses what the server would turn into ``internal``: non-string map keys
    and extension types."""
    with pytest.raises(ValueError, match="not a protocol value"):
        Encoded.of(value)
