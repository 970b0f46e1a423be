"""Loading DSH session logs: the whole pipeline of `session-log-format` §6.

load = backend read (§6.1, §9) → id check → legacy import (§6.3) and legacy refusals
(§6.2) → unknown-type guard (§6.2) → synthetic crash closers (§6.4) → restore
validation (§6.5) with the surface fold (§6.6). The result's events are what the
surface is folded from and what `captured_through_seq` refers to.

In a fenced (clustered) log the backend read already left out a zombie owner's lower-epoch
batches that follow a higher epoch-open (`actors.session_log._epochs`); the kept epoch records are
ordinary ignorable events, as upstream reads them.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from actors.session_log._errors import (
    LogCorruptError,
    LogLayoutError,
    LogNotFoundError,
    LogReadError,
    LogUnsupportedError,
    LogValidationError,
)
from actors.session_log._events import (
    KNOWN_SESSION_EVENT_TYPES,
    SURFACE_EVENT_TYPES,
    EventError,
    check_envelope,
    check_message_shape,
    check_request_header,
)
from actors.session_log._header import RETIRED_KEYS_REASON, HeaderError, SessionHeader
from actors.session_log._json import js_str
from actors.session_log._layout import (
    Compression,
    compression_of,
    find_session_log,
    iter_session_logs,
    log_path,
)
from actors.session_log._legacy import check_supported_vocabulary, import_legacy_event
from actors.session_log._repair import interrupted_turn_closers
from actors.session_log._scan import (
    NOT_ONE_HEADER_LINE,
    SCAN_CHUNK,
    ScanResult,
    TornTail,
    parse_header_record,
    scan_raw,
    scan_zstd,
)
from actors.session_log._sequence import EventSequence, Item, PackedRun
from actors.session_log._surface import (
    SurfaceError,
    SurfaceFolder,
    SurfaceReplacement,
    SurfaceSnapshot,
)
from actors.session_log._zstd import decode_frame, scan_frames

__all__ = [
    "ListedSession",
    "LoadedSession",
    "TornTail",
    "list_sessions",
    "load_session",
    "load_session_by_id",
    "read_header",
]

_STABLE_READ_ATTEMPTS = 50
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@attrs.frozen(kw_only=True, eq=False)
class LoadedSession:
    """A validated session log, as upstream's cold inspection sees it."""

    path: Path
    """The transcript that was read."""
    compression: Compression
    """Its physical encoding."""
    header: SessionHeader
    """The header line."""
    events: Sequence[Mapping[str, Any]]
    """All events after legacy import, plus synthetic closers; ``events[i]["seq"] == i``.

    Plain dicts; treat them as read-only. Packed chunk rows expand on access.
    """
    captured_through_seq: int | None
    """Seq of the last event (any type, closers included), or None for an empty log."""
    surface: tuple[int, ...]
    """Current surface seqs, in surface order."""
    replacements: tuple[SurfaceReplacement, ...]
    """Surface replacements (compaction) in event order."""
    stored_count: int
    """Events read from the file; ``events[stored_count:]`` are synthetic closers."""
    torn: TornTail | None
    """Where the committed prefix ends, when bytes follow it in the file."""
    epoch: int | None = None
    """The highest fencing epoch opened in the log (`actors.session_log._epochs`); None for a log
    without epoch markers. Lower-epoch batches that followed it were left out."""

    @property
    def closers(self) -> tuple[Mapping[str, Any], ...]:
        """The synthetic crash closers appended in memory (§6.4)."""
        return tuple(self.events[self.stored_count :])

    @property
    def needs_repair(self) -> bool:
        """Whether a committing load would change the file (torn tail or closers)."""
        return self.torn is not None or self.stored_count != len(self.events)

    def fold(self) -> SurfaceFolder:
        """A fresh surface fold of these events, ready to take further events (§6.6)."""
        folder = SurfaceFolder()
        events = self.events
        items = events.items if isinstance(events, EventSequence) else tuple(events)
        for item in items:
            if isinstance(item, PackedRun):
                # A validated packed row expands to valid non-surface chunk events.
                folder.skip(item.count)
            else:
                folder.apply(item)
        return folder

    def surface_events(self) -> tuple[Mapping[str, Any], ...]:
        """Return the current surface events, in surface order."""
        return tuple(self.events[seq] for seq in self.surface)

    def surface_snapshot(self) -> SurfaceSnapshot:
        """Return upstream's `readSurface` result for this observation (§6.6)."""
        return SurfaceSnapshot(
            session=self.header,
            captured_through_seq=self.captured_through_seq,
            events=self.surface_events(),
        )


@attrs.frozen
class ListedSession:
    """One session found by listing: its header and transcript path."""

    header: SessionHeader
    path: Path


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _scan_stable(path: Path) -> tuple[Compression, ScanResult]:
    """Scan a transcript, retrying while it changes underneath.

    §9: "the backend reads a file only when its stat identity (dev, inode, size, ns
    timestamps) is the same before and after the read". Raw logs are scanned in chunks as
    they are read (never held whole); zstd logs are read whole (compressed) and decoded a
    frame at a time. A scan error on a file that changed meanwhile is retried, not reported.
    """
    try:
        for _ in range(_STABLE_READ_ATTEMPTS):
            before = _identity(os.stat(path))
            failure: LogReadError | None = None
            with open(path, "rb") as file:
                compression = _compression_for(path, file.read(len(_ZSTD_MAGIC)))
                file.seek(0)
                try:
                    if compression == "zstd":
                        scan = scan_zstd(file.read())
                    else:
                        scan = scan_raw(iter(functools.partial(file.read, SCAN_CHUNK), b""))
                except LogReadError as error:
                    failure = error
            if _identity(os.stat(path)) == before:
                if failure is not None:
                    raise failure
                return compression, scan
    except FileNotFoundError:
        raise LogNotFoundError("session log not found", path=path) from None
    except OSError as error:
        raise LogReadError(f"cannot read session log: {error.strerror}", path=path) from None
    raise LogReadError("session log kept changing while it was read", path=path)


def _compression_for(path: Path, start: bytes) -> Compression:
    declared = compression_of(path)
    if declared is not None:
        return declared
    return "zstd" if start.startswith(_ZSTD_MAGIC) else "none"


def load_session(path: str | os.PathLike[str], *, expected_id: str | None = None) -> LoadedSession:
    """Load and validate one transcript (read-only: closers are added in memory only).

    Args:
        path: a ``session.jsonl`` or ``session.jsonl.zstd`` file (other names are sniffed).
        expected_id: the id the caller asked for; the header must carry it.

    Returns:
        The loaded session.

    Raises:
        LogNotFoundError: the file does not exist.
        LogCorruptError: line- or frame-level damage (§6.1, §9).
        LogVersionError: the header version is not 0 (§4.3).
        LogUnsupportedError: an unknown event type without ``ignorable: true`` (§6.2).
        LogValidationError: the header or events fail restore validation (§6.5).
        LogReadError: the file cannot be read.
    """
    file = Path(path)
    try:
        with _collection_paused():
            compression, scan = _scan_stable(file)
            return _restore(file, compression, scan, expected_id)
    except LogReadError as error:
        raise error.attach_path(file) from None


_pause_lock = threading.Lock()
_pauses = 0
_resume = False


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """Pause automatic garbage collection while a transcript loads.

    Decoded JSON never forms reference cycles, so collecting during a load frees nothing;
    yet every few hundred allocations the collector runs, and as the loaded events pile up
    its full passes traverse all of them again: a third of a 20 MB load's CPU time, each
    pass holding the GIL (the event loop stalls meanwhile). Pauses nest across threads; the
    last one to end runs the young-generation pass in this (worker) thread, so the event
    loop does not inherit it, and re-enables the collector only if it was enabled before.
    """
    global _pauses, _resume
    with _pause_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0:
                gc.collect(0)
                if _resume:
                    gc.enable()


def _restore(
    path: Path, compression: Compression, scan: ScanResult, expected_id: str | None
) -> LoadedSession:
    header = scan.header
    session_id = header.id if expected_id is None else expected_id
    items = scan.items
    try:
        if expected_id is not None and header.id != expected_id:
            raise EventError(
                f'stored session identity mismatch: requested "{expected_id}", '
                f'header contains "{header.id}"'
            )
        singles = [item for item in items if type(item) is dict]
        check_supported_vocabulary(singles, session_id)
        _import_legacy(items, header.id)
        _guard_unknown_types(items, header.id)
        closers = interrupted_turn_closers(
            (item for item in items if type(item) is dict), last=_last_event(items)
        )
        items.extend(closers)
        header.validate_for_restore()
        folder = _validate_events(items)
    except (EventError, SurfaceError, HeaderError) as error:
        raise LogValidationError(session_id, str(error)) from None
    events = EventSequence(items)
    total = len(events)
    fold = folder.result()
    return LoadedSession(
        path=path,
        compression=compression,
        header=header,
        events=events,
        captured_through_seq=total - 1 if total else None,
        surface=fold.nodes,
        replacements=fold.replacements,
        stored_count=scan.count,
        torn=scan.torn,
        epoch=scan.epoch,
    )


def _import_legacy(items: list[Item], session_id: str) -> None:
    message_ids: dict[int, str] = {}
    for index, item in enumerate(items):
        if type(item) is not dict:
            continue
        event = import_legacy_event(item, session_id, message_ids)
        if event is not item:
            items[index] = event
        kind = event.get("type")
        if isinstance(kind, str) and kind in SURFACE_EVENT_TYPES:
            check_message_shape(event, f"session event at seq {js_str(event['seq'])}")


def _guard_unknown_types(items: list[Item], session_id: str) -> None:
    for item in items:
        if type(item) is not dict:
            continue
        kind = item.get("type")
        known = isinstance(kind, str) and kind in KNOWN_SESSION_EVENT_TYPES
        if known or item.get("ignorable") is True:
            continue
        shown = js_str(kind) if "type" in item else "undefined"
        raise LogUnsupportedError(
            f'session "{session_id}" contains event type "{shown}" (seq {js_str(item["seq"])}) '
            "unknown to this harness and not marked ignorable; refusing to interpret the log — "
            "it was likely written by a newer harness"
        )


def _last_event(items: list[Item]) -> Mapping[str, Any] | None:
    if not items:
        return None
    last = items[-1]
    return last.expand()[-1] if isinstance(last, PackedRun) else last


def _validate_events(items: list[Item]) -> SurfaceFolder:
    folder = SurfaceFolder()
    for item in items:
        if type(item) is not dict:
            # A validated packed row expands to valid non-surface chunk events.
            assert isinstance(item, PackedRun)
            folder.skip(item.count)
            continue
        index = folder.next_seq
        check_envelope(item, index)
        if item["type"] == "request/header":
            check_request_header(item["data"], index)
        folder.apply(item)
    return folder


def read_header(path: str | os.PathLike[str]) -> SessionHeader | None:
    """Read only the header of a transcript, with listing semantics (§2.4).

    Raw files: the bytes up to the first newline; zstd files: the first frame only.

    Returns:
        The header, or None when the file has no complete first line or its first line
        is not a well-formed header (such files are skipped by listing). The version is
        not checked: a v1 header with today's shape is returned.

    Raises:
        LogCorruptError: (zstd) the first frame fails to decode or is not exactly one
            line, or the header uses the retired policy keys.
        LogReadError: the file cannot be read.
    """
    file = Path(path)
    try:
        first = _first_record(file)
    except OSError as error:
        raise LogReadError(f"cannot read session log: {error.strerror}", path=file) from None
    except LogReadError as error:
        raise error.attach_path(file) from None
    if first is None:
        return None
    try:
        return parse_header_record(first, refuse_version=False)
    except LogCorruptError as error:
        if error.reason == RETIRED_KEYS_REASON:
            raise error.attach_path(file) from None
        return None
    except LogReadError:
        return None


def _first_record(path: Path) -> bytes | None:
    with open(path, "rb") as file:
        if compression_of(path) == "zstd":
            content = b""
            while chunk := file.read(8192):
                content += chunk
                scan = scan_frames(content, max_frames=1)
                if scan.frames:
                    start, end = scan.frames[0]
                    plaintext = decode_frame(content[start:end], offset=start)
                    if not plaintext or plaintext.find(b"\n") != len(plaintext) - 1:
                        raise LogCorruptError(NOT_ONE_HEADER_LINE)
                    return plaintext[:-1]
            return None
        line = b""
        while chunk := file.read(8192):
            newline = chunk.find(b"\n")
            if newline != -1:
                return line + chunk[:newline]
            line += chunk
        return None


def _check_identity(
    root: Path, path: Path, header: SessionHeader, compression: Compression
) -> None:
    # §2.3: recomputing the path from the header's id + cwd must yield the file read
    # (case-insensitive filesystems may match through realpath).
    try:
        expected = log_path(root, header.cwd, header.id, compression)
    except ValueError as error:
        raise LogLayoutError(f"session header cannot name a log path: {error}", path=path) from None
    if expected != path and os.path.realpath(expected) != os.path.realpath(path):
        raise LogLayoutError(
            f'session log does not sit where its header says (expected "{expected}")', path=path
        )


def list_sessions(
    root: str | os.PathLike[str], compression: Compression = "zstd"
) -> list[ListedSession]:
    """List the sessions under a DSH sessions root, reading headers only (§2.4).

    Files without a complete, well-formed header line are skipped. The result is in
    directory order; the query layer sorts newest first (`created_at` desc, then id).

    Raises:
        LogLayoutError: mixed encodings, a flat-layout file, a header whose id or cwd
            cannot name a path or names another path, or a duplicate id.
        LogCorruptError: (zstd) a first frame that fails to decode or is not one line.
    """
    base = Path(root)
    listed: list[ListedSession] = []
    seen: set[str] = set()
    for path in iter_session_logs(base, compression):
        header = read_header(path)
        if header is None:
            continue
        _check_identity(base, path, header, compression)
        if header.id in seen:
            raise LogLayoutError(
                f'duplicate JSONL session id "{header.id}" appears in multiple project directories',
                path=path,
            )
        seen.add(header.id)
        listed.append(ListedSession(header, path))
    return listed


def load_session_by_id(
    root: str | os.PathLike[str], session_id: str, compression: Compression = "zstd"
) -> LoadedSession:
    """Find a session's transcript under a DSH root by id and load it (§2.3).

    Raises:
        LogNotFoundError: no transcript exists for the id.
        LogLayoutError: layout violations, or the file does not sit where its header says.
        LogReadError: any load failure (see `load_session`).
    """
    base = Path(root)
    path = find_session_log(base, session_id, compression)
    if path is None:
        raise LogNotFoundError(f'session "{session_id}" not found')
    loaded = load_session(path, expected_id=session_id)
    _check_identity(base, path, loaded.header, compression)
    return loaded
