"""A session's writer side: what its single writer holds in memory, and its blocking steps.

`SessionState` becomes the writer of its session on the first write (taking the lock is its
business); from then on a `WriterSide` holds the open log writer, the lock, the fold and the
surface events, and opens, flushes and closes the log (synchronous file I/O, run in a worker
thread), keeping the projection cache's progress row current after each of those.

A batch is adopted in memory when it is accepted, before it is written; until it is written the
side also keeps the durable view (`WriterView`), which strict readers are shown, and to which a
batch that fails to write is discarded (`discard`). The cache is derived: failing to update it
never fails a write that is on disk; it catches up with the next write, load or index run.
"""

from __future__ import annotations

import logging
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from actors.session_log import (
    IDEMPOTENCY_KEY_TYPE,
    KeyRecord,
    LoadedSession,
    LogReadError,
    LogStorageError,
    LogWriteError,
    SessionLogWriter,
    StaleEpochError,
    SurfaceFolder,
)
from actors.store._fencing import stale_error
from actors.store._idempotency import IdempotencyPolicy, KeyIndex
from actors.store._lock import SessionLock
from actors.store._options import StoreOptions, read_failure
from actors.store._projection_cache import ProjectionCache, ProjectionCacheError
from actors.store._write_failures import log_write_refused, write_refused
from wire import InternalError

__all__ = ["WriterSide"]

log = logging.getLogger(__name__)


@attrs.frozen
class WriterView:
    """What readers are shown of a writer's session."""

    folder: SurfaceFolder
    title: str | None
    label: str | None

    @property
    def captured_through_seq(self) -> int | None:
        """Seq of the last event, None for a log without events."""
        count = self.folder.next_seq
        return count - 1 if count else None


@attrs.define(eq=False)
class WriterSide:
    """What the single writer holds in memory."""

    session_id: str
    path: Path
    cache: ProjectionCache
    writer: SessionLogWriter
    lock: SessionLock
    folder: SurfaceFolder
    #: Surface-type events by seq (a superset of the current surface; pruned lazily).
    events: dict[int, Mapping[str, Any]]
    #: The last surface handed out and the seq it was captured through: snapshots between
    #: two appends share it (gathering a large surface on the event loop takes milliseconds).
    surface: tuple[int | None, tuple[Mapping[str, Any], ...]] | None = None
    #: Whether the writer's epoch is a claim of this process (``epoch_of``), not one merely
    #: continued from the log.
    claimed: bool = False
    #: The view as of the last durable batch while a batch is accepted and not yet written.
    durable: WriterView | None = None
    #: The idempotency keys of the log and of every accepted batch (`actors.store._idempotency`).
    keys: KeyIndex = attrs.Factory(lambda: KeyIndex(IdempotencyPolicy()))
    #: The title and subagent label this writer last recorded in the cache (``None``: none
    #: yet): an append that changes neither only notes its progress (`ProjectionCache`).
    listed: tuple[str | None, str | None] | None = None

    @classmethod
    def open(
        cls,
        session_id: str,
        path: Path,
        loaded: LoadedSession,
        *,
        cache: ProjectionCache,
        options: StoreOptions,
        lock: SessionLock,
        epoch: int | None,
        reload: Callable[[], LoadedSession],
    ) -> WriterSide:
        """Open the log of ``loaded`` for appending (committing any crash repair).

        Args:
            session_id: the session.
            path: its transcript.
            loaded: the log as read, still current (the caller holds ``lock``).
            cache: the projection cache to keep current.
            options: the store's options (durability, chunk packing).
            lock: the session's write lock, held.
            epoch: the fencing epoch to write under.
            reload: reads the log again.

        Raises:
            UnavailableError: ``epoch`` is lower than the log's, or the file system refuses to
                open or repair the log (``details.reason``, `actors.store._write_failures`).
            InternalError: the log cannot be opened or repaired.
        """
        try:
            writer = SessionLogWriter.open(
                path,
                loaded=loaded,
                fsync=options.durability != "flush",
                pack_chunks=options.pack_chunks,
                epoch=epoch,
            )
        except StaleEpochError as error:
            raise stale_error(session_id, error) from None
        except LogReadError as error:
            raise read_failure(session_id, error) from None
        except LogStorageError as error:
            action = "cannot open the session log for appending"
            raise write_refused(session_id, error, path=path, action=action) from None
        except LogWriteError as error:
            raise InternalError(f'session "{session_id}": {error}') from None
        try:
            if writer.epoch is not None and loaded.needs_repair:
                # A fenced repair puts its epoch record ahead of the closers, so the log
                # now differs from the loaded view: read what was written.
                loaded = reload()
            events = {seq: loaded.events[seq] for seq in loaded.surface}
            side = cls(
                session_id=session_id,
                path=path,
                cache=cache,
                writer=writer,
                lock=lock,
                folder=loaded.fold(),
                events=events,
                claimed=epoch is not None,
                keys=KeyIndex.of_log(loaded.events, options.idempotency, options.clock()),
            )
            side.record_progress()
        except BaseException:
            writer.close()
            raise
        return side

    def view(self, *, pending: bool) -> WriterView:
        """What readers are shown: every accepted batch (``pending``), or only what is durable
        (the same while nothing is being written)."""
        if not pending and self.durable is not None:
            return self.durable
        writer = self.writer
        descriptor = writer.subagent_descriptor
        return WriterView(
            folder=self.folder,
            title=writer.title.title if writer.title is not None else None,
            label=descriptor.label if descriptor is not None else None,
        )

    def surface_events(self, view: WriterView) -> tuple[Mapping[str, Any], ...]:
        """The events of ``view``'s surface."""
        through = view.captured_through_seq
        if self.surface is not None and self.surface[0] == through:
            # Every change to the surface appends an event, so the seq identifies it (a
            # discarded batch's seqs are reused: `discard` forgets its surface).
            return self.surface[1]
        nodes = view.folder.nodes
        if len(self.events) > 2 * len(nodes) + 64 and self.durable is None:
            # Not while a batch is being written: a discard may need what it shadowed.
            self.events = {seq: self.events[seq] for seq in nodes}
        # This runs on the event loop: itemgetter gathers a large surface at C speed.
        events: tuple[Mapping[str, Any], ...] = (
            operator.itemgetter(*nodes)(self.events)
            if len(nodes) > 1
            else tuple(self.events[seq] for seq in nodes)
        )
        self.surface = (through, events)
        return events

    def accept(self, recorded: Sequence[Mapping[str, Any]], folder: SurfaceFolder) -> None:
        """Queue a batch that `check_batch` recorded against this side's fold, and adopt the
        fold after it (``folder``) and its surface events; never yields, so a snapshot sees
        the whole batch or none of it."""
        if not self.writer.pending_count:
            self.durable = self.view(pending=True)
        try:
            # check_batch applied the writer's rules already: queue without re-checking.
            self.writer.append_checked(recorded, folder)
        except LogWriteError as error:  # pragma: no cover - seqs come from self.folder
            raise InternalError(f"log writer refused a checked batch: {error}") from None
        for event in recorded:
            if "surfaceOp" in event:
                self.events[event["seq"]] = event
            elif event["type"] == IDEMPOTENCY_KEY_TYPE:
                # Remembered with its batch: a batch taken back out of memory takes its key
                # with it (`KeyIndex.forget_from`), or a retry would be told it was written.
                record = KeyRecord.of(event)
                if record is not None:
                    self.keys.add(record)
        self.folder = folder

    def flush(self, *, commit_progress: bool = True) -> int:
        """Write the pending batch (blocking); how many events were written.

        Args:
            commit_progress: commit the session's progress row now; if false, a batch that
                changes nothing a listing shows only notes it (`ProgressCommits` commits it).

        Raises:
            LogWriteError: the write failed (`LogStorageError`: the file system refused it);
                nothing of it is in the file, and it stays pending: the owner `discard`s it
                (on the event loop, where readers look) or retries it.
        """
        written = self.writer.flush(keep_on_failure=True)
        self.durable = None
        self.record_progress(commit=commit_progress)
        return written

    def discard(self) -> None:
        """Forget the pending batch: the writer, the fold, the surface events and the keys go
        back to the last durable batch (call on the event loop; never yields)."""
        durable = self.durable
        self.writer.discard_pending()
        if durable is None:
            return
        self.durable = None
        self.folder = durable.folder
        first = durable.folder.next_seq
        self.events = {seq: event for seq, event in self.events.items() if seq < first}
        self.keys.forget_from(first)
        self.surface = None

    def close(self) -> None:
        """Flush and close the writer (blocking); the lock stays held.

        Raises:
            InternalError: pending events could not be written.
        """
        pending = self.writer.pending_count
        try:
            self.writer.close()
        except LogStorageError as error:
            # Write-behind events the disk refused (each call was answered "pending"): an
            # expected loss on a full or failing disk, reported in one line.
            log_write_refused(
                f'session "{self.session_id}": {pending} pending event(s) not written at '
                f"close: {error} ({error.reason})"
            )
            return
        except LogWriteError as error:
            raise InternalError(
                f'session "{self.session_id}": pending events lost at close: {error}'
            ) from None
        self.record_progress()

    def record_progress(self, *, commit: bool = True) -> None:
        """Bring the session's projection cache row up to the log (``commit`` false: a row
        whose listed facts did not change is only noted; see `flush`)."""
        # The cache is derived: failing to update it must not fail a write that is already
        # on disk (a client would retry and duplicate it). The next write, load or index run
        # brings the row up to date; an expected failure (a full disk) is one line, no trace.
        try:
            self._update_cache(commit=commit)
        except (OSError, ProjectionCacheError) as error:
            log.warning(
                'session "%s": projection cache not updated (%s); it catches up later',
                self.session_id,
                error,
            )

    def notes_only(self) -> bool:
        """Whether writing the pending events changes nothing a listing shows: the cache row
        is then only noted (`record_progress`), and the write never waits for the cache's
        writer, which another thread may hold."""
        return self._listed_now() == self.listed

    def _listed_now(self) -> tuple[str | None, str | None]:
        writer = self.writer
        descriptor = writer.subagent_descriptor
        return (
            writer.title.title if writer.title is not None else None,
            descriptor.label if descriptor is not None else None,
        )

    def _update_cache(self, *, commit: bool) -> None:
        count = self.writer.next_seq
        stat = os.stat(self.path)
        listed = self._listed_now()
        last_seq = count - 1 if count else None
        if listed == self.listed:
            self.cache.note_progress(
                self.session_id,
                last_seq=last_seq,
                file_size=stat.st_size,
                file_mtime_ns=stat.st_mtime_ns,
                commit=commit,
            )
            return
        self.cache.update_progress(
            self.session_id,
            title=listed[0],
            subagent_label=listed[1],
            last_seq=last_seq,
            file_size=stat.st_size,
            file_mtime_ns=stat.st_mtime_ns,
        )
        self.listed = listed
