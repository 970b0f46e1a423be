"""Results passed on without decoding their value: what a relay needs of the codec.

A relay (the cluster supervisor) answers its caller with the owner's result. Decoding the value
only to encode it again is most of its cost for a large result, so :func:`split_result` reads
a result frame's id and leaves its value as the bytes it is, and :func:`encode_encoded_result`
writes them back under the caller's id: byte for byte what :func:`~wire._codec.encode_result`
gives for the decoded value.

A handler whose large result rarely changes (``system/describe``) returns it :class:`Encoded`
once, and the server answers every call with those bytes.
"""

from __future__ import annotations

from typing import Any

import attrs
import msgpack

from wire._codec import MAX_CALL_ID, decode, encode_result, pack
from wire._errors import LocalProtocolError, RemoteProtocolError

__all__ = ["Encoded", "encode_encoded_result", "split_result"]


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


def split_result(frame: bytes) -> tuple[int, bytes] | None:
    """The call id and the still-encoded value of a well-formed result frame; ``None`` for any
    other frame, which :func:`~wire._codec.decode` then reads (and rejects, if it is bad).

    A relay uses it to pass a result on without building its value: only the keys and the id
    are decoded, the value is skipped over. Its shape is the final receiver's to check.
    """
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
