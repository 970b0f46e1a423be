"""The projection cache: what listing and discovery know about sessions, without their logs.

One SQLite database under the data directory (``sessions.sqlite3``). Per session it keeps the
header facts (id, cwd, createdAt, parent, origin), the latest title (the last
``session/title``, `session-log-format` §7), the subagent creation label (the first
``subagent/descriptor``'s ``label``, §8), the seq of the last event, the transcript's size
and mtime, which tell the indexer whether a file changed since it was read, and, for a log
whose header is listed but whose body does not load, why (``_cache_rows``). Listing newest
first (``createdAt`` desc, id asc, as upstream's query layer sorts) is one index range scan; it
never opens a log file.

``model_routes`` is not derived from the logs: it holds the model route hosts record for their
agents (no log event carries ``contextWindow``), so it survives re-indexing and schema
changes (``_cache_schema``); deleting the database forgets the routes until hosts record them
again.

Concurrency: WAL journal, one writer connection and one reader connection, each guarded by a
``threading.Lock``, so the store may write from worker threads while the event loop reads.
Several processes may share the file (``busy_timeout``).
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from actors.session_log import Compression
from actors.session_references import SessionSummary
from actors.store._cache_rows import COLUMNS, CachedSession, ListCursor, row_of, values_of
from actors.store._cache_schema import connect, migrate

__all__ = ["ProjectionCache", "ProjectionCacheError", "RecordedModelRoute"]


class ProjectionCacheError(RuntimeError):
    """The cache database cannot be opened or used (names the file and the reason)."""


@attrs.frozen(kw_only=True)
class RecordedModelRoute:
    """A model route a host recorded for an agent."""

    provider: str
    model: str
    context_window: int | None = None
    updated_at: int = 0
    """Epoch ms of the recording."""


#: One placeholder per column of `COLUMNS`.
_MARKS = ", ".join("?" * len(COLUMNS.split(",")))

#: Seconds `ProjectionCache.open` keeps retrying a database that other processes are setting
#: up at the same moment.
_OPEN_PATIENCE = 10.0


class ProjectionCache:
    """The SQLite projection cache (thread-safe). Use `open`; `close` when done."""

    def __init__(self, path: Path, writer: sqlite3.Connection, reader: sqlite3.Connection) -> None:
        """Private; use `open`."""
        self.path = path
        self._writer = writer
        self._reader = reader
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        #: Session id → (last seq, file size, file mtime) noted by `note_progress` and not
        #: committed yet; the next write transaction takes them (`_progress_lock` guards it).
        self._progress: dict[str, tuple[int | None, int, int]] = {}
        self._progress_lock = threading.Lock()

    @classmethod
    def open(cls, path: str | Path) -> ProjectionCache:
        """Open (creating if needed) the cache at ``path``.

        Raises:
            ProjectionCacheError: the file is not a usable SQLite database.
        """
        file = Path(path)
        give_up = time.monotonic() + _OPEN_PATIENCE
        while True:
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
                writer = connect(file)
                try:
                    migrate(writer)
                    reader = connect(file)
                except BaseException:
                    writer.close()
                    raise
            except sqlite3.OperationalError as error:
                # Workers starting together open one new file at once. Switching it to WAL and
                # creating the schema take locks for which SQLite answers "database is locked"
                # at once, without its busy handler (to avoid a deadlock between upgraders):
                # wait a little and try again rather than fail the process.
                if "locked" in str(error) and time.monotonic() < give_up:
                    time.sleep(random.uniform(0.01, 0.05))
                    continue
                raise ProjectionCacheError(
                    f"{file}: cannot open projection cache: {error}"
                ) from None
            except (OSError, sqlite3.Error) as error:
                raise ProjectionCacheError(
                    f"{file}: cannot open projection cache: {error}"
                ) from None
            return cls(file, writer, reader)

    def close(self) -> None:
        """Commit the progress noted, then close both connections (idempotent)."""
        with self._write_lock, self._read_lock:
            # A failure is left as it is: the indexer brings the rows up to their logs.
            self._commit_noted()
            self._writer.close()
            self._reader.close()

    @contextmanager
    def _write(self, *, listing_changed: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction; ``listing_changed`` bumps the revision that derived views
        (the candidate index) key on. It also commits the progress noted meanwhile, and, once
        the writer is free again, what was noted while it held it (whose failure is not the
        caller's: that progress stays noted, and the caller's own write is committed)."""
        with self._write_lock:
            taken = self._take_progress()
            try:
                with self._writer:  # one transaction: commit, or roll back on error
                    self._apply_progress(self._writer, taken)
                    yield self._writer
                    if listing_changed:
                        self._writer.execute(
                            "INSERT INTO meta(key, value) VALUES('revision', 1) "
                            "ON CONFLICT(key) DO UPDATE SET value = value + 1"
                        )
            except BaseException as error:
                self._restore_progress(taken)
                if isinstance(error, sqlite3.Error):
                    raise ProjectionCacheError(f"{self.path}: write failed: {error}") from error
                raise
        self._commit_noted_if_free(quietly=True)

    def note_progress(
        self,
        session_id: str,
        *,
        last_seq: int | None,
        file_size: int,
        file_mtime_ns: int,
        commit: bool = True,
    ) -> None:
        """Record an append that changed nothing a listing shows (no title, no subagent
        label): group commit. If the writer is free this thread commits it (with whatever
        else was noted); if another thread holds it, that one commits it before it lets go,
        and this returns at once instead of queueing for its own transaction (under
        concurrent appends to many sessions, the wait was most of an append's time). With
        ``commit`` false it is only noted: `commit_noted` or the next write commits it.

        Until then readers see the row's previous size, which only makes the indexer read
        that log again: the row is derived, and the log is already written.

        Raises:
            ProjectionCacheError: this thread's commit failed (the progress stays noted for
                the next write).
        """
        with self._progress_lock:
            self._progress[session_id] = (last_seq, file_size, file_mtime_ns)
        if commit:
            self._commit_noted_if_free()

    def commit_noted(self) -> None:
        """Commit the progress noted so far (blocking), unless another thread holds the
        writer: that one commits it before it lets go.

        Raises:
            ProjectionCacheError: the commit failed (the progress stays noted).
        """
        self._commit_noted_if_free()

    def _commit_noted_if_free(self, *, quietly: bool = False) -> None:
        # Whoever releases the writer looks again, so progress noted while it was held is
        # committed by that thread or the next holder: nothing waits for an unrelated write.
        while self._progress and self._write_lock.acquire(blocking=False):
            try:
                error = self._commit_noted()
            finally:
                self._write_lock.release()
            if error is not None:
                if quietly:
                    return
                raise ProjectionCacheError(f"{self.path}: write failed: {error}") from error

    def _commit_noted(self) -> sqlite3.Error | None:
        """Commit the progress noted in a transaction of its own (the caller holds the
        writer); on a failure the progress stays noted and the error is returned."""
        taken = self._take_progress()
        if not taken:
            return None
        try:
            with self._writer:
                self._apply_progress(self._writer, taken)
        except sqlite3.Error as error:
            self._restore_progress(taken)
            return error
        return None

    def _take_progress(self) -> dict[str, tuple[int | None, int, int]]:
        with self._progress_lock:
            taken, self._progress = self._progress, {}
        return taken

    def _restore_progress(self, taken: dict[str, tuple[int | None, int, int]]) -> None:
        """Put back progress whose transaction failed, unless noted again since."""
        if taken:
            with self._progress_lock:
                self._progress = taken | self._progress

    @staticmethod
    def _apply_progress(
        db: sqlite3.Connection, taken: dict[str, tuple[int | None, int, int]]
    ) -> None:
        if taken:
            db.executemany(
                "UPDATE sessions SET last_seq = ?, file_size = ?, file_mtime_ns = ? WHERE id = ?",
                [(*values, session_id) for session_id, values in taken.items()],
            )

    def _read(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        with self._read_lock:
            try:
                return self._reader.execute(sql, parameters).fetchall()
            except sqlite3.Error as error:
                raise ProjectionCacheError(f"{self.path}: read failed: {error}") from None

    # --- roots ---

    def root_id(self, root: str | Path, compression: Compression) -> int:
        """Return the id of a sessions root, registering it on first use.

        Raises:
            ProjectionCacheError: the root was registered with the other encoding.
        """
        key = str(Path(root).resolve())
        found = self._read("SELECT id, compression FROM roots WHERE path = ?", (key,))
        if not found:
            with self._write() as db:
                db.execute(
                    "INSERT OR IGNORE INTO roots(path, compression) VALUES(?, ?)",
                    (key, compression),
                )
            found = self._read("SELECT id, compression FROM roots WHERE path = ?", (key,))
        root_id, registered = found[0]
        if registered != compression:
            raise ProjectionCacheError(
                f"{self.path}: root {key} is indexed as compression {registered!r}, "
                f"not {compression!r}"
            )
        return int(root_id)

    # --- sessions ---

    def upsert(self, rows: Iterable[CachedSession]) -> None:
        """Insert or replace rows (one transaction); clears their paths' rejections."""
        batch = [values_of(row) for row in rows]
        if not batch:
            return
        with self._write() as db:
            db.executemany(
                f"INSERT OR REPLACE INTO sessions({COLUMNS}) VALUES({_MARKS})",
                batch,
            )
            db.executemany("DELETE FROM rejected WHERE path = ?", [(v[2],) for v in batch])

    def update_progress(
        self,
        session_id: str,
        *,
        title: str | None,
        subagent_label: str | None,
        last_seq: int | None,
        file_size: int,
        file_mtime_ns: int,
    ) -> None:
        """Record what an append changed (the owning actor calls this after each flush).

        Only a new title or subagent label changes what listings show, so only those bump the
        revision: an append-heavy agent does not make every candidate index rebuild.
        """
        before = self._read(
            "SELECT title, subagent_label FROM sessions WHERE id = ?", (session_id,)
        )
        changed = not before or tuple(before[0]) != (title, subagent_label)
        with self._write(listing_changed=changed) as db:
            db.execute(
                "UPDATE sessions SET title = ?, subagent_label = ?, last_seq = ?, "
                "file_size = ?, file_mtime_ns = ? WHERE id = ?",
                (title, subagent_label, last_seq, file_size, file_mtime_ns, session_id),
            )

    def remove(self, session_ids: Iterable[str]) -> None:
        """Forget sessions (their files are gone)."""
        ids = [(session_id,) for session_id in session_ids]
        if ids:
            with self._write() as db:
                db.executemany("DELETE FROM sessions WHERE id = ?", ids)

    def get(self, session_id: str) -> CachedSession | None:
        """The row of one session, or None."""
        found = self._read(f"SELECT {COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        return row_of(found[0]) if found else None

    def file_states(self, root_id: int) -> dict[str, tuple[str, int, int]]:
        """Every indexed transcript of one root: path to ``(id, size, mtime_ns)``."""
        found = self._read(
            "SELECT path, id, file_size, file_mtime_ns FROM sessions WHERE root_id = ?",
            (root_id,),
        )
        return {path: (session_id, size, mtime) for path, session_id, size, mtime in found}

    def load_errors(self, root_id: int) -> dict[str, str]:
        """Listed transcripts of one root whose body does not load: path to the reason."""
        found = self._read(
            "SELECT path, load_error FROM sessions WHERE root_id = ? AND load_error IS NOT NULL",
            (root_id,),
        )
        return {path: reason for path, reason in found}

    def count(self, root_ids: Sequence[int] | None = None) -> int:
        """Number of sessions (in the given roots)."""
        if root_ids is None:
            return int(self._read("SELECT count(*) FROM sessions")[0][0])
        marks = ", ".join("?" * len(root_ids))
        sql = f"SELECT count(*) FROM sessions WHERE root_id IN ({marks})"
        return int(self._read(sql, tuple(root_ids))[0][0])

    def list_page(
        self, root_ids: Sequence[int], *, limit: int, after: ListCursor | None = None
    ) -> list[CachedSession]:
        """One page of sessions newest first (``createdAt`` desc, id asc).

        Args:
            root_ids: the roots served (rows of other roots are skipped).
            limit: page size (at least 1).
            after: the cursor of the previous page's last row.
        """
        if not root_ids:
            return []
        marks = ", ".join("?" * len(root_ids))
        where = f"root_id IN ({marks})"
        parameters: list[Any] = list(root_ids)
        if after is not None:
            # `created_at <= ?` lets SQLite seek the index; ties are then filtered by id.
            where += " AND created_at <= ? AND (created_at < ? OR id > ?)"
            parameters += [after.created_at, after.created_at, after.session_id]
        sql = (
            f"SELECT {COLUMNS} FROM sessions INDEXED BY sessions_newest WHERE {where} "
            "ORDER BY created_at DESC, id ASC LIMIT ?"
        )
        return [row_of(values) for values in self._read(sql, [*parameters, max(1, limit)])]

    def summaries(self, root_ids: Sequence[int]) -> list[SessionSummary]:
        """Every session of the given roots as discovery summaries, newest first."""
        if not root_ids:
            return []
        marks = ", ".join("?" * len(root_ids))
        sql = (
            "SELECT id, cwd, created_at, title, subagent_label FROM sessions "
            f"INDEXED BY sessions_newest WHERE root_id IN ({marks}) "
            "ORDER BY created_at DESC, id ASC"
        )
        return [
            SessionSummary(
                session_id=v[0], cwd=v[1], created_at=v[2], label=v[3], display_title=v[4]
            )
            for v in self._read(sql, tuple(root_ids))
        ]

    def revision(self) -> int:
        """A counter every write transaction increments (from any process); a reader whose
        derived view (e.g. a candidate index) was built at another revision should rebuild."""
        found = self._read("SELECT value FROM meta WHERE key = 'revision'")
        return int(found[0][0]) if found else 0

    # --- rejections ---

    def reject(
        self, root_id: int, path: str, *, file_size: int, file_mtime_ns: int, reason: str
    ) -> None:
        """Remember that ``path`` (at this size and mtime) does not load, and why."""
        with self._write() as db:
            db.execute("DELETE FROM sessions WHERE path = ?", (path,))
            db.execute(
                "INSERT OR REPLACE INTO rejected(path, root_id, file_size, file_mtime_ns, reason) "
                "VALUES(?, ?, ?, ?, ?)",
                (path, root_id, file_size, file_mtime_ns, reason),
            )

    def rejected_of_root(self, root_id: int) -> dict[str, tuple[int, int, str]]:
        """Rejected transcripts of one root: path to ``(size, mtime_ns, reason)``."""
        found = self._read(
            "SELECT path, file_size, file_mtime_ns, reason FROM rejected WHERE root_id = ?",
            (root_id,),
        )
        return {path: (size, mtime, reason) for path, size, mtime, reason in found}

    def forget_rejections(self, paths: Iterable[str]) -> None:
        """Drop rejections of files that are gone."""
        batch = [(path,) for path in paths]
        if batch:
            with self._write() as db:
                db.executemany("DELETE FROM rejected WHERE path = ?", batch)

    # --- model routes ---

    def set_model_route(self, session_id: str, route: RecordedModelRoute) -> RecordedModelRoute:
        """Persist an agent's model route; returns it with its recording time."""
        stamped = attrs.evolve(route, updated_at=time.time_ns() // 1_000_000)
        with self._write() as db:
            db.execute(
                "INSERT OR REPLACE INTO model_routes"
                "(session_id, provider, model, context_window, updated_at) VALUES(?, ?, ?, ?, ?)",
                (session_id, route.provider, route.model, route.context_window, stamped.updated_at),
            )
        return stamped

    def model_route(self, session_id: str) -> RecordedModelRoute | None:
        """The recorded model route of an agent, or None."""
        found = self._read(
            "SELECT provider, model, context_window, updated_at FROM model_routes "
            "WHERE session_id = ?",
            (session_id,),
        )
        if not found:
            return None
        provider, model, window, updated = found[0]
        return RecordedModelRoute(
            provider=provider, model=model, context_window=window, updated_at=updated
        )
