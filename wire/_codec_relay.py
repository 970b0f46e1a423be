"""Results passed on without decoding their value: what a relay needs of the codec.

A relay (the cluster supervisor) answers its caller with the owner's result. Decoding the value
only to encode it again is most of its cost for a large result, so :func:`split_result` reads
a result frame's id and leaves its value as the bytes it is, and :func:`encode_encoded_result`
writes them back under the caller's id: byte for byte what :func:`~wire._codec.encode_result`
gives for the decoded value.

A handler whose large result rarely changes (``system/describe``) returns it :class:`Encoded`
once, and the server answers every call with those bytes.

A client reads the same layout with :func:`read_result`: the id from the bytes, the value with
one decode by :func:`~wire._codec.decode`'s rules, and no message object in between.
"""

from __future__ import annotations

from typing import Any

import attrs
import msgpack

from wire._codec import MAX_CALL_ID, decode, encode_result, may_hold_timestamp, pack
from wire._errors import LocalProtocolError, RemoteProtocolError
from wire._extension_types import holds_timestamp, refuse_extension_type

__all__ = ["Encoded", "encode_encoded_result", "read_result", "split_result"]


@attrs.frozen
class Encoded:
    """A handler's result already in msgpack: built once, sent as it is by every call that
    returns it (no encoding, no second decoding check)."""

    value: bytes

    @classmethod
    def of(cls, value: Any) -> Encoded:
        """``value`` encoded with the codec's rules, and checked once the way the server checks
        a result (a client must be able to decode it: string map keys, no extension types).

        Raises:
            ValueError: the encoding breaks the protocol's rules.
        """
        try:
            frame = encode_result(0, value)
            decode(frame, max_frame_bytes=len(frame))
        except (LocalProtocolError, RemoteProtocolError) as exc:
            raise ValueError(f"not a protocol value: {exc}") from None
        split = split_result(frame)
        assert split is not None  # a result frame that decoded
        return cls(split[1])


# A result frame up to its id, and the value's key: ``_result_map`` in msgpack, key by key.
_RESULT_HEAD: bytes = b"\x83" + b"".join(map(msgpack.packb, ("type", "result", "id")))
_VALUE_KEY: bytes = msgpack.packb("value")
_NIL: bytes = msgpack.packb(None)


def encode_encoded_result(call_id: int, encoded_value: bytes) -> bytes:
    """``encode(Result(call_id, value))`` for a value that is already msgpack (a relay passing
    an owner's result on): the same bytes, without decoding and re-encoding the value."""
    return _RESULT_HEAD + pack(call_id) + _VALUE_KEY + encoded_value


#: Values up to this many bytes are checked by decoding them (one C call); longer ones are
#: skipped over by an unpacker, which builds nothing but costs a dozen calls and a buffer.
_DECODED_CHECK_BYTES = 1024
#: The id's encodings after a fixint: msgpack's uint 8/16/32/64, by their type byte.
_UINT_SIZES = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}


def split_result(frame: bytes) -> tuple[int, bytes] | None:
    """The call id and the still-encoded value of a well-formed result frame; ``None`` for any
    other frame, which :func:`~wire._codec.decode` then reads (and rejects, if it is bad).

    A relay uses it to pass a result on without building its value: only the keys and the id
    are read, and the value is only checked to be one whole msgpack object (a small one by
    decoding it once, which costs less than skipping it with an unpacker; a large one is
    skipped over). Its shape is the final receiver's to check.
    """
    split = _split_as_encoded(frame)
    return split if split is not None else _split_any(frame)


def _value_at(frame: bytes) -> tuple[int, int] | None:
    """The call id of a frame laid out as this codec writes a result (type, id, value, in that
    order) and where its value starts; ``None`` for any other layout."""
    if not frame.startswith(_RESULT_HEAD):
        return None
    at = len(_RESULT_HEAD)
    if len(frame) <= at:
        return None
    kind = frame[at]
    if kind <= 0x7F:  # positive fixint
        call_id = kind
        at += 1
    else:
        size = _UINT_SIZES.get(kind)
        if size is None:
            return None
        call_id = int.from_bytes(frame[at + 1 : at + 1 + size], "big")
        at += 1 + size
    if call_id > MAX_CALL_ID or not frame.startswith(_VALUE_KEY, at):
        return None
    return call_id, at + len(_VALUE_KEY)


def read_result(frame: bytes) -> tuple[int, Any] | None:
    """The call id and the decoded value of a result frame laid out as this codec writes it,
    decoded by :func:`~wire._codec.decode`'s rules (string map keys, no extension type, no
    timestamp); ``None`` for any other frame, which ``decode`` then reads (and rejects, if it
    is bad). A client's receive path: one decode of the value, no message object."""
    found = _value_at(frame)
    if found is None:
        return None
    call_id, at = found
    try:
        # Raises on a truncated value or on bytes after it.
        value = msgpack.unpackb(
            memoryview(frame)[at:], raw=False, strict_map_key=True, ext_hook=refuse_extension_type
        )
    except Exception:  # msgpack raises several unrelated types for garbage input
        return None
    if may_hold_timestamp(frame) and holds_timestamp(value):
        return None
    return call_id, value


def _split_as_encoded(frame: bytes) -> tuple[int, bytes] | None:
    """The split of a frame laid out as this codec writes a result (type, id, value, in that
    order); ``None`` when it is laid out otherwise or its value is not one whole msgpack
    object, and :func:`_split_any` decides. Nearly every result a relay sees is such a frame,
    and this reads it in a few byte comparisons."""
    found = _value_at(frame)
    if found is None:
        return None
    call_id, at = found
    value = frame[at:]
    if len(value) > _DECODED_CHECK_BYTES:
        return None
    try:
        # Raises on a truncated value or on bytes after it; the value is dropped, not kept.
        msgpack.unpackb(value, raw=True, strict_map_key=False, timestamp=0)
    except Exception:  # msgpack raises several unrelated types for garbage input
        return None
    return call_id, value


def _split_any(frame: bytes) -> tuple[int, bytes] | None:
    """:func:`split_result` for a result map in any key order, with any extra keys."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=True)
    unpacker.feed(frame)
    kind = call_id = start = end = None
    try:
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key == "value":
                start = unpacker.tell()
                unpacker.skip()
                end = unpacker.tell()
            elif key == "type" or key == "id":
                value = unpacker.unpack()
                if key == "type":
                    kind = value
                else:
                    call_id = value
            else:
                unpacker.skip()
        complete = unpacker.tell() == len(frame)
    except Exception:  # msgpack raises several unrelated types for garbage input
        return None
    if not complete or kind != "result" or type(call_id) is not int:
        return None
    if not 0 <= call_id <= MAX_CALL_ID:
        return None
    return call_id, (_NIL if start is None else frame[start:end])
