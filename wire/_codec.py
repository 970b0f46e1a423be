"""msgpack codec for protocol v1: messages ⇄ bytes, with validation of peer input.

Every frame is one msgpack map with a ``type`` key. :func:`decode` checks everything a peer
could get wrong and raises :class:`~wire._errors.RemoteProtocolError` carrying the error frame
to answer with; when the frame names a call id, that error is scoped to the call (h2's
``StreamReset``) so its siblings go on. Unknown extra keys are ignored, which is what lets a
later minor revision add optional fields.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

import msgpack

from wire._errors import CancelReason, ErrorCode, LocalProtocolError, RemoteProtocolError
from wire._extension_types import (
    ExtensionTypeRefused,
    holds_timestamp,
    refuse_extension_type,
    timestamp_refusal,
)
from wire._limits import salvage_call_id
from wire._messages import (
    MESSAGE_TYPES,
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
from wire._shapes import unstructure_default

__all__ = [
    "MAX_CALL_ID",
    "decode",
    "encode",
    "encode_call",
    "encode_result",
    "may_hold_timestamp",
    "pack",
]

#: Call ids stay exact in a JavaScript number (2**53 - 1), so a TypeScript client can use them.
MAX_CALL_ID = 2**53 - 1

_PACKER_DEFAULT = unstructure_default


class _Packers(threading.local):
    """One reusable ``msgpack.Packer`` per thread: ``msgpack.packb`` builds a new one per call,
    which costs twice the packing of a small frame. A packer is not safe to share between
    threads, and it resets its buffer after every ``pack``, also one that raised."""

    def __init__(self) -> None:
        self.packer = msgpack.Packer(default=_PACKER_DEFAULT, use_bin_type=True)


_PACKERS = _Packers()


def encode(message: Message) -> bytes:
    """Encode ``message`` as one msgpack frame.

    Raises:
        LocalProtocolError: a value in the message cannot be represented in msgpack.
    """
    if type(message) is Call:
        return encode_call(
            message.id, message.endpoint, message.args, message.deadline_ms, message.supersede
        )
    return _pack(_to_map(message), message.KIND)


def encode_result(call_id: int, value: Any) -> bytes:
    """``encode(Result(...))`` without the message's match: the server's hot path.

    Raises:
        LocalProtocolError: ``value`` cannot be represented in msgpack.
    """
    return _pack(_result_map(call_id, value), Result.KIND)


def encode_call(
    call_id: int,
    endpoint: str,
    args: Mapping[str, Any],
    deadline_ms: float | None = None,
    supersede: str | None = None,
) -> bytes:
    """``encode(Call(...))`` without building the message object: the client's hot path.

    Raises:
        LocalProtocolError: an argument cannot be represented in msgpack.
    """
    fields: dict[str, Any] = {"type": "call", "id": call_id, "endpoint": endpoint, "args": args}
    if deadline_ms is not None:
        fields["deadlineMs"] = deadline_ms
    if supersede is not None:
        fields["supersede"] = supersede
    try:
        frame: bytes = _PACKERS.packer.pack(fields)
        return frame
    except (TypeError, ValueError, OverflowError) as exc:
        raise LocalProtocolError(f"cannot encode call: {exc}") from exc


def pack(value: Any) -> bytes:
    """``value`` in msgpack, with the codec's reusable packer and its rules."""
    frame: bytes = _PACKERS.packer.pack(value)
    return frame


def _pack(fields: dict[str, Any], kind: str) -> bytes:
    try:
        frame: bytes = _PACKERS.packer.pack(fields)
        return frame
    except (TypeError, ValueError, OverflowError) as exc:
        raise LocalProtocolError(f"cannot encode {kind}: {exc}") from exc


def _result_map(call_id: int, value: Any) -> dict[str, Any]:
    return {"type": "result", "id": call_id, "value": value}


def _to_map(message: Message) -> dict[str, Any]:
    match message:
        case Result():
            return _result_map(message.id, message.value)
        case Error():
            return {
                "type": "error",
                "id": message.id,
                "code": message.code,
                "message": message.message,
                "details": message.details,
            }
        case Cancel():
            return {"type": "cancel", "id": message.id, "reason": message.reason.value}
        case Hello():
            return {"type": "hello", "versions": list(message.versions), "name": message.name}
        case Welcome():
            return {
                "type": "welcome",
                "version": message.version,
                "name": message.name,
                "heartbeatMs": message.heartbeat_ms,
                "peerTimeoutMs": message.peer_timeout_ms,
                "maxFrameBytes": message.max_frame_bytes,
                "maxInFlight": message.max_in_flight,
            }
        case Ping() | Pong() | Bye():
            return {"type": message.KIND}
    raise LocalProtocolError(f"not a protocol message: {message!r}")


#: Runs of 0xff bytes looked at before walking the decoded value instead (binary data).
_TIMESTAMP_RUNS = 16
_FF_RUN = re.compile(rb"\xff+")


def may_hold_timestamp(frame: bytes) -> bool:
    """Whether a 0xff in ``frame`` may be a timestamp's type byte: right after fixext 4 or 8
    (``d6``, ``d7``), or after the length of ext 8, 16 or 32 (``c7``, ``c8``, ``c9``). None of
    those header bytes is 0xff (a timestamp is 4, 8 or 12 bytes long), so only the first 0xff
    of a run can be one. Most frames have no 0xff at all (one memchr); the runs of large
    integers no longer cost a walk of the whole value (100 µs for a 25 KB describe)."""
    at = frame.find(255)
    runs = 0
    while at != -1:
        if runs == _TIMESTAMP_RUNS:
            return True  # the walk of the value decides
        if (
            frame[at - 1 : at] in (b"\xd6", b"\xd7")
            or frame[at - 2 : at - 1] == b"\xc7"
            or frame[at - 3 : at - 2] == b"\xc8"
            or frame[at - 5 : at - 4] == b"\xc9"
        ):
            return True
        runs += 1
        match = _FF_RUN.match(frame, at)
        at = frame.find(255, match.end() if match is not None else at + 1)
    return False


def decode(frame: bytes, *, max_frame_bytes: int) -> Message:
    """Decode and validate one frame received from a peer.

    Raises:
        RemoteProtocolError: the frame is oversized, undecodable, not a map, of an unknown
            kind, or has missing or mistyped fields. ``reply`` is the error frame to send; its
            ``id`` is the call id when the frame named one.
    """
    # A frame rejected whole still names its call when its id can be read (skipping, not
    # decoding, the rest), so the caller gets an error for that call instead of waiting for
    # its deadline (docs/protocol.md § 11.1).
    if len(frame) > max_frame_bytes:
        raise _bad(
            salvage_call_id(frame),
            f"frame of {len(frame)} bytes exceeds the limit of {max_frame_bytes} bytes",
            code=ErrorCode.TOO_LARGE,
            limit=max_frame_bytes,
        )
    try:
        raw = msgpack.unpackb(frame, raw=False, strict_map_key=True, ext_hook=refuse_extension_type)
    except ExtensionTypeRefused as exc:
        raise _bad(salvage_call_id(frame), str(exc)) from None
    except Exception as exc:  # msgpack raises several unrelated types for garbage input
        raise _bad(
            salvage_call_id(frame), f"undecodable frame: {type(exc).__name__}: {exc}"
        ) from None
    # msgpack builds timestamps (ext -1) itself, past ext_hook: look for one only where an
    # ext header can precede a 0xff (the type byte; never in UTF-8).
    if may_hold_timestamp(frame) and holds_timestamp(raw):
        raise _bad(salvage_call_id(frame), timestamp_refusal(raw))
    if type(raw) is not dict:
        raise _bad(None, f"frame must be a map, got {_type_name(raw)}")
    kind = raw.get("type")
    # Well-formed calls and results, nearly every frame, are checked in one expression; any
    # doubt falls through to the field-by-field readers, which name what is wrong.
    if kind == "call":
        fast = _fast_call(raw)
        if fast is not None:
            return fast
    elif kind == "result":
        call_id = raw.get("id")
        if type(call_id) is int and 0 <= call_id <= MAX_CALL_ID:
            return Result(id=call_id, value=raw.get("value"))
    elif kind == "cancel":
        # On the cancel-to-quiescence path, which runs in a process that was idle.
        call_id = raw.get("id")
        wire_reason = raw.get("reason", "caller")
        reason = _REASONS.get(wire_reason) if type(wire_reason) is str else None
        if type(call_id) is int and 0 <= call_id <= MAX_CALL_ID and reason is not None:
            return Cancel(id=call_id, reason=reason)
    call_id = _optional_id(raw)
    if not isinstance(kind, str):
        raise _bad(call_id, "frame has no string field 'type'")
    reader = _READERS.get(kind)
    if reader is None:
        raise _bad(call_id, f"unknown message type {kind!r}")
    return reader(_Fields(raw, kind, call_id))


class _Fields:
    """Typed access to one decoded map; every failure names the field and the message type."""

    __slots__ = ("call_id", "kind", "raw")

    def __init__(self, raw: dict[str, Any], kind: str, call_id: int | None) -> None:
        self.raw = raw
        self.kind = kind
        self.call_id = call_id

    def _get(self, key: str, types: type | tuple[type, ...], expected: str, default: Any) -> Any:
        value = self.raw.get(key, _MISSING)
        if value is _MISSING or (value is None and default is not _MISSING):
            if default is _MISSING:
                raise _bad(self.call_id, f"{self.kind}: missing field {key!r}")
            return default
        # bool is an int in Python, never in the protocol.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in _tuple(types)):
            raise _bad(
                self.call_id,
                f"{self.kind}: field {key!r} must be {expected}, got {_type_name(value)}",
            )
        return value

    def text(self, key: str, default: Any = ...) -> Any:
        return self._get(key, str, "a string", _MISSING if default is ... else default)

    def integer(self, key: str, default: Any = ...) -> Any:
        return self._get(key, int, "an integer", _MISSING if default is ... else default)

    def number(self, key: str, default: Any = ...) -> Any:
        return self._get(key, (int, float), "a number", _MISSING if default is ... else default)

    def mapping(self, key: str, default: Any = ...) -> Any:
        return self._get(key, dict, "a map", _MISSING if default is ... else default)

    def array(self, key: str) -> Any:
        return self._get(key, list, "an array", _MISSING)

    def id(self) -> int:
        if self.call_id is None:
            value = self.raw.get("id", _MISSING)
            what = "missing field 'id'" if value is _MISSING else "field 'id' must be a call id"
            raise _bad(None, f"{self.kind}: {what} (an integer 0..2**53-1)")
        return self.call_id


_MISSING: Any = object()


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _optional_id(raw: dict[str, Any]) -> int | None:
    value = raw.get("id")
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_CALL_ID:
        return value
    return None


def _fast_call(raw: dict[str, Any]) -> Call | None:
    """The call in ``raw`` if every field has its usual type, else ``None``."""
    call_id = raw.get("id")
    endpoint = raw.get("endpoint")
    args = raw.get("args")
    deadline_ms = raw.get("deadlineMs")
    supersede = raw.get("supersede")
    if (
        type(call_id) is int
        and 0 <= call_id <= MAX_CALL_ID
        and type(endpoint) is str
        and type(args) is dict
        and (deadline_ms is None or (type(deadline_ms) in _NUMBERS and deadline_ms >= 0))
        and (supersede is None or type(supersede) is str)
    ):
        return Call(
            id=call_id, endpoint=endpoint, args=args, deadline_ms=deadline_ms, supersede=supersede
        )
    return None


_NUMBERS = frozenset((int, float))
#: Cancel reasons by wire value.
_REASONS: dict[str, CancelReason] = {reason.value: reason for reason in CancelReason}


def _read_call(f: _Fields) -> Call:
    call_id = f.id()
    endpoint = f.text("endpoint")
    args = f.mapping("args", {})
    deadline_ms = f.number("deadlineMs", None)
    if deadline_ms is not None and not deadline_ms >= 0:  # also rejects NaN
        raise _bad(call_id, "call: field 'deadlineMs' must be >= 0")
    supersede = f.text("supersede", None)
    return Call(
        id=call_id, endpoint=endpoint, args=args, deadline_ms=deadline_ms, supersede=supersede
    )


def _read_cancel(f: _Fields) -> Cancel:
    call_id = f.id()
    reason = f.text("reason", CancelReason.CALLER.value)
    try:
        return Cancel(id=call_id, reason=CancelReason(reason))
    except ValueError:
        raise _bad(call_id, f"cancel: unknown reason {reason!r}") from None


def _read_result(f: _Fields) -> Result:
    return Result(id=f.id(), value=f.raw.get("value"))


def _read_error(f: _Fields) -> Error:
    raw_id = f.raw.get("id")
    if raw_id is not None and f.call_id is None:
        raise _bad(None, "error: field 'id' must be a call id or nil")
    return Error(
        id=f.call_id,
        code=f.text("code"),
        message=f.text("message", ""),
        details=f.mapping("details", {}),
    )


def _read_hello(f: _Fields) -> Hello:
    versions = f.array("versions")
    if not versions or not all(isinstance(v, int) and not isinstance(v, bool) for v in versions):
        raise _bad(None, "hello: field 'versions' must be a non-empty array of integers")
    return Hello(versions=tuple(versions), name=f.text("name", ""))


def _read_welcome(f: _Fields) -> Welcome:
    return Welcome(
        version=f.integer("version"),
        name=f.text("name", ""),
        heartbeat_ms=f.integer("heartbeatMs"),
        peer_timeout_ms=f.integer("peerTimeoutMs"),
        max_frame_bytes=f.integer("maxFrameBytes"),
        max_in_flight=f.integer("maxInFlight"),
    )


_READERS: dict[str, Callable[[_Fields], Message]] = {
    "call": _read_call,
    "cancel": _read_cancel,
    "result": _read_result,
    "error": _read_error,
    "hello": _read_hello,
    "welcome": _read_welcome,
    "ping": lambda f: Ping(),
    "pong": lambda f: Pong(),
    "bye": lambda f: Bye(),
}
assert set(_READERS) == set(MESSAGE_TYPES), "every message kind needs a reader"


def _bad(
    call_id: int | None,
    message: str,
    *,
    code: ErrorCode = ErrorCode.BAD_REQUEST,
    **details: Any,
) -> RemoteProtocolError:
    return RemoteProtocolError(message, reply=Error.of(call_id, code, message, **details))


def _type_name(value: object) -> str:
    match value:
        case None:
            return "nil"
        case bool():
            return "a boolean"
        case int():
            return "an integer"
        case float():
            return "a float"
        case str():
            return "a string"
        case bytes():
            return "binary"
        case list():
            return "an array"
        case Mapping():
            return "a map"
    return type(value).__name__
