"""The batches of one session log: what is queued for the next one, and writing it as a unit.

`session-log-format` §2.1 and §9. A batch is one zstd frame (or raw lines) holding every
event queued since the last flush, with chunk runs packed, written by one ``O_APPEND`` write;
the first flush materialises header and first batch together (`LogFile.publish`). Under a
fencing epoch each batch opens with an epoch record (`actors.session_log._epochs`): an
epoch-open for the first batch under that epoch, an epoch marker for every later one. The
events themselves (seqs, validation, the fold) are `SessionLogWriter`'s business.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from actors.session_log._chunks import pack_chunk_runs
from actors.session_log._epochs import (
    EPOCH_MARK_TYPE,
    EPOCH_OPEN_TYPE,
    StaleEpochError,
    fence_epoch,
    fence_record,
)
from actors.session_log._errors import LogWriteError
from actors.session_log._files import LogFile
from actors.session_log._header import SessionHeader
from actors.session_log._json import dumps_line
from actors.session_log._layout import Compression
from actors.session_log._write_statistics import WRITES
from actors.session_log._zstd import compress_frame

__all__ = ["BatchWriter"]


class BatchWriter:
    """Queues recorded events and writes them to one transcript, a batch per `flush`.

    Args:
        path: the transcript.
        header: the session header, written ahead of the first batch of a new log.
        compression: the transcript's encoding.
        fsync: make every flushed batch durable.
        pack_chunks: pack `assistant/chunk` delta runs into rows.
        durable_count: events already wholly on disk.
        epoch: the fencing epoch to write under (None: a plain log).
        epoch_opened: whether the log already holds the epoch-open record of ``epoch``.
    """

    def __init__(
        self,
        path: Path,
        header: SessionHeader,
        *,
        compression: Compression,
        fsync: bool,
        pack_chunks: bool,
        durable_count: int = 0,
        epoch: int | None = None,
        epoch_opened: bool = False,
    ) -> None:
        self._path = path
        self._header = header
        self._compression: Compression = compression
        self._pack_chunks = pack_chunks
        self._file = LogFile(path, fsync=fsync)
        self._durable_count = durable_count
        self._pending: list[tuple[dict[str, Any], bytes]] = []
        self._pending_since: float | None = None
        self._pending_bytes = 0
        self._epoch = epoch
        self._epoch_opened = epoch_opened
        #: ``(epoch, epoch_opened)`` as of the last durable batch, for `discard`.
        self._durable_fence = (epoch, epoch_opened)

    def open(self, *, truncate_to: int | None = None) -> None:
        """Open the existing transcript for appending, cutting a torn tail at ``truncate_to``.

        Raises:
            LogWriteError: the file cannot be opened or truncated.
        """
        self._file.open()
        if truncate_to is not None:
            self._file.truncate(truncate_to)

    @property
    def durable_count(self) -> int:
        """Events written by completed flushes."""
        return self._durable_count

    @property
    def pending_count(self) -> int:
        """Events queued for the next batch."""
        return len(self._pending)

    @property
    def pending_since(self) -> float | None:
        """`time.monotonic()` of the oldest queued event, or None when nothing is queued."""
        return self._pending_since

    @property
    def pending_bytes(self) -> int:
        """Bytes of the queued events' lines (before packing and compression)."""
        return self._pending_bytes

    @property
    def epoch(self) -> int | None:
        """The fencing epoch batches are written under, None for a plain log."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Write under ``epoch`` from the next batch on (a new epoch needs a new epoch-open).

        Raises:
            StaleEpochError: ``epoch`` is lower than the current one.
        """
        current = self._epoch
        if current is not None and epoch < current:
            raise StaleEpochError(
                f"{self._path}: cannot write under epoch {epoch} after epoch {current}",
                epoch=epoch,
                log_epoch=current,
            )
        if epoch != current:
            self._epoch = epoch
            self._epoch_opened = False

    def next_marker(self) -> dict[str, Any] | None:
        """The epoch record the next queued events must follow, if any (None: they join the
        queued batch, or the log is plain)."""
        epoch = self._epoch
        if epoch is None:
            return None
        if not self._epoch_opened:
            return fence_record(EPOCH_OPEN_TYPE, epoch)
        if not self._pending:
            return fence_record(EPOCH_MARK_TYPE, epoch)
        return None

    def check_opens_batch(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Check that ``events`` start with `next_marker` when they need one.

        Raises:
            LogWriteError: the epoch record the events need is missing.
        """
        marker = self.next_marker() if events else None
        if marker is not None:
            head = events[0]
            if head.get("type") != marker["type"] or fence_epoch(head) != self._epoch:
                raise LogWriteError(
                    f"{self._path}: a batch under epoch {self._epoch} must start with a "
                    f"{marker['type']!r} record"
                )

    def add(self, event: dict[str, Any], line: bytes) -> None:
        """Queue one recorded event with its serialised line (no trailing newline)."""
        self._pending.append((event, line))
        self._pending_bytes += len(line)
        if self._pending_since is None:
            self._pending_since = time.monotonic()
        if event["type"] == EPOCH_OPEN_TYPE and fence_epoch(event) == self._epoch:
            self._epoch_opened = True

    def flush(self, *, keep_on_failure: bool = False) -> int:
        """Write every queued event as one batch.

        Args:
            keep_on_failure: keep the batch queued when the write fails (for an owner that
                discards it itself, or retries it); by default it is discarded.

        Returns:
            The number of events written.

        Raises:
            LogWriteError: the write failed (nothing of the batch is in the file).
        """
        if not self._pending:
            return 0
        try:
            written = self._write_pending()
        except Exception:
            if not keep_on_failure:
                self.discard()
            raise
        self._durable_fence = (self._epoch, self._epoch_opened)
        return written

    def discard(self) -> None:
        """Forget the queued batch, as if it had never been queued."""
        self._pending.clear()
        self._pending_since = None
        self._pending_bytes = 0
        # An epoch-open among the discarded events is not in the log: the next batch needs one.
        epoch, opened = self._durable_fence
        self._epoch_opened = opened and epoch == self._epoch

    def _write_pending(self) -> int:
        # Events keep the line serialised at append time; only packed rows are new. The
        # pending events are alive, so no new row can share an id() with one of them.
        lines = {id(event): line for event, line in self._pending}
        events = [event for event, _ in self._pending]
        records = pack_chunk_runs(events) if self._pack_chunks else events
        parts = []
        for record in records:
            line = lines.get(id(record))
            parts.append(line if line is not None else dumps_line(record))
        body = b"\n".join(parts) + b"\n"
        payload = compress_frame(body) if self._compression == "zstd" else body
        if self._file.is_open:
            self._file.append(payload)
        else:
            # Lazy materialisation: header and first batch are published together.
            header = dumps_line(self._header.to_record()) + b"\n"
            if self._compression == "zstd":
                # "frame 1 decodes to exactly the header line including its \n"
                header = compress_frame(header)
            self._file.publish(header + payload)
        self._durable_count += len(events)
        WRITES.batches += 1
        WRITES.events += len(events)
        WRITES.bytes += len(payload)
        self._pending.clear()
        self._pending_since = None
        self._pending_bytes = 0
        return len(events)

    def close(self) -> None:
        """Release the file (queued events are not written)."""
        self._file.close()
