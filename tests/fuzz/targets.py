"""Fuzz targets shared by the hypothesis properties and the atheris runs.

Each target takes arbitrary bytes and returns normally when the code under test either
accepted the input or rejected it with its documented, typed error. Any other exception
escapes, which is what both fuzzers report as a failure.
"""

from __future__ import annotations

from pathlib import Path

from actors.session_log._errors import LogReadError
from actors.session_log._reader import _restore
from actors.session_log._scan import parse_header_record, scan_raw
from wire._codec import decode, encode
from wire._errors import RemoteProtocolError
from wire._limits import ArgumentLimits, check_arguments, salvage_call_id
from wire._messages import Bye, Call, Hello, Message, Ping, Pong, Result
from wire._server_events import Send, StartCall
from wire._server_protocol import ServerLimits, ServerProtocol

__all__ = ["LOG_HEADER", "fuzz_frame", "fuzz_log_line", "read_log"]

#: A valid session header line; log-line fuzzing appends one line after it.
LOG_HEADER = (
    b'{"type":"session","version":0,"id":"fuzz","createdAt":1767225600000,'
    b'"cwd":"/w","delegationDepth":0}'
)
_LIMIT = 64 * 1024
_PEER = b"fuzzer"


def decode_frame(data: bytes) -> Message | None:
    """``decode``: a message, or ``None`` when it raised its typed error (with a reply)."""
    try:
        return decode(data, max_frame_bytes=_LIMIT)
    except RemoteProtocolError as exc:
        _check_rejection(exc)
        return None


def _check_rejection(exc: RemoteProtocolError) -> None:
    # Every rejection has a reply, and it names a call id only if it is a valid one.
    assert exc.reply is not None
    assert exc.reply.id is None or 0 <= exc.reply.id <= 2**53 - 1


def fuzz_frame(data: bytes) -> None:
    """The frame decoder, the id salvage, the argument limits and the server protocol on any
    bytes: typed errors only, every reply a valid frame, and the server serves on."""
    message = decode_frame(data)
    if message is not None:
        # What decodes re-encodes (our own frames are always decodable).
        again = decode(encode(message), max_frame_bytes=4 * _LIMIT)
        assert type(again) is type(message)
    salvaged = salvage_call_id(data)
    assert salvaged is None or 0 <= salvaged <= 2**53 - 1
    if isinstance(message, Call):
        check_arguments(message.args, ArgumentLimits(max_depth=8, max_items=64))
    server = ServerProtocol(ServerLimits(max_frame_bytes=_LIMIT, max_arg_depth=8))
    server.receive(_PEER, encode(Hello()), 0.0)
    for event in server.receive(_PEER, data, 0.0):
        if isinstance(event, Send):
            decode(event.frame, max_frame_bytes=4 * _LIMIT)  # every reply is a valid frame
        elif isinstance(event, StartCall):
            frame = server.finish_call(event.record, Result(id=event.record.call.id))
            assert frame is not None
    if isinstance(message, Bye | Hello):
        return  # the peer said goodbye or started over: it is forgotten on purpose
    replies = [e.frame for e in server.receive(_PEER, encode(Ping()), 0.0) if isinstance(e, Send)]
    assert replies == [encode(Pong())], "the server stopped serving the peer"


def read_log(data: bytes) -> None:
    """Scan and restore a whole plain log held in ``data`` (no file needed)."""
    scan = scan_raw(data)
    _restore(Path("fuzz/session.jsonl"), "none", scan, None)


def fuzz_log_line(data: bytes) -> None:
    """The DSH log reader on any line: as the header, and as an event after a good header."""
    line = data.replace(b"\n", b" ")
    try:
        parse_header_record(line)
    except LogReadError as exc:
        _check_log_error(exc)
    try:
        read_log(LOG_HEADER + b"\n" + line + b"\n")
    except LogReadError as exc:
        _check_log_error(exc)


def _check_log_error(exc: LogReadError) -> None:
    assert str(exc), "a log error must say what is wrong"
