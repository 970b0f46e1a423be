"""A session's writer side: what its single writer holds in memory, and its blocking steps.

`SessionState` becomes the writer of its session on the first write (taking the lock is its
business); from then on a `WriterSide` holds the open log writer, the lock, the fold and the
surface events, and opens, flushes and closes the log (synchronous file I/O, run in a worker
thread), keeping the projection cache's progress row current after each of those.
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
    LoadedSession,
    LogReadError,
    LogWriteError,
    SessionLogWriter,
    StaleEpochError,
    SurfaceFolder,
)
from actors.store._fencing import stale_error
from actors.store._lock import SessionLock
from actors.store._options import StoreOptions, read_failure
from actors.store._projection_cache import ProjectionCache, ProjectionCacheError
from wire import InternalError

__all__ = ["WriterSide"]

log = logging.getLogger(__name__)


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
            UnavailableError: ``epoch`` is lower than the log's.
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
            )
            side.record_progress()
        except BaseException:
            writer.close()
            raise
        return side

    def surface_events(self, through: int | None) -> tuple[Mapping[str, Any], ...]:
        """The current surface's events; ``through`` is the seq of the last event."""
        if self.surface is not None and self.surface[0] == through:
            # Every change to the surface appends an event, so the seq identifies it.
            return self.surface[1]
        nodes = self.folder.nodes
        if len(self.events) > 2 * len(nodes) + 64:
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
        try:
            # check_batch applied the writer's rules already: queue without re-checking.
            self.writer.append_checked(recorded, folder)
        except LogWriteError as error:  # pragma: no cover - seqs come from self.folder
            raise InternalError(f"log writer refused a checked batch: {error}") from None
        for event in recorded:
            if "surfaceOp" in event:
                self.events[event["seq"]] = event
        self.folder = folder

    def flush(self) -> int:
        """Write the pending batch (blocking); how many events were written.

        Raises:
            LogWriteError: the write failed; the events stay pending.
        """
        written = self.writer.flush()
        self.record_progress()
        return written

    def close(self) -> None:
        """Flush and close the writer (blocking); the lock stays held.

        Raises:
            InternalError: pending events could not be written.
        """
        try:
            self.writer.close()
        except LogWriteError as error:
            raise InternalError(
                f'session "{self.session_id}": pending events lost at close: {error}'
            ) from None
        self.record_progress()

    def record_progress(self) -> None:
        """Bring the session's projection cache row up to the log."""
        # The cache is derived: failing to update it must not fail a write that is already
        # on disk (a client would retry and duplicate it); the next index run corrects it.
        try:
            self._update_cache()
        except (OSError, ProjectionCacheError):
            log.warning("session %r: projection cache not updated", self.session_id, exc_info=True)

    def _update_cache(self) -> None:
        writer = self.writer
        descriptor = writer.subagent_descriptor
        count = writer.next_seq
        stat = os.stat(self.path)
        self.cache.update_progress(
            self.session_id,
            title=writer.title.title if writer.title is not None else None,
            subagent_label=descriptor.label if descriptor is not None else None,
            last_seq=count - 1 if count else None,
            file_size=stat.st_size,
            file_mtime_ns=stat.st_mtime_ns,
        )
