"""The state an agent actor owns: one session, its log writer, its write lock.

The runtime gets a `SessionState` from `SessionStore.load` and keeps it while the actor lives.
It starts as a reader of the transcript: snapshots come from the loaded log and are reloaded
when the file changes (another process may be writing it). The first write turns it into the
session's single writer: it takes the session's lock file (a second writer gets
`AgentBusyError`), opens the log for appending (committing any crash repair, §6.4) and from then
on holds the session in memory: the surface events, the fold, title and label.

Durability is the store's choice (`actors.store._options.Durability`): by default each append
call is one batch, written as one zstd frame and fsync'd before the reply.

Fencing (issue 8; off unless the store is given ``epoch_of``/``ack_guard``): a clustered
process writes a session under its shard claim's epoch. The writer opens its first batch with an
epoch-open record and every later batch with an epoch marker (`actors.session_log`); an epoch
lower than the log's, or a claim that is gone, makes the append `UnavailableError` before
anything is written. ``ack_guard`` runs once a batch is durable and before the ack.

The actor's mailbox runs appends alone and in order; on top of that each append applies its
whole batch to memory without yielding, so a snapshot (a read, possibly concurrent with the
flush of a write-behind batch) always sees whole batches: a well-defined ``capturedThroughSeq``
and never a torn event. `aclose` (called by the runtime at passivation and shutdown) flushes,
closes the writer and releases the lock.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from actors.session_log import (
    LoadedSession,
    LogReadError,
    LogWriteError,
    SessionHeader,
    SurfaceSnapshot,
    load_session,
    session_title,
    subagent_label,
)
from actors.store._events import EventInput, check_batch
from actors.store._fencing import batch_prefix, claim_is_new, claimed_epoch
from actors.store._idempotency import KeyedRequest, key_event
from actors.store._lock import SessionLock, lock_path_for
from actors.store._options import (
    AppendOutcome,
    SessionRoot,
    StoreOptions,
    file_identity,
    read_failure,
)
from actors.store._progress_commits import ProgressCommits
from actors.store._projection_cache import (
    ProjectionCache,
    ProjectionCacheError,
    RecordedModelRoute,
)
from actors.store._route_keys import set_model_route_keyed
from actors.store._write_failures import batch_refused, cache_write_refused, write_refused
from actors.store._write_placement import WritePlacement
from actors.store._writer_side import WriterSide
from wire import UnauthorizedError, UnavailableError

__all__ = ["SessionState"]


class SessionState:
    """One agent's session (built by `SessionStore.load`; the runtime owns it)."""

    def __init__(
        self,
        loaded: LoadedSession,
        *,
        root: SessionRoot,
        cache: ProjectionCache,
        options: StoreOptions,
        identity: tuple[int, ...] | None,
        model_route: RecordedModelRoute | None,
        on_close: Callable[[SessionState], None],
        on_recorded: Callable[[str, str], None] = lambda session_id, event_type: None,
        before_write: Callable[[str], Awaitable[None]] | None = None,
        progress: ProgressCommits | None = None,
        placement: WritePlacement | None = None,
    ) -> None:
        """Private; `SessionStore.load` builds it (``identity``: the transcript's
        `file_identity` taken before it was read; ``progress``: commits the cache's progress
        rows after the reply while it runs; ``placement``: the store's, shared)."""
        self.header: SessionHeader = loaded.header
        self.path: Path = loaded.path
        self.root = root
        #: Free-form notes (kept for the ``diagnostics/note`` demo calls; not persisted).
        self.notes: list[str] = []
        self._cache = cache
        self._options = options
        self._route = model_route
        self._on_close = on_close
        self._on_recorded = on_recorded
        self._before_write = before_write
        self._progress = progress
        self._placement = placement or WritePlacement()
        self._loaded: LoadedSession | None = loaded
        self._identity = identity
        self._title = session_title(loaded.events)
        self._label = subagent_label(loaded.events)
        self._captured = loaded.captured_through_seq
        self._side: WriterSide | None = None
        self._write_lock = trio.Lock()
        self._refresh_lock = trio.Lock()
        self._closed = False
        self._gone = trio.Event()

    # --- what the runtime and services read ---

    @property
    def agent_id(self) -> str:
        """The agent's id, which is its session id."""
        return self.header.id

    @property
    def session_id(self) -> str:
        """The session id (`AgentView` of the session-reference services)."""
        return self.header.id

    @property
    def cwd(self) -> str | None:
        """Header ``cwd``."""
        return self.header.cwd

    @property
    def created_at(self) -> int:
        """Header ``createdAt`` (epoch ms)."""
        return self.header.created_at

    @property
    def title(self) -> str | None:
        """Latest ``session/title`` text."""
        side = self._side
        if side is not None:
            return side.view(pending=self._shows_pending).title
        return self._title.title if self._title is not None else None

    @property
    def subagent_label(self) -> str | None:
        """The first ``subagent/descriptor``'s label."""
        if self._side is None:
            return self._label
        return self._side.view(pending=self._shows_pending).label

    @property
    def model_route(self) -> dict[str, Any] | None:
        """``{provider, model, contextWindow}`` as recorded, or None."""
        route = self._route
        if route is None:
            return None
        return {
            "provider": route.provider,
            "model": route.model,
            "contextWindow": route.context_window,
        }

    @property
    def recorded_route(self) -> RecordedModelRoute | None:
        """The recorded route with its recording time."""
        return self._route

    @property
    def captured_through_seq(self) -> int | None:
        """Seq of the last event (closers included), None for a log without events."""
        if self._side is not None:
            return self._side.view(pending=self._shows_pending).captured_through_seq
        return self._captured

    @property
    def _shows_pending(self) -> bool:
        """Whether readers see batches not yet written: under write-behind, whose appends are
        answered before the write; otherwise a batch is shown once it is written (a write that
        fails is discarded, so readers never see what the log will not hold)."""
        return self._options.durability == "write-behind"

    @property
    def is_writer(self) -> bool:
        """Whether this state holds the session's write lock."""
        return self._side is not None

    @property
    def pending_since(self) -> float | None:
        """``time.monotonic()`` of the oldest unflushed event."""
        return self._side.writer.pending_since if self._side is not None else None

    @property
    def closed(self) -> bool:
        return self._closed

    # --- reads ---

    async def snapshot(self) -> SurfaceSnapshot:
        """The session's surface now: ``{session, capturedThroughSeq, events}`` (§6.6).

        A writer answers from memory (every batch it accepted, whole); a reader reloads the
        transcript first if its stat identity changed.

        Raises:
            InternalError: the transcript no longer loads (names the file and the reason).
        """
        self._check_open()
        if self._side is None:
            await self.refresh()
            loaded = self._loaded
            if self._side is None and loaded is not None:
                return loaded.surface_snapshot()
        # The writer's memory (also when this state became the writer during the refresh).
        side = self._side
        if side is None:  # closed while refreshing
            raise UnavailableError(f'session "{self.session_id}" was passivated; call again')
        view = side.view(pending=self._shows_pending)
        return SurfaceSnapshot(
            session=self.header,
            captured_through_seq=view.captured_through_seq,
            events=side.surface_events(view),
        )

    async def refresh(self) -> None:
        """Reload the transcript if it changed since it was read (readers only)."""
        async with self._refresh_lock:
            if self._side is not None or file_identity(self.path) == self._identity:
                return
            loaded, identity = await trio.to_thread.run_sync(self._load_sync)
            if self._side is not None:  # became the writer meanwhile: memory is newer
                return
            self._adopt(loaded, identity)

    def _load_sync(self) -> tuple[LoadedSession, tuple[int, ...] | None]:
        identity = file_identity(self.path)
        try:
            loaded = load_session(self.path, expected_id=self.session_id)
        except LogReadError as error:
            raise read_failure(self.session_id, error) from None
        return loaded, identity

    def _adopt(self, loaded: LoadedSession, identity: tuple[int, ...] | None) -> None:
        self._loaded = loaded
        self._identity = identity
        self._title = session_title(loaded.events)
        self._label = subagent_label(loaded.events)
        self._captured = loaded.captured_through_seq

    # --- writes ---

    async def append(
        self, items: Sequence[EventInput], *, keyed: KeyedRequest | None = None
    ) -> AppendOutcome:
        """Append a batch atomically; the actor assigns ``seq`` and ``time`` (one time for
        the batch).

        With ``keyed``, the batch opens with its key record (`actors.store._idempotency`), and
        a key the session remembers is not appended again: the call returns the seqs of the
        first call with that key (an empty batch records no key).

        Raises:
            ArgumentsInvalidError: ``keyed`` names a key used before with other arguments.
            AppendRejectedError: an event breaks a rule (nothing was appended).
            UnauthorizedError: the session lives in a directory served read-only.
            AgentBusyError: another writer holds the session's lock.
            UnavailableError: the file system refused the write (``details.reason``
                ``no-space``, ``read-only`` or ``io-error``; `actors.store._write_failures`):
                nothing of the batch was written, and it never will be (write-behind: the
                batch is answered before it is written, and retried until it is).
            UnavailableError: (or whatever the store's ``ack_guard`` raises) the batch was
                written but may not be acknowledged (this process's fencing lease expired).

        Cancellation: a cancel before the batch's write starts leaves nothing appended
        (`WritePlacement`); once it has started, it finishes and the call returns its outcome.
        """
        if not items:
            self._check_open()
            return AppendOutcome(seqs=(), persisted=self._options.persisted)
        async with self._write_lock:
            side = await self._claimed_side()
            prefix = batch_prefix(side.writer)
            if keyed is not None:
                first = side.keys.find(keyed, self._options.clock())
                if first is not None:
                    self._guard_ack()
                    return AppendOutcome(seqs=first, persisted=self._options.persisted)
                prefix = (*prefix, key_event(keyed, len(items)))
            folder, recorded = check_batch(
                items, side.folder, self.session_id, self._options.clock(), prefix=prefix
            )
            side.accept(recorded, folder)
            if self._options.durability != "write-behind":
                await self._flush_locked(side)
            recorded = recorded[len(prefix) :]
            for event in recorded:
                self._on_recorded(self.session_id, event["type"])
            self._guard_ack()
            return AppendOutcome(
                seqs=tuple(event["seq"] for event in recorded), persisted=self._options.persisted
            )

    def _guard_ack(self) -> None:
        guard = self._options.ack_guard
        if guard is not None:
            # Fencing (issue 8): checked once the batch is durable per the durability mode
            # and before the ack (also of a keyed retry: a fenced-off writer's memory may hold
            # a batch readers drop); past the lease deadline it raises and the caller gets
            # that error, never the seqs.
            guard(self.session_id)

    async def _claimed_side(self) -> WriterSide:
        """The writer side, checked against the claim (fencing; see `actors.store._fencing`)."""
        side = await self._writer_side()
        if self._options.epoch_of is None:
            return side
        epoch = claimed_epoch(self._options, self.session_id)
        if claim_is_new(side.writer.epoch, epoch, self.session_id, claimed=side.claimed):
            with trio.CancelScope(shield=True):
                try:
                    await trio.to_thread.run_sync(self._close_sync, side)
                finally:
                    side.lock.release()
                    self._side = None
            side = await self._writer_side()
        side.claimed = side.claimed or epoch is not None
        return side

    async def set_model_route(
        self, route: RecordedModelRoute, *, keyed: KeyedRequest | None = None
    ) -> RecordedModelRoute:
        """Record the agent's model route (in the projection cache's ``model_routes``).

        With ``keyed``, the key is recorded in the same transaction (`actors.store._route_keys`)
        and a key the session remembers returns the route its first call recorded.

        Raises:
            ArgumentsInvalidError: ``keyed`` names a key used before with other arguments.
            UnavailableError: the cache's disk refused the write (nothing was recorded).
        """
        self._check_open()
        if keyed is None:
            record = functools.partial(self._cache.set_model_route, self.session_id, route)
        else:
            policy = self._options.idempotency
            record = functools.partial(
                set_model_route_keyed, self._cache, self.session_id, route, keyed, policy
            )
        try:
            stamped = await trio.to_thread.run_sync(record)
        except ProjectionCacheError as error:
            what = "cannot record the model route"
            raise cache_write_refused(self.session_id, error, self._cache.path, what) from None
        self._route = stamped
        return stamped

    async def flush(self) -> int:
        """Write pending events now (the write-behind timer calls this); returns how many.

        Raises:
            UnavailableError: the file system refused the write; the events stay pending (they
                were answered ``pending``) and the next flush writes them, once.
        """
        async with self._write_lock:
            side = self._side
            if side is None or not side.writer.pending_count:
                return 0
            with trio.CancelScope(shield=True):
                written = await self._flush_locked(side, keep=True)
            return written

    async def _flush_locked(self, side: WriterSide, *, keep: bool = False) -> int:
        """Write the pending batch; a failure, or a cancel before the write starts, discards it
        unless ``keep`` (write-behind, called shielded: the batch was answered; it is retried)."""
        progress = self._progress if self._progress and self._progress.running else None
        flush = functools.partial(side.flush, commit_progress=progress is None)
        try:
            if keep:
                written = await trio.to_thread.run_sync(flush)
            else:
                size, may_block = side.writer.pending_bytes, not side.notes_only()
                written = await self._placement.write(flush, size=size, may_block=may_block)
        except trio.Cancelled:  # withdrawn before its write started: none of it is written
            if not keep:
                side.discard()
            raise
        except LogWriteError as error:
            pending = side.writer.pending_count
            if not keep:
                side.discard()
            raise batch_refused(self.session_id, error, pending=pending, kept=keep) from None
        if progress is not None:
            progress.noted()
        return written

    async def _writer_side(self) -> WriterSide:
        """Become the session's writer (lock, open, repair) unless already it."""
        self._check_open()
        if self._side is not None:
            return self._side
        if not self.root.writable:
            raise UnauthorizedError(
                f'session "{self.session_id}" is read-only: {self.root.path} is served '
                "read-only (serve it with --writable to append)",
                details={
                    "sessionId": self.session_id,
                    "root": str(self.root.path),
                    "reason": "read-only",
                },
            )
        if self._before_write is not None:
            # A clustered worker binds the session's shard to its storage before the first
            # byte (docs/cluster.md, storage modes); if that fails nothing is written.
            await self._before_write(self.session_id)
            self._check_open()
            if self._side is not None:
                return self._side
        lock = SessionLock(lock_path_for(self.path), self.session_id)
        try:
            lock.acquire()
        except OSError as error:
            action = "cannot take the write lock"
            raise write_refused(self.session_id, error, path=lock.path, action=action) from None
        epoch = claimed_epoch(self._options, self.session_id)
        try:
            self._side = await trio.to_thread.run_sync(self._open_sync, lock, epoch)
        except BaseException:
            lock.release()
            raise
        self._loaded = None  # the writer's memory replaces the loaded log
        return self._side

    def _open_sync(self, lock: SessionLock, epoch: int | None) -> WriterSide:
        # We hold the lock, so no writer of ours changes the file from here on; the log read
        # as a reader is still current unless its identity changed since that read.
        loaded = self._loaded
        if loaded is None or file_identity(self.path) != self._identity:
            loaded, self._identity = self._load_sync()
        return WriterSide.open(
            self.session_id,
            self.path,
            loaded,
            cache=self._cache,
            options=self._options,
            lock=lock,
            epoch=epoch,
            reload=self._reload_sync,
        )

    def _reload_sync(self) -> LoadedSession:
        loaded, self._identity = self._load_sync()
        return loaded

    # --- lifecycle ---

    def _check_open(self) -> None:
        if self._closed:
            raise UnavailableError(f'session "{self.session_id}" was passivated; call again')

    async def aclose(self) -> None:
        """Flush, close the writer and release the lock (idempotent; shielded).

        Raises:
            InternalError: pending events could not be written (the lock is released anyway).
        """
        if self._closed:
            await self._gone.wait()
            return
        self._closed = True
        try:
            with trio.CancelScope(shield=True):
                async with self._write_lock:
                    side = self._side
                    self._loaded = None
                    if side is None:
                        return
                    try:
                        await trio.to_thread.run_sync(self._close_sync, side)
                    finally:
                        side.lock.release()
                        # Keep answering the cheap properties after close.
                        self._title = side.writer.title
                        descriptor = side.writer.subagent_descriptor
                        self._label = descriptor.label if descriptor is not None else None
                        count = side.writer.next_seq  # what the log holds, once closed
                        self._captured = count - 1 if count else None
                        self._side = None
        finally:
            # Only now may the store hand out a new state for this id: its first write
            # must not find this one's lock still held.
            self._on_close(self)
            self._gone.set()

    async def wait_closed(self) -> None:
        """Return once `aclose` has finished (the lock is released)."""
        await self._gone.wait()

    def _close_sync(self, side: WriterSide) -> None:
        side.close()
