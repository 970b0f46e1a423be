"""Byte-level reading of a transcript: header line, event lines, torn tails.

`session-log-format` §3, §6.1, §9 and §11. The scanner keeps the longest valid
contiguous event prefix. A complete line that fails to parse, holds a malformed packed
row, or breaks seq contiguity records an *issue* and stops the prefix; the issue is fatal
only if a later parseable line contains a `turn/end` (otherwise the bad tail is dropped
like a torn tail). In zstd mode that leniency applies only inside the torn last frame.

From the first fencing epoch marker on (`_epochs`), lines also pass the epoch
filter: a zombie owner's lower-epoch batches after a higher epoch-open are dropped before the
seq check. Logs without markers never enter that path.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import attrs

from actors.session_log._chunks import ROW_TYPES, validate_row
from actors.session_log._epochs import EPOCH_OPEN_TYPE, FENCE_TYPES, EpochFilter, fence_epoch
from actors.session_log._errors import LogCorruptError, LogValidationError, LogVersionError
from actors.session_log._header import (
    RETIRED_KEYS_REASON,
    SESSION_FORMAT_VERSION,
    HeaderError,
    SessionHeader,
)
from actors.session_log._idempotency import partial_keyed_batch
from actors.session_log._json import js_str, parse_header_line, parse_line
from actors.session_log._sequence import Item, PackedRun
from actors.session_log._zstd import decode_frame, decode_torn_prefix, scan_frames

__all__ = [
    "SCAN_CHUNK",
    "ScanResult",
    "TornTail",
    "parse_header_record",
    "scan_raw",
    "scan_zstd",
]

SCAN_CHUNK = 1 << 20
"""Bytes of plaintext split into lines at a time. Scanning a whole buffer at once would hold
every line of the file as a separate object on top of the file and the parsed events (the peak
memory of a cold load; issue 3 bounds it at 3 × the decoded size)."""

_UNDEFINED = object()
_SHARED_DEPTH = 4
"""Envelope, ``data``, ``message`` and content-block keys (see `_share_keys`)."""
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
    epoch: int | None = None
    """The highest fencing epoch opened in the log, None when it has no epoch markers
    (`_epochs`)."""


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


_intern = sys.intern


def _share_keys(value: Any, depth: int) -> Any:
    """Rebuild dicts (down to `depth` levels) with interned keys.

    `json` shares equal keys only within one decode call, so each event line brings its own
    copies of ``"type"``, ``"seq"``, ``"data"``, ``"turn"``, … (about 50 bytes each, a fifth
    of a small event). A loaded log keeps its events, so sharing the keys of the upper
    levels, where events repeat the same envelope and payload keys, cuts its memory.
    """
    kind = type(value)
    if kind is dict:
        if depth:
            depth -= 1
            return {
                _intern(key): _share_keys(item, depth) if type(item) in _NESTED else item
                for key, item in value.items()
            }
        return {_intern(key): item for key, item in value.items()}
    if kind is list and depth:
        depth -= 1
        return [_share_keys(item, depth) if type(item) in _NESTED else item for item in value]
    return value


_NESTED = (dict, list)


def _normalized(event: dict[str, Any], seq: int) -> dict[str, Any]:
    """One committed event as kept: keys shared, and integers that JSON spelled as 1.0 made
    plain numbers, as upstream holds them."""
    event = _share_keys(event, _SHARED_DEPTH)
    if type(event["seq"]) is float:
        event["seq"] = seq
    time = event.get("time")
    if type(time) is float and time.is_integer():
        event["time"] = int(time)
    return event


def _is_turn_end(item: object) -> bool:
    return type(item) is dict and item.get("type") == "turn/end"


_SPECIAL_TYPES = ROW_TYPES | FENCE_TYPES
"""Types the scanner looks at twice: packed rows, and fencing markers (which switch it to
`_Scanner.consume_fenced`, so plain logs never pay for the epoch filter)."""


class _Scanner:
    """Incremental line scanner over plaintext that follows the header line."""

    __slots__ = (
        "base",
        "committed",
        "count",
        "fed",
        "fence",
        "issue",
        "items",
        "line_no",
        "parts",
    )

    def __init__(self, header_length: int) -> None:
        self.items: list[Item] = []
        #: The epoch filter, from the first epoch marker on (`consume_fenced`).
        self.fence: EpochFilter | None = None
        self.count = 0
        self.issue: LogCorruptError | None = None
        self.line_no = 0
        self.fed = header_length
        self.committed = header_length
        self.base = header_length
        # Bytes after the last newline fed so far: a torn tail unless more follows. A list,
        # so a line longer than many chunks is joined once, not re-copied per chunk.
        self.parts: list[bytes] = []

    def write(self, chunk: bytes) -> None:
        """Feed the next plaintext bytes; every line they complete is consumed."""
        self.fed += len(chunk)
        if chunk.find(b"\n") == -1:
            if chunk:
                self.parts.append(chunk)
            return
        data = b"".join((*self.parts, chunk)) if self.parts else chunk
        lines = data.split(b"\n")
        del data
        tail = lines.pop()  # without a newline: a torn tail (for now)
        self.parts = [tail] if tail else []
        base = self.base
        remaining = iter(lines)
        if self.fence is None:
            for line in remaining:
                base += len(line) + 1
                if self.consume_plain(line, base):
                    break  # an epoch marker: the rest of the log goes through the filter
        for line in remaining:
            base += len(line) + 1
            self.consume_fenced(line, base)
        self.base = base

    def consume_plain(self, line: bytes, end: int) -> bool:
        """Consume one line of a log without epoch markers (so far); True when the line was
        the first marker, after which every line goes to `consume_fenced`."""
        self.line_no += 1
        item: Any
        first_seq: object
        try:
            value = parse_line(line)
            tag = value.get("type") if type(value) is dict else None
            if isinstance(tag, str) and tag in _SPECIAL_TYPES:
                if tag in FENCE_TYPES:
                    self.line_no -= 1
                    self.fence = EpochFilter()
                    self.consume_fenced(line, end)
                    return True
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
            return False
        if self.issue is not None:
            if _is_turn_end(item):
                raise self.issue
            return False
        expected = self.count
        if type(first_seq) not in (int, float) or first_seq != expected:
            self.issue = self._seq_gap(first_seq, expected)
            if _is_turn_end(item):
                raise self.issue
            return False
        if type(item) is dict:
            item = _normalized(item, expected)
        self.items.append(item)
        self.count += count
        self.committed = end
        return False

    def _seq_gap(self, first_seq: Any, expected: int) -> LogCorruptError:
        got = "undefined" if first_seq is _UNDEFINED else js_str(first_seq)
        return LogCorruptError(
            f"corrupt session log: seq gap in committed region at line {self.line_no} "
            f"(expected {expected}, got {got})",
            line=self.line_no,
        )

    def consume_fenced(self, line: bytes, end: int) -> None:
        """Consume one line once the log has shown an epoch marker: `consume_plain` plus the
        epoch filter (`_epochs`). Dropped zombie lines count as consumed (they are
        whole, well-formed lines), so they are neither torn tails nor issues."""
        self.line_no += 1
        fence = self.fence
        assert fence is not None
        item: Any
        first_seq: object
        marker: int | None = None
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
                if isinstance(tag, str) and tag in FENCE_TYPES:
                    marker = fence_epoch(value)
        except (ValueError, RecursionError):
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
        if marker is not None:
            if (
                tag == EPOCH_OPEN_TYPE
                and marker > fence.epoch
                and type(first_seq) is int
                and 0 <= first_seq < expected
            ):
                # A zombie wrote between the new owner's read and its open: roll its
                # (never acknowledged) batches back so the open continues the log.
                cut = fence.rollback_to(first_seq, marker)
                if cut is not None:
                    del self.items[cut:]
                    self.count = expected = first_seq
            if not fence.admit_marker(marker):
                self.committed = end
                return
        elif fence.skipping:
            self.committed = end
            return
        if type(first_seq) not in (int, float) or first_seq != expected:
            self.issue = self._seq_gap(first_seq, expected)
            if _is_turn_end(item):
                raise self.issue
            return
        if type(item) is dict:
            item = _normalized(item, expected)
        if marker is not None:
            fence.record_mark(len(self.items), expected, marker)
        self.items.append(item)
        self.count += count
        self.committed = end

    @property
    def epoch(self) -> int | None:
        """The highest epoch opened, None before any marker."""
        fence = self.fence
        return fence.epoch if fence is not None and fence.epoch >= 0 else None


def scan_raw(source: bytes | Iterable[bytes]) -> ScanResult:
    """Scan a plain `.jsonl` transcript.

    Args:
        source: the whole file, or its bytes as successive chunks (any sizes; a file read
            in chunks is never held whole in memory).

    Raises:
        LogCorruptError: no complete header line, a bad header, or a fatal line issue.
        LogVersionError: the header version is not 0.
    """
    chunks = _chunked(source) if isinstance(source, (bytes, bytearray)) else iter(source)
    head: list[bytes] = []
    for chunk in chunks:
        newline = chunk.find(b"\n")
        if newline == -1:
            head.append(chunk)
            continue
        header_line = b"".join((*head, chunk[:newline]))
        header = parse_header_record(header_line)
        scanner = _Scanner(len(header_line) + 1)
        scanner.write(chunk[newline + 1 :])
        del chunk, head
        for chunk in chunks:
            scanner.write(chunk)
        break
    else:
        raise LogCorruptError("empty or header-less session log")
    torn = None
    if scanner.committed < scanner.fed:
        # "a final fragment without \n is a torn tail: ignored (and truncated on a
        # committing load)"; so is a dropped bad tail.
        torn = TornTail(truncate_to=scanner.committed, durable_count=scanner.count)
    return ScanResult(
        header=header,
        items=scanner.items,
        count=scanner.count,
        torn=torn,
        epoch=scanner.epoch,
    )


def _chunked(buffer: bytes | bytearray) -> Iterable[bytes]:
    view = memoryview(buffer)
    for start in range(0, len(buffer), SCAN_CHUNK):
        yield bytes(view[start : start + SCAN_CHUNK])


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
        recovered_from = len(scanner.items)
        scanner.write(decode_torn_prefix(buffer[scan.torn_start :]))
        # A keyed batch is all or nothing (`_idempotency`): one cut inside the torn frame
        # is dropped whole, so its key reads as never written and a retry writes it once.
        cut = partial_keyed_batch(scanner.items, recovered_from, scanner.count)
        if cut is not None:
            key = scanner.items[cut]
            assert type(key) is dict  # a key record, not a packed row
            scanner.count = key["seq"]
            del scanner.items[cut:]
        torn = TornTail(truncate_to=scan.torn_start, durable_count=durable)
    return ScanResult(
        header=header,
        items=scanner.items,
        count=scanner.count,
        torn=torn,
        epoch=scanner.epoch,
    )
