"""The session store: where agent actors get their sessions (an `AgentDirectory`).

It serves DSH sessions roots (`session-log-format` §2): the embedded one,
``<data dir>/sessions`` (zstd, always writable), and optionally an existing DSH sessions
directory (read-only unless writable). An agent's id is its session id; `load` finds the
transcript (through the projection cache, else by scanning the roots, §2.3), loads it and hands
the actor a `SessionState`. The store keeps one live state per id: a second `load` of a live id
returns the same object, so a process never has two writers of one session.

`create` differs from upstream on purpose: upstream writes nothing until the first append
(lazy materialization, §2.1); here the header is published at once (temp file, fsync, hard
link), as a header-only log, which upstream lists and loads as an empty session. So an id the
store acknowledged survives a restart and is visible to other processes at once.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio

from actors.session_log import (
    HeaderError,
    LoadedSession,
    LogFile,
    LogReadError,
    LogStorageError,
    LogWriteError,
    SessionHeader,
    compress_frame,
    dumps_line,
    find_session_log,
    load_session,
    log_path,
    read_header,
)
from actors.store._cache_rows import CachedSession, ListCursor
from actors.store._idempotency import key_reused
from actors.store._indexing import IndexSummary, index_sessions, row_for
from actors.store._options import SessionRoot, StoreOptions, file_identity, read_failure
from actors.store._progress_commits import ProgressCommits
from actors.store._projection_cache import ProjectionCache, ProjectionCacheError
from actors.store._remote_disks import store_placement
from actors.store._state import SessionState
from actors.store._write_failures import log_write_refused, write_refused
from wire import ArgumentsInvalidError, InternalError, UnavailableError

log = logging.getLogger("actors.store")

__all__ = ["SessionStore"]


class SessionStore:
    """Sessions of one or more DSH roots, behind the `AgentDirectory` interface.

    Args:
        cache: the projection cache (rows of every root).
        roots: the roots served; ids are resolved in this order.
        options: durability and batching of the states it hands out.
        before_write: awaited with a session id before the first byte of that session is
            written by this store (its creation, or a state's first open for write); if it
            raises, nothing is written (a clustered worker binds the shard to its storage).
    """

    def __init__(
        self,
        cache: ProjectionCache,
        roots: Sequence[SessionRoot],
        options: StoreOptions | None = None,
        *,
        before_write: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        if not roots:
            raise ValueError("a session store needs at least one root")
        self.cache = cache
        self.roots = tuple(roots)
        self.options = options or StoreOptions()
        self.before_write = before_write
        self._live: dict[str, SessionState] = {}
        self._loading: dict[str, trio.Event] = {}
        self._root_ids = tuple(root.root_id for root in self.roots)
        #: Run it (`ProgressCommits.run`) to take the cache's progress commits off the
        #: appends' replies.
        self.progress = ProgressCommits(cache)
        #: Where its sessions' appends are written (inline or in a worker thread).
        self.placement = store_placement(
            [root.path for root in self.roots if root.writable],
            inline_writes=self.options.inline_writes,
        )
        self._listeners: list[Callable[[str, str], None]] = []
        #: Sessions whose write-behind flush the disk refuses (logged once per outage).
        self._refused: set[str] = set()

    def add_event_listener(self, listener: Callable[[str, str], None]) -> None:
        """Call ``listener(session_id, event_type)`` for every event appended from now on.

        Listeners run synchronously in the appending actor, after the batch is accepted, so
        they must be quick; an exception in one is logged and does not fail the append.
        """
        self._listeners.append(listener)

    def _notify(self, session_id: str, event_type: str) -> None:
        for listener in self._listeners:
            try:
                listener(session_id, event_type)
            except Exception:
                log.exception("session event listener failed for %s", session_id)

    @property
    def root_ids(self) -> tuple[int, ...]:
        """Cache ids of the roots served."""
        return self._root_ids

    def live_states(self) -> list[SessionState]:
        """States handed out and not closed."""
        return list(self._live.values())

    # --- AgentDirectory ---

    async def load(self, agent_id: str) -> SessionState | None:
        """The session state of ``agent_id``, or None when no served root has that session.

        Raises:
            InternalError: the transcript exists but does not load (upstream's message:
                ``stored session "<id>" is corrupt: …`` or ``failed to inspect session …``,
                naming the file and the reason).
        """
        while True:
            live = self._live.get(agent_id)
            if live is not None and not live.closed:
                return live
            if live is not None:
                await live.wait_closed()  # passivating: wait until its lock is released
                continue
            pending = self._loading.get(agent_id)
            if pending is None:
                break
            await pending.wait()
        done = self._loading[agent_id] = trio.Event()
        try:
            found = await trio.to_thread.run_sync(self._find_and_load, agent_id)
            if found is None:
                return None
            loaded, root, identity = found
            route = self.cache.model_route(agent_id)
            state = SessionState(
                loaded,
                root=root,
                identity=identity,
                cache=self.cache,
                options=self.options,
                model_route=route,
                on_close=self._forget,
                on_recorded=self._notify,
                before_write=self.before_write,
                progress=self.progress,
                placement=self.placement,
            )
            self._live[agent_id] = state
            return state
        finally:
            del self._loading[agent_id]
            done.set()

    def _forget(self, state: SessionState) -> None:
        if self._live.get(state.session_id) is state:
            del self._live[state.session_id]

    def _find_and_load(
        self, session_id: str
    ) -> tuple[LoadedSession, SessionRoot, tuple[int, ...] | None] | None:
        if not session_id:
            return None
        row = self.cache.get(session_id)
        by_id = {root.root_id: root for root in self.roots}
        candidates: list[tuple[Path, SessionRoot]] = []
        if row is not None and row.root_id in by_id and os.path.isfile(row.path):
            candidates.append((Path(row.path), by_id[row.root_id]))
        else:
            for root in self.roots:
                try:
                    path = find_session_log(root.path, session_id, root.compression)
                except LogReadError as error:
                    raise read_failure(session_id, error) from None
                if path is not None:
                    candidates.append((path, root))
                    break
        if not candidates:
            if row is not None and row.root_id in by_id:
                with contextlib.suppress(ProjectionCacheError):  # the next index run retries
                    self.cache.remove([session_id])  # its file is gone
            return None
        path, root = candidates[0]
        identity = file_identity(path)
        try:
            loaded = load_session(path, expected_id=session_id)
        except LogReadError as error:
            raise read_failure(session_id, error) from None
        expected = log_path(root.path, loaded.header.cwd, session_id, root.compression)
        if expected != path and os.path.realpath(expected) != os.path.realpath(path):
            raise InternalError(
                f'failed to inspect session "{session_id}": session log does not sit where '
                f'its header says (expected "{expected}") (raw log: {path})',
                details={"sessionId": session_id, "path": str(path)},
            )
        stat = os.stat(path)
        if (
            row is None
            or row.load_error is not None  # the loader read it once; now it loads
            or (row.file_size, row.file_mtime_ns) != (stat.st_size, stat.st_mtime_ns)
        ):
            self._upsert(session_id, row_for(loaded, root.root_id, stat.st_size, stat.st_mtime_ns))
        return loaded, root, identity

    def _upsert(self, session_id: str, row: CachedSession) -> None:
        """Bring the cache row of a session up to its log; the cache is derived, so a write it
        refuses (a full disk) fails no read and no durable write: it catches up later."""
        try:
            self.cache.upsert([row])
        except ProjectionCacheError as error:
            log.warning(
                'session "%s": projection cache not updated (%s); it catches up later',
                session_id,
                error,
            )

    # --- creating ---

    def creation_root(self) -> SessionRoot:
        """Where new sessions go: the external root when it is served writable, else the
        embedded one."""
        writable = [root for root in self.roots if root.writable]
        if not writable:
            raise ArgumentsInvalidError("no writable sessions directory is served")
        return writable[-1]

    async def create(self, header: SessionHeader) -> CachedSession:
        """Publish a new session's header and index it.

        Raises:
            ArgumentsInvalidError: the header is invalid (e.g. a relative cwd) or a session
                with that id exists.
        """
        try:
            header.validate_for_restore()
        except HeaderError as error:
            raise ArgumentsInvalidError(f"invalid session header: {error}") from None
        if not header.id:
            raise ArgumentsInvalidError("a session id must not be empty")
        if self.before_write is not None:
            await self.before_write(header.id)
        return await trio.to_thread.run_sync(self._create_sync, header)

    def _create_sync(self, header: SessionHeader) -> CachedSession:
        if self.cache.get(header.id) is not None:
            return self._created_before(header)
        for root in self.roots:
            try:
                if find_session_log(root.path, header.id, root.compression) is not None:
                    return self._created_before(header)
            except LogReadError as error:
                raise read_failure(header.id, error) from None
        root = self.creation_root()
        path = log_path(root.path, header.cwd, header.id, root.compression)
        content = dumps_line(header.to_record()) + b"\n"
        if root.compression == "zstd":
            # "frame 1 decodes to exactly the header line including its \n" (§9)
            content = compress_frame(content)
        file = LogFile(path, fsync=self.options.durability != "flush")
        try:
            file.publish(content)
        except LogStorageError as error:
            action = "cannot create the session log"
            raise write_refused(header.id, error, path=path, action=action) from None
        except LogWriteError as error:
            if path.exists():  # created meanwhile, by another process
                return self._created_before(header)
            raise InternalError(f'cannot create session "{header.id}": {error}') from None
        finally:
            file.close()
        row = _row(header, root, path, os.stat(path))
        self._upsert(header.id, row)
        return row

    def _created_before(self, header: SessionHeader) -> CachedSession:
        """The session that exists with ``header``'s id, when a keyed create made it with the
        same key and arguments (a retry: `actors.store._idempotency`).

        Raises:
            ArgumentsInvalidError: it exists otherwise (``details.reason``
                ``idempotency-key-reused`` when its key is ``header``'s with other arguments).
        """
        exists = ArgumentsInvalidError(
            f'session "{header.id}" already exists', details={"sessionId": header.id}
        )
        keyed = header.idempotency
        if keyed is None:
            raise exists
        for root in self.roots:
            try:
                path = find_session_log(root.path, header.id, root.compression)
                first = read_header(path) if path is not None else None
            except (LogReadError, OSError):
                raise exists from None
            if path is None or first is None:
                continue
            if first.idempotency == keyed:
                row = _row(first, root, path, os.stat(path))
                if self.cache.get(header.id) is None:  # the first call died before indexing
                    self._upsert(header.id, row)
                return row
            if first.idempotency is not None and first.idempotency.key == keyed.key:
                raise key_reused(keyed.key, sessionId=header.id)
            break
        raise exists

    def new_session_id(self) -> str:
        """A fresh session id (a UUID, as upstream's)."""
        return str(uuid.uuid4())

    # --- listing and indexing ---

    def list_page(self, *, limit: int, after: ListCursor | None = None) -> list[CachedSession]:
        """One page of the served sessions, newest first (from the cache only)."""
        return self.cache.list_page(self._root_ids, limit=limit, after=after)

    async def refresh_index(self) -> list[IndexSummary]:
        """Re-index every root incrementally (in a worker thread)."""
        summaries = []
        for root in self.roots:
            run = functools.partial(
                index_sessions, root.path, self.cache, compression=root.compression
            )
            summaries.append(await trio.to_thread.run_sync(run))
        return summaries

    async def flush_due(self, now: float) -> int:
        """Flush every live writer whose oldest pending event is older than the batch delay
        (write-behind); returns the number of states flushed."""
        flushed = 0
        for state in self.live_states():
            since = state.pending_since
            if since is not None and now - since >= self.options.batch_delay:
                try:
                    await state.flush()
                except UnavailableError as error:
                    # Retried every period until the disk takes it: one line per outage.
                    if state.session_id not in self._refused:
                        self._refused.add(state.session_id)
                        log_write_refused(error.message)
                    continue
                flushed += 1
                if state.session_id in self._refused:
                    self._refused.discard(state.session_id)
                    log.info('session "%s": pending events written again', state.session_id)
        return flushed

    async def aclose(self) -> None:
        """Close every live state: flush, close writers, release locks.

        Raises:
            ExceptionGroup: of the states that failed to flush (all are closed anyway).
        """
        failures: list[Exception] = []
        for state in self.live_states():
            try:
                await state.aclose()
            except Exception as error:
                failures.append(error)
        if failures:
            raise ExceptionGroup("some sessions failed to close", failures)


def _row(
    header: SessionHeader, root: SessionRoot, path: Path, stat: os.stat_result
) -> CachedSession:
    """The cache row of a session whose log at ``path`` holds ``header`` and has ``stat``."""
    return CachedSession(
        session_id=header.id,
        root_id=root.root_id,
        path=str(path),
        cwd=header.cwd,
        created_at=header.created_at,
        parent_session=header.parent_session,
        origin=header.origin,
        file_size=stat.st_size,
        file_mtime_ns=stat.st_mtime_ns,
    )
