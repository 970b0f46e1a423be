"""Byte-level reading of a transcript: header line, event lines, torn tails.

`session-log-format.md` §3, §6.1, §9 and §11. The scanner keeps the longest valid
contiguous event prefix. A complete line that fails to parse, holds a malformed packed
row, or breaks seq contiguity records an *issue* and stops the prefix; the issue is fatal
only if a later parseable line contains a `turn/end` (otherwise the bad tail is dropped
like a torn tail). In zstd mode that leniency applies only inside the torn last frame.
"""

from __future__ import annotations

from typing import Any

import attrs

from actors._log_chunks import ROW_TYPES, validate_row
from actors._log_errors import LogCorruptError, LogValidationError, LogVersionError
from actors._log_header import (
    RETIRED_KEYS_REASON,
    SESSION_FORMAT_VERSION,
    HeaderError,
    SessionHeader,
)
from actors._log_json import js_str, parse_header_line, parse_line
from actors._log_sequence import Item, PackedRun
from actors._log_zstd import decode_frame, decode_torn_prefix, scan_frames

__all__ = ["ScanResult", "TornTail", "parse_header_record", "scan_raw", "scan_zstd"]

_UNDEFINED = object()
NOT_ONE_HEADER_LINE = "corrupt Zstandard session log: first frame is not exactly one header line"


@attrs.frozen(kw_only=True)
class TornTail:
    """Where the committed prefix of a file ends, when bytes follow it (§6.1, §9)."""

    truncate_to: int
    """File offset to truncate to on repair (raw: end of the last good line; zstd: start
    of the torn frame)."""
    durable_count: int
    """Events wholly before `truncate_to`; later loaded events (recovered from a torn
    zstd frame) must be rewritten by a repair."""


@attrs.frozen(kw_only=True)
class ScanResult:
    """The header and the valid stored event prefix of one file."""

    header: SessionHeader
    items: list[Item]
    """Events (dicts) and packed runs, in seq order."""
    count: int
    """Number of stored events."""
    torn: TornTail | None


def parse_header_record(line: bytes, *, refuse_version: bool = True) -> SessionHeader:
    """Parse and check the header line (§4.2, §4.3).

    Args:
        line: the header line, without its newline.
        refuse_version: refuse a version other than 0 (reads do; listing does not).

    Raises:
        LogVersionError: `version` is a number other than 0 (checked before the shape).
        LogCorruptError: not JSON, not a session header, or retired policy keys.
        LogValidationError: a field fails a restore-layer type rule.
    """
    try:
        value = parse_header_line(line)
    except (ValueError, RecursionError):
        raise LogCorruptError("corrupt session log: header line is not valid JSON") from None
    if refuse_version and isinstance(value, dict):
        version = value.get("version")
        # "The refusal happens on the raw header before today's shape checks, so a
        # future header shape still yields 'upgrade the harness', never 'corrupt'."
        if isinstance(version, (int, float)) and not isinstance(version, bool):
            if version != SESSION_FORMAT_VERSION:
                raise LogVersionError(js_str(value.get("id", "undefined")), version)
    try:
        return SessionHeader.from_record(value)
    except HeaderError as error:
        if error.kind == "shape":
            raise LogCorruptError(
                f"corrupt session log: first line is not a session header ({error})"
            ) from None
        if error.kind == "retired":
            raise LogCorruptError(RETIRED_KEYS_REASON) from None
        session_id = value.get("id") if isinstance(value, dict) else None
        raise LogValidationError(js_str(session_id), str(error)) from None


def _is_turn_end(item: object) -> bool:
    return type(item) is dict and item.get("type") == "turn/end"


class _Scanner:
    """Incremental line scanner over plaintext that follows the header line."""

    __slots__ = ("base", "committed", "count", "fed", "fragment", "issue", "items", "line_no")

    def __init__(self, header_length: int) -> None:
        self.items: list[Item] = []
        self.count = 0
        self.issue: LogCorruptError | None = None
        self.line_no = 0
        self.fed = header_length
        self.committed = header_length
        self.base = header_length
        self.fragment = b""

    def write(self, chunk: bytes) -> None:
        data = self.fragment + chunk if self.fragment else chunk
        self.fed += len(chunk)
        lines = data.split(b"\n")
        self.fragment = lines.pop()  # without a newline: a torn tail (for now)
        base = self.base
        for line in lines:
            base += len(line) + 1
            self._consume(line, base)
        self.base = base

    def _consume(self, line: bytes, end: int) -> None:
        self.line_no += 1
        item: Any
        first_seq: object
        try:
            value = parse_line(line)
            tag = value.get("type") if type(value) is dict else None
            if isinstance(tag, str) and tag in ROW_TYPES:
                count = validate_row(value)
                item = PackedRun(int(value["seq0"]), count, line)
                first_seq = item.seq0
            else:
                item, count = value, 1
                first_seq = value.get("seq", _UNDEFINED) if type(value) is dict else _UNDEFINED
        except (ValueError, RecursionError):
            # A malformed packed row "is treated exactly like an unparsable line".
            if self.issue is None:
                self.issue = LogCorruptError(
                    f"corrupt session log: unparsable committed event at line {self.line_no}",
                    line=self.line_no,
                )
            return
        if self.issue is not None:
            if _is_turn_end(item):
                raise self.issue
            return
        expected = self.count
        if type(first_seq) not in (int, float) or first_seq != expected:
            got = "undefined" if first_seq is _UNDEFINED else js_str(first_seq)
            self.issue = LogCorruptError(
                f"corrupt session log: seq gap in committed region at line {self.line_no} "
                f"(expected {expected}, got {got})",
                line=self.line_no,
            )
            if _is_turn_end(item):
                raise self.issue
            return
        if type(item) is dict:
            # JSON may spell integers as 1.0; upstream holds them as plain numbers.
            if type(item["seq"]) is float:
                item["seq"] = expected
            time = item.get("time")
            if type(time) is float and time.is_integer():
                item["time"] = int(time)
        self.items.append(item)
        self.count += count
        self.committed = end


def scan_raw(buffer: bytes) -> ScanResult:
    """Scan a plain `.jsonl` transcript.

    Raises:
        LogCorruptError: no complete header line, a bad header, or a fatal line issue.
        LogVersionError: the header version is not 0.
    """
    newline = buffer.find(b"\n")
    if newline == -1:
        raise LogCorruptError("empty or header-less session log")
    header = parse_header_record(buffer[:newline])
    scanner = _Scanner(newline + 1)
    scanner.write(buffer[newline + 1 :])
    torn = None
    if scanner.committed < len(buffer):
        # "a final fragment without \n is a torn tail: ignored (and truncated on a
        # committing load)"; so is a dropped bad tail.
        torn = TornTail(truncate_to=scanner.committed, durable_count=scanner.count)
    return ScanResult(header=header, items=scanner.items, count=scanner.count, torn=torn)


def scan_zstd(buffer: bytes) -> ScanResult:
    """Scan a `.jsonl.zstd` transcript (§9).

    Raises:
        LogCorruptError: no complete header frame, a first frame that is not exactly one
            line, an undecodable or checksum-failing complete frame, any line defect
            inside a complete frame, or a fatal line issue.
        LogVersionError: the header version is not 0.
    """
    scan = scan_frames(buffer)
    if not scan.frames:
        raise LogCorruptError("empty or header-less Zstandard session log")
    start, end = scan.frames[0]
    first = decode_frame(buffer[start:end], offset=start)
    if not first or first.find(b"\n") != len(first) - 1:
        raise LogCorruptError(NOT_ONE_HEADER_LINE)
    header = parse_header_record(first[:-1])
    scanner = _Scanner(len(first))
    for start, end in scan.frames[1:]:
        scanner.write(decode_frame(buffer[start:end], offset=start))
    if scanner.committed != scanner.fed:
        raise LogCorruptError(
            "corrupt Zstandard session log: complete frame contains a torn JSONL record"
        )
    torn = None
    if scan.torn_start is not None:
        # "EOF inside the last frame → torn tail: the complete lines decodable from that
        # partial frame are kept, the rest dropped"; repair truncates to the frame start.
        durable = scanner.count
        scanner.write(decode_torn_prefix(buffer[scan.torn_start :]))
        torn = TornTail(truncate_to=scan.torn_start, durable_count=durable)
    return ScanResult(header=header, items=scanner.items, count=scanner.count, torn=torn)
