"""Committing the projection cache's progress rows after appends are answered.

An append that changes nothing a listing shows only moves its session's progress row (last
seq, file size and mtime; `ProjectionCache.note_progress`). That row is derived: a stale one
only makes the indexer or a load read the log again. So while `ProgressCommits.run` runs, an
append notes its progress in the thread that wrote the batch and is answered; this task commits
what was noted, many appends per transaction. The SQLite commit (under concurrent appends up to
several milliseconds at p99) is off the path of the reply, and of a cancel waiting for it.

Without the task (a store used on its own), each append commits its row before it returns.
"""

from __future__ import annotations

import logging

import trio

from actors.store._projection_cache import ProjectionCache, ProjectionCacheError

__all__ = ["COMMIT_DELAY", "ProgressCommits"]

log = logging.getLogger(__name__)

#: Seconds between the first progress noted and its commit.
COMMIT_DELAY = 0.05


class ProgressCommits:
    """The task that commits the progress rows appends noted (see the module)."""

    def __init__(self, cache: ProjectionCache) -> None:
        self._cache = cache
        self._due = trio.Event()
        self._running = False

    @property
    def running(self) -> bool:
        """Whether `run` commits noted progress (appends may leave it noted)."""
        return self._running

    def noted(self) -> None:
        """Progress was noted: commit it soon (call on the event loop; never yields)."""
        self._due.set()

    async def run(self) -> None:
        """Commit noted progress until cancelled (in a worker thread, one commit at a time),
        and once more when cancelled (shielded).

        A failed commit (a full disk) is one warning; its rows stay noted for the next commit,
        and on close the cache commits what is left.
        """
        self._running = True
        try:
            while True:
                await self._due.wait()
                # Many appends per commit: under load, fewer commits leave the disk and the
                # GIL to the appends' writes (a row is at most this much staler).
                await trio.sleep(COMMIT_DELAY)
                self._due = trio.Event()
                await self._commit()
        finally:
            self._running = False
            with trio.CancelScope(shield=True):
                await self._commit()

    async def _commit(self) -> None:
        try:
            await trio.to_thread.run_sync(self._cache.commit_noted)
        except ProjectionCacheError as error:
            log.warning("projection cache progress not committed (%s); it catches up later", error)
