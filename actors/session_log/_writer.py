"""The single writer of one DSH session log (synchronous file I/O).

`session-log-format` §2.1 and §9. Creating a session writes nothing; the first flush
materialises header and first batch together (temp file, fsync, hard-link publish, so a crash
never leaves a half-written log). Every later flush appends one batch: one zstd frame (or raw
lines) holding every event appended since the last flush, with chunk runs packed. The owner
decides when to flush (upstream: a fixed 200 ms window and explicit barriers); `pending_since`
supports such a window. A batch that fails to write leaves nothing in the file and is discarded:
the writer goes back to its last durable batch (`actors.session_log._checkpoint`).

A writer given a fencing epoch (a clustered owner) opens its first batch with an epoch-open
record and every later batch with an epoch marker (`actors.session_log._epochs`); a writer without
one that opens a log already fenced continues under the log's epoch, so a plain writer never
leaves records that readers would count in a zombie's batch. Plain logs stay plain.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from actors.session_log._batch import BatchWriter
from actors.session_log._checkpoint import Checkpoint
from actors.session_log._errors import LogWriteError
from actors.session_log._events import EventError
from actors.session_log._header import HeaderError, SessionHeader
from actors.session_log._json import dumps_line, parse_line
from actors.session_log._layout import Compression, compression_of
from actors.session_log._legacy import check_new_event
from actors.session_log._reader import LoadedSession, load_session
from actors.session_log._resume import commit_repair, resumption
from actors.session_log._surface import SurfaceError, SurfaceFolder
from actors.session_log._title_fold import TitleFold
from actors.session_log._titles import SessionTitle, SubagentDescriptor, normalize_title

__all__ = ["DEFAULT_BATCH_DELAY", "SessionLogWriter"]

DEFAULT_BATCH_DELAY = 0.2
"""Upstream's write-behind window (`writeBatchMaxDelayMs`, 200 ms, fixed, non-resetting)."""


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


class SessionLogWriter:
    """Appends events to one session log; the log's only writer.

    Use `create` for a new session or `open` for an existing log. The writer assigns
    `seq` and `time`, validates every event against the same rules the reader applies
    (so what it writes always loads), and keeps appended events pending until `flush`.
    Not thread-safe: one owner calls it (e.g. an actor via ``trio.to_thread``).
    """

    def __init__(
        self,
        *,
        path: Path,
        header: SessionHeader,
        compression: Compression,
        fsync: bool,
        pack_chunks: bool,
        clock: Callable[[], int],
        folder: SurfaceFolder,
        durable_count: int = 0,
        titles: TitleFold | None = None,
        epoch: int | None = None,
        epoch_opened: bool = False,
    ) -> None:
        """Private; use `create` or `open`."""
        self._path = path
        self._header = header
        self._compression: Compression = compression
        self._clock = clock
        self._folder = folder
        self._batches = BatchWriter(
            path,
            header,
            compression=compression,
            fsync=fsync,
            pack_chunks=pack_chunks,
            durable_count=durable_count,
            epoch=epoch,
            epoch_opened=epoch_opened,
        )
        self._closed = False
        self._titles = titles if titles is not None else TitleFold()
        self._checkpoint = Checkpoint()

    # --- construction ---

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        header: SessionHeader,
        *,
        fsync: bool = True,
        pack_chunks: bool = True,
        clock: Callable[[], int] | None = None,
        epoch: int | None = None,
    ) -> SessionLogWriter:
        """Start a new session log at `path`; nothing is written until the first flush.

        Args:
            path: the transcript; its suffix (``.jsonl.zstd`` or ``.jsonl``) selects the
                encoding. Use `log_path(root, header.cwd, header.id)` for DSH's layout.
            header: the session header (version 0, absolute cwd if any).
            fsync: make every flushed batch durable (fsync file and directories).
            pack_chunks: pack `assistant/chunk` delta runs into rows (upstream default).
            clock: returns the current time in epoch milliseconds (for `time`).
            epoch: the fencing epoch to write under (None: a plain log).

        Raises:
            LogWriteError: the header is invalid, the suffix unknown, or a log exists.
        """
        file = Path(path)
        compression = compression_of(file)
        if compression is None:
            raise LogWriteError(f"{file}: name must end in .jsonl.zstd or .jsonl")
        try:
            header.validate_for_restore()
        except HeaderError as error:
            raise LogWriteError(f"{file}: {error}") from None
        if file.exists():
            raise LogWriteError(
                f'{file}: session "{header.id}" already has a persisted log on disk; '
                "open it instead of creating"
            )
        return cls(
            path=file,
            header=header,
            compression=compression,
            fsync=fsync,
            pack_chunks=pack_chunks,
            clock=clock or _epoch_ms,
            folder=SurfaceFolder(),
            epoch=epoch,
        )

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        loaded: LoadedSession | None = None,
        fsync: bool = True,
        pack_chunks: bool = True,
        clock: Callable[[], int] | None = None,
        epoch: int | None = None,
    ) -> SessionLogWriter:
        """Open an existing log for appending, committing any crash repair first.

        Loads the log (see `load_session`) unless `loaded` is given. A torn tail is
        truncated; events recovered from a torn zstd frame and the synthetic closers (§6.4)
        are rewritten as one new batch ("a resume commits them"). Appends continue at the
        next seq.

        Args:
            path: the transcript.
            loaded: the transcript as already loaded by the caller, who guarantees that the
                file has not changed since (e.g. it holds the session's write lock and
                compared the file's identity); saves reading and validating it again.
            fsync, pack_chunks, clock: as for `create`.
            epoch: the fencing epoch to write under; None continues under the log's own
                highest epoch, if it has one (else the log stays plain). Under an epoch the
                repair batch opens with the epoch record.

        Raises:
            LogReadError: the log does not load.
            StaleEpochError: ``epoch`` is lower than an epoch the log already opened.
            LogWriteError: the repair cannot be written.
        """
        if loaded is None:
            loaded = load_session(path)
        resumed = resumption(loaded, epoch)
        durable = resumed.durable_count
        writer = cls(
            path=loaded.path,
            header=loaded.header,
            compression=loaded.compression,
            fsync=fsync,
            pack_chunks=pack_chunks,
            clock=clock or _epoch_ms,
            folder=loaded.fold(),
            durable_count=durable,
            titles=TitleFold.of(loaded.events),
            epoch=resumed.epoch,
            epoch_opened=resumed.epoch_opened,
        )
        try:
            folder = commit_repair(writer._batches, loaded, durable, writer._titles, writer._clock)
        except BaseException:
            writer._batches.close()
            raise
        if folder is not None:
            writer._folder = folder
        return writer

    # --- state ---

    @property
    def path(self) -> Path:
        """The transcript path."""
        return self._path

    @property
    def header(self) -> SessionHeader:
        """The session header."""
        return self._header

    @property
    def compression(self) -> Compression:
        """The transcript's physical encoding."""
        return self._compression

    @property
    def next_seq(self) -> int:
        """The seq the next appended event gets (= events appended so far)."""
        return self._folder.next_seq

    @property
    def durable_count(self) -> int:
        """Events written by completed flushes (durable when `fsync` is on)."""
        return self._batches.durable_count

    @property
    def pending_count(self) -> int:
        """Events appended but not yet flushed."""
        return self._batches.pending_count

    @property
    def pending_since(self) -> float | None:
        """`time.monotonic()` of the oldest pending append, or None when nothing is pending."""
        return self._batches.pending_since

    @property
    def pending_bytes(self) -> int:
        """Bytes of the pending events' lines (before packing and compression)."""
        return self._batches.pending_bytes

    @property
    def surface(self) -> tuple[int, ...]:
        """Current surface seqs, including pending events."""
        return self._folder.nodes

    @property
    def title(self) -> SessionTitle | None:
        """The current title (last `session/title` appended or loaded)."""
        return self._titles.title

    @property
    def subagent_descriptor(self) -> SubagentDescriptor | None:
        """The first valid `subagent/descriptor` of the log, if any."""
        return self._titles.descriptor

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    @property
    def epoch(self) -> int | None:
        """The fencing epoch this writer writes under, None for a plain log."""
        return self._batches.epoch

    def set_epoch(self, epoch: int) -> None:
        """Write under ``epoch`` from the next batch on (a new, higher claim writes a new
        epoch-open record).

        Raises:
            StaleEpochError: ``epoch`` is lower than the writer's.
        """
        self._batches.set_epoch(epoch)

    def next_marker(self) -> dict[str, Any] | None:
        """The epoch record the next appended events must follow, if any: ``{type, data,
        ignorable}`` of an epoch-open (the writer has not opened under its epoch yet) or of
        an epoch marker (a new batch: nothing is pending); None when the events join the
        pending batch, or the log is plain."""
        return self._batches.next_marker()

    # --- appending ---

    def append(
        self,
        event_type: str,
        data: Any,
        *,
        surface_op: str | Mapping[str, int] | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
        time_ms: int | None = None,
    ) -> Mapping[str, Any]:
        """Validate and queue one event; the writer assigns `seq` (and `time`).

        Args:
            event_type: the event type (one of the known types unless `ignorable`).
            data: the JSON payload (snapshotted now; later mutation has no effect).
            surface_op: ``"append"`` or ``{"op": "replace", "start": s, "end": e}``;
                required on the three surface types, forbidden elsewhere.
            source_event_seqs: provenance; distinct seqs earlier than this event, and
                every shadowed seq of a replacement.
            ignorable: mark an event readers may skip when they do not know its type.
            time_ms: epoch ms to record instead of the clock's.

        Returns:
            The event as recorded (a detached plain dict).

        Raises:
            LogWriteError: the writer is closed or the event breaks a rule; the writer's
                state is unchanged.
        """
        if self._closed:
            raise LogWriteError(f"{self._path}: writer is closed")
        self._begin_batch(None)  # _validate folds in place
        marker = self.next_marker()
        if marker is not None:
            self._append_one(
                marker["type"], marker["data"], None, None, ignorable=True, time_ms=time_ms
            )
        return self._append_one(
            event_type, data, surface_op, source_event_seqs, ignorable=ignorable, time_ms=time_ms
        )

    def _append_one(
        self,
        event_type: str,
        data: Any,
        surface_op: str | Mapping[str, int] | None,
        source_event_seqs: Sequence[int] | None,
        *,
        ignorable: bool,
        time_ms: int | None,
    ) -> Mapping[str, Any]:
        seq = self._folder.next_seq
        event: dict[str, Any] = {
            "type": event_type,
            "seq": seq,
            "time": self._clock() if time_ms is None else time_ms,
            "data": data,
        }
        if source_event_seqs is not None:
            # Anything but a sequence is kept as given, so validation rejects it.
            seqs: Any = source_event_seqs
            event["sourceEventSeqs"] = (
                list(seqs) if isinstance(seqs, (list, tuple, range)) else seqs
            )
        if surface_op is not None:
            event["surfaceOp"] = dict(surface_op) if isinstance(surface_op, Mapping) else surface_op
        if ignorable:
            event["ignorable"] = True
        try:
            line = dumps_line(event)
        except (TypeError, ValueError) as error:
            raise self._rejected(
                seq, event_type, f"event is not losslessly JSON-serializable ({error})"
            ) from None
        recorded: dict[str, Any] = parse_line(line)
        if isinstance(recorded.get("surfaceOp"), dict):
            self._checkpoint.before_replacement(self._folder)
        self._validate(recorded)
        self._batches.add(recorded, line)
        self._titles.track(recorded)
        return recorded

    def append_checked(self, events: Sequence[Mapping[str, Any]], folder: SurfaceFolder) -> None:
        """Queue events its owner already recorded and validated, without checking them again.

        For an owner that validates a batch as a unit before writing it (the session actor,
        `actors.store._events.check_batch`): each event must be what `append` would have
        recorded (envelope, seq, time, JSON round trip) and pass the same rules, against a
        fold equal to this writer's; `folder` is that fold after the events, and the writer
        adopts it.

        Under an epoch, the events must start with `next_marker` when it is not None.

        Raises:
            LogWriteError: the writer is closed, the seqs do not continue this log, or the
                epoch record the batch needs is missing (nothing is queued).
        """
        if self._closed:
            raise LogWriteError(f"{self._path}: writer is closed")
        first = self._folder.next_seq
        seqs = [event["seq"] for event in events]
        if seqs != list(range(first, first + len(seqs))) or folder.next_seq != first + len(seqs):
            raise LogWriteError(
                f"{self._path}: checked events do not continue the log at seq {first}"
            )
        self._batches.check_opens_batch(events)
        self._begin_batch(folder)
        for event in events:
            self._batches.add(dict(event), dumps_line(event))
            self._titles.track(event)
        self._folder = folder

    def set_title(
        self,
        title: str,
        *,
        source: Mapping[str, Any] | None = None,
        message_seqs: Sequence[int] = (),
    ) -> Mapping[str, Any]:
        """Append a `session/title` event; the default is an explicit user rename (§7).

        The title is normalised (one line, controls removed, trimmed, ≤ 80 UTF-8 bytes).
        A user rename (``source={"kind": "user"}``, no message seqs) pins the title.

        Raises:
            LogWriteError: the title is empty after normalisation, or the event is invalid.
        """
        text = normalize_title(title)
        if not text:
            raise LogWriteError(f"{self._path}: session title is empty after normalization")
        data = {
            "title": text,
            "messageSeqs": list(message_seqs),
            "source": dict(source) if source is not None else {"kind": "user"},
        }
        return self.append("session/title", data)

    def _rejected(self, seq: int, kind: object, detail: str) -> LogWriteError:
        return LogWriteError(f"{self._path}: event {kind!r} (seq {seq}) rejected: {detail}")

    def _validate(self, event: dict[str, Any]) -> None:
        try:
            check_new_event(event, self._header.id)
            self._folder.apply(event)
        except (EventError, SurfaceError) as error:
            raise self._rejected(event["seq"], event["type"], str(error)) from None

    # --- flushing ---

    def flush(self, *, keep_on_failure: bool = False) -> int:
        """Write every pending event as one batch (one zstd frame, or raw lines).

        The first flush materialises the file. With `fsync` on, the batch is durable when
        this returns. A failed write leaves nothing of the batch in the file and, by default,
        discards it (`discard_pending`): an error means nothing was written, then or later.

        Args:
            keep_on_failure: keep a batch that fails to write pending instead: its owner
                discards it (e.g. on another thread) or retries it with the next flush.

        Returns:
            The number of events written.

        Raises:
            LogWriteError: the write failed; `LogStorageError` when the file system refused
                it (no space, read-only, an I/O error).
        """
        try:
            written = self._batches.flush(keep_on_failure=True)
        except Exception:
            if not keep_on_failure:
                self.discard_pending()
            raise
        self._checkpoint.clear()
        return written

    def discard_pending(self) -> None:
        """Forget the pending events: the seq counter, surface, title and descriptor go back
        to the last durable batch, as if the events had never been appended."""
        self._batches.discard()
        saved = self._checkpoint.restore(self._folder)
        if saved is not None:
            self._folder, self._titles = saved

    def _begin_batch(self, folder: SurfaceFolder | None) -> None:
        """Save the durable folds before a batch's first event is queued (``folder``: the fold
        that will replace the writer's; None: the writer's is folded in place)."""
        if not self._batches.pending_count:
            self._checkpoint.save(self._folder, self._titles, replaced=folder is not None)
        elif folder is not None:  # an in-place batch goes on in a replaced fold
            self._checkpoint.before_replacement(self._folder)

    def close(self) -> None:
        """Flush pending events and release the file; later appends are refused."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._batches.close()

    def __enter__(self) -> SessionLogWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
