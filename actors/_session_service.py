"""``sessions/*``: the remote face of the session store.

Endpoints (wire names; every map key is camelCase):

- ``sessions/create(cwd?, parentSession?, seedLength?, origin?, delegationDepth=0,
  agentPreset?, sessionId?, idempotencyKey?) -> {sessionId, createdAt, cwd?, path}``: publish a
  new session header (a fresh UUID unless ``sessionId`` is given, or derived from the key when
  only ``idempotencyKey`` is); no agent involved.
- ``sessions/append(agentId, events: [{type, data, surfaceOp?, sourceEventSeqs?,
  ignorable?}], idempotencyKey?) -> {seqs, persisted}``: append a batch, all or nothing; the
  actor assigns ``seq`` and ``time``. ``persisted`` is ``fsync``, ``written`` or ``pending``
  (see `actors.store._state`). State-changing.
- ``sessions/snapshot(agentId) -> {session, capturedThroughSeq, events}``: the surface
  (upstream's ``readSurface``): the header record, the seq of the last event (``nil`` for a log
  without events) and the current surface events in surface order.
- ``sessions/setTitle(agentId, title, idempotencyKey?) -> {title, seq}``: a user rename
  (normalized, pins the title). State-changing.
- ``sessions/setModelRoute(agentId, provider, model, contextWindow?, idempotencyKey?) ->
  {provider, model, contextWindow?, updatedAt}``: record the agent's model route (kept in the
  projection cache's ``model_routes`` table; no log event carries it). State-changing.
- ``sessions/modelRoute(agentId) -> {provider, model, contextWindow?, updatedAt} | nil``.
- ``sessions/info(agentId) -> {sessionId, createdAt, cwd?, parentSession?, …, title?,
  subagentLabel?, lastSeq?, modelRoute?, writable, writer, path}``.
- ``sessions/list(limit=100, after?) -> {sessions: [...], next?}``: newest first
  (``createdAt`` desc, id asc) from the projection cache only; ``next`` is the cursor
  ``{createdAt, sessionId}`` of the following page, absent on the last page.

``idempotencyKey`` (1 to 128 characters) makes a state-changing call safe to retry after an
ambiguous failure: a retry with the same key (on the same agent) returns the first call's
result and applies nothing again, and the same key with other arguments is ``arguments-invalid``
with ``details.reason`` ``idempotency-key-reused`` (`actors.store._idempotency`).

Errors: ``session-not-found`` (unknown ``agentId``), ``arguments-invalid`` (a rejected event,
with ``details.index``; an invalid header; an empty title), ``agent-busy`` (another process
writes the session), ``unauthorized`` (the session's directory is served read-only),
``unavailable`` (the disk refused the write: ``details.reason`` ``no-space``, ``read-only`` or
``io-error``, ``details.errno``; nothing was written, see `actors.store._write_failures`),
``internal`` (a log that does not load, with upstream's wording).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

import attrs
import trio

from actors._agents import Agent
from actors._remote import Remote, RemoteService
from actors.session_log import MAX_SEGMENT_BYTES, CreationKey, SessionHeader, fits_one_segment
from actors.store import (
    AppendRejectedError,
    EventInput,
    ListCursor,
    RecordedModelRoute,
    SessionListing,
    SessionState,
    SessionStore,
    event_args,
    keyed_request,
    session_id_for_key,
    title_event,
)
from wire import ArgumentsInvalidError, InternalError, NonNegativeInt, Range

__all__ = [
    "AppendResult",
    "CreatedSession",
    "ModelRouteInfo",
    "PageCursor",
    "SessionInfo",
    "SessionListing",
    "SessionPage",
    "Sessions",
    "SurfaceSnapshotResult",
    "TitleResult",
]

MAX_PAGE = 1000
"""Largest ``limit`` of ``sessions/list``."""

#: Integers the session log and its cache keep: exact in a JavaScript number (DSH reads the
#: logs in TypeScript) and so within SQLite's 64-bit INTEGER.
_SAFE_INTEGER = 2**53 - 1
_STORED_INT = Range(min=-_SAFE_INTEGER, max=_SAFE_INTEGER)


@attrs.frozen(kw_only=True)
class CreatedSession:
    session_id: str
    created_at: int
    path: str
    cwd: str | None = None


@attrs.frozen(kw_only=True)
class AppendResult:
    #: The seqs assigned, in batch order.
    seqs: list[int]
    #: ``fsync`` (on stable storage), ``written`` (survives a crash of the server process) or
    #: ``pending`` (write-behind: flushed within the batch delay).
    persisted: str


@attrs.frozen(kw_only=True)
class SurfaceSnapshotResult:
    #: The header record, as on disk (``type``, ``version``, ``id``, ``createdAt``, …).
    session: dict[str, Any]
    #: Seq of the last event of the log (any type), ``nil`` for a log without events.
    captured_through_seq: int | None
    #: Current surface events in surface order (DSH event envelopes).
    events: list[dict[str, Any]]


@attrs.frozen(kw_only=True)
class TitleResult:
    #: The title as stored (normalized).
    title: str
    #: Seq of its ``session/title`` event.
    seq: int


@attrs.frozen(kw_only=True)
class ModelRouteInfo:
    provider: str
    model: str
    #: Epoch ms of the recording.
    updated_at: int
    context_window: int | None = None

    @classmethod
    def of(cls, route: RecordedModelRoute) -> ModelRouteInfo:
        return cls(
            provider=route.provider,
            model=route.model,
            context_window=route.context_window,
            updated_at=route.updated_at,
        )


@attrs.frozen(kw_only=True)
class SessionInfo(SessionListing):
    """A session's listing facts, plus the rest of its header and its live state."""

    delegation_depth: int
    #: The session's directory is served writable.
    writable: bool
    #: This server holds the session's write lock.
    writer: bool
    path: str
    seed_length: int | None = None
    agent_preset: str | None = None
    model_route: ModelRouteInfo | None = None


@attrs.frozen(kw_only=True)
class PageCursor:
    """The last row of a page: ``{createdAt, sessionId}``."""

    created_at: Annotated[int, _STORED_INT]
    session_id: str


@attrs.frozen(kw_only=True)
class SessionPage:
    sessions: list[SessionListing]
    #: Pass as ``after`` for the next page; absent on the last page.
    next: PageCursor | None = None


def _state(agent: Agent) -> SessionState:
    state = agent.state
    if not isinstance(state, SessionState):
        raise InternalError(f"agent {agent.id!r} is not backed by the session store")
    return state


class Sessions(RemoteService, key="sessions"):
    """Create, append to, read, title and list sessions (see the module docstring)."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    @Remote
    async def create(
        self,
        cwd: str | None = None,
        parent_session: str | None = None,
        seed_length: NonNegativeInt | None = None,
        origin: Literal["subagent"] | None = None,
        delegation_depth: NonNegativeInt = 0,
        agent_preset: str | None = None,
        session_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> CreatedSession:
        """Create a session (header only; a fresh UUID unless ``sessionId`` is given, the
        key's own id when only ``idempotencyKey`` is)."""
        if session_id and not fits_one_segment(session_id):
            raise ArgumentsInvalidError(
                f"sessionId is too long: its directory name would exceed {MAX_SEGMENT_BYTES} bytes",
                details={"path": "sessionId", "limit": MAX_SEGMENT_BYTES},
            )
        if session_id is None:
            session_id = (
                self._store.new_session_id()
                if idempotency_key is None
                else session_id_for_key(idempotency_key)
            )
        args = {
            "cwd": cwd,
            "parentSession": parent_session,
            "seedLength": seed_length,
            "origin": origin,
            "delegationDepth": delegation_depth,
            "agentPreset": agent_preset,
            "sessionId": session_id,
        }
        keyed = keyed_request("sessions/create", idempotency_key, args)
        header = SessionHeader(
            id=session_id,
            created_at=self._store.options.clock(),
            cwd=cwd,
            parent_session=parent_session,
            seed_length=seed_length,
            origin=origin,
            delegation_depth=delegation_depth,
            agent_preset=agent_preset,
            idempotency=CreationKey(key=keyed.key, request=keyed.request) if keyed else None,
        )
        row = await self._store.create(header)
        return CreatedSession(
            session_id=row.session_id, created_at=row.created_at, cwd=row.cwd, path=row.path
        )

    @Remote(mutates=True)
    async def append(
        self, agent: Agent, events: list[EventInput], idempotency_key: str | None = None
    ) -> AppendResult:
        """Append a batch of events, all or nothing; returns the seqs assigned."""
        keyed = keyed_request("sessions/append", idempotency_key, {"events": event_args(events)})
        try:
            outcome = await _state(agent).append(events, keyed=keyed)
        except AppendRejectedError as error:
            raise ArgumentsInvalidError(
                str(error),
                details={"index": error.index, "seq": error.seq, "reason": error.detail},
            ) from None
        return AppendResult(seqs=list(outcome.seqs), persisted=outcome.persisted)

    @Remote
    async def snapshot(self, agent: Agent) -> SurfaceSnapshotResult:
        """The surface: ``{session, capturedThroughSeq, events}``."""
        surface = await _state(agent).snapshot()
        # The events are handed over, not copied: they are never changed after they were
        # recorded (the store and its readers treat them as read-only), and the tuple is
        # the consistent prefix the actor observed. Copying each one here ran on the event
        # loop and, with a large log loaded, the allocations set off full garbage
        # collections over every loaded event: the server stalled for seconds.
        return SurfaceSnapshotResult(
            session=surface.session.to_record(),
            captured_through_seq=surface.captured_through_seq,
            events=cast("list[dict[str, Any]]", list(surface.events)),
        )

    @Remote("setTitle", mutates=True)
    async def set_title(
        self, agent: Agent, title: str, idempotency_key: str | None = None
    ) -> TitleResult:
        """Rename the session (an explicit user title, which pins it)."""
        keyed = keyed_request("sessions/setTitle", idempotency_key, {"title": title})
        try:
            event = title_event(title)
        except ValueError as error:
            raise ArgumentsInvalidError(str(error)) from None
        outcome = await _state(agent).append([event], keyed=keyed)
        return TitleResult(title=event.data["title"], seq=outcome.seqs[0])

    @Remote("setModelRoute", mutates=True)
    async def set_model_route(
        self,
        agent: Agent,
        provider: str,
        model: str,
        context_window: Annotated[int, Range(min=1, max=_SAFE_INTEGER)] | None = None,
        idempotency_key: str | None = None,
    ) -> ModelRouteInfo:
        """Record the agent's model route ``{provider, model, contextWindow}``."""
        if not provider or not model:
            raise ArgumentsInvalidError("provider and model must be non-empty")
        args = {"provider": provider, "model": model, "contextWindow": context_window}
        keyed = keyed_request("sessions/setModelRoute", idempotency_key, args)
        route = RecordedModelRoute(provider=provider, model=model, context_window=context_window)
        return ModelRouteInfo.of(await _state(agent).set_model_route(route, keyed=keyed))

    @Remote("modelRoute")
    async def model_route(self, agent: Agent) -> ModelRouteInfo | None:
        """The agent's recorded model route, or nil."""
        await trio.lowlevel.checkpoint()
        route = _state(agent).recorded_route
        return ModelRouteInfo.of(route) if route is not None else None

    @Remote
    async def info(self, agent: Agent) -> SessionInfo:
        """Header facts, title, label, last seq, model route and write status."""
        await trio.lowlevel.checkpoint()
        state = _state(agent)
        header = state.header
        route = state.recorded_route
        return SessionInfo(
            session_id=header.id,
            created_at=header.created_at,
            delegation_depth=header.delegation_depth,
            writable=state.root.writable,
            writer=state.is_writer,
            path=str(state.path),
            cwd=header.cwd,
            parent_session=header.parent_session,
            seed_length=header.seed_length,
            origin=header.origin,
            agent_preset=header.agent_preset,
            title=state.title,
            subagent_label=state.subagent_label,
            last_seq=state.captured_through_seq,
            model_route=ModelRouteInfo.of(route) if route is not None else None,
        )

    @Remote("list")
    async def list_sessions(
        self,
        limit: Annotated[int, Range(min=1, max=MAX_PAGE)] = 100,
        after: PageCursor | None = None,
    ) -> SessionPage:
        """Sessions newest first (``createdAt`` desc, id asc), one page, from the cache."""
        await trio.lowlevel.checkpoint()
        cursor = ListCursor(after.created_at, after.session_id) if after is not None else None
        rows = self._store.list_page(limit=limit + 1, after=cursor)
        page = rows[:limit]
        more = len(rows) > limit
        return SessionPage(
            sessions=[row.listing() for row in page],
            next=PageCursor(created_at=page[-1].created_at, session_id=page[-1].session_id)
            if more
            else None,
        )
