"""The DSH reference endpoints, served by every agent.

``fileReferences/list(agentId, query)``: path-only ``@``-completion candidates inside the
agent's cwd (upstream's ``SessionFileReferences``: service key ``sessionFileReferences``, wire
namespace ``fileReferences``, a bare ``@Remote list``).

``sessionReferenceResolver/candidates(agentId, query)``: other sessions the agent may mention,
from the projection cache only (never a transcript at keystroke rate).

``sessionReferenceResolver/prepare(agentId, content, references)``: freeze up to three
referenced sessions into one bounded, untrusted context message. Each source is read once,
through its own agent actor (``read_surface``), so a source that is being appended to is read
between two of its batches, never torn.

``sessionReferenceResolver/parseMentions(agentId, text)``: what upstream's pre-step does to a
direct message's text before ``prepare`` (session-reference §2.4), for hosts that do not
carry the mention codec: the readable text (each mention replaced by ``@label``) and the
references in mention order, ready to pass to ``prepare``. Not an upstream endpoint.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import trio

from actors._agents import Agent
from actors._fresh_read import FreshRead
from actors._remote import Remote, RemoteService
from actors.file_references import FileReferenceCandidate, FileReferenceService
from actors.session_references import (
    CandidateIndex,
    ContentBlock,
    ParsedSessionReferenceText,
    PreparedReferencedMessage,
    SessionReferenceConfig,
    SessionReferenceError,
    SessionReferenceErrorCode,
    SessionReferenceInput,
    SessionReferenceMentionCandidate,
    SourceSnapshot,
    SpillStore,
    discard_spills,
    parse_session_reference_text,
    prepare,
)
from actors.store import ProjectionCache
from wire import HANDLER_CHECKED

__all__ = ["SessionFileReferences", "SessionReferenceResolver"]

#: Reads a source session's surface through its agent actor.
ReadSurface = Callable[[str], Awaitable[SourceSnapshot]]

#: Listing changes up to this many sessions (or a tenth of the listing) are applied to the
#: candidate index in place; more rebuild it in a worker thread.
_APPLY_IN_PLACE = 1000

#: Texts up to this many characters are parsed for mentions on the event loop (about 2 ms
#: when dense with mentions, far less for prose); longer ones in a worker thread.
_PARSE_INLINE = 16 * 1024


class SessionFileReferences(RemoteService, key="sessionFileReferences", namespace="fileReferences"):
    """``fileReferences/list``, delegating to the per-agent index service."""

    def __init__(self, files: FileReferenceService, *, default_cwd: Path) -> None:
        self._files = files
        self._default_cwd = default_cwd

    @Remote("list")
    async def list_references(self, agent: Agent, query: str) -> list[FileReferenceCandidate]:
        """Completion candidates ``{path, kind}`` for ``query`` inside the agent's cwd."""
        cwd = getattr(agent.state, "cwd", None) or self._default_cwd
        return await self._files.list(agent.id, cwd, query)

    def on_session_event(self, session_id: str, event_type: str) -> None:
        """Upstream's freshness rule: a recorded tool result invalidates the agent's index."""
        self._files.on_session_event(session_id, event_type)


class SessionReferenceResolver(RemoteService, key="sessionReferenceResolver"):
    """``candidates`` and ``prepare`` of the newer DSH contract."""

    def __init__(
        self,
        *,
        cache: ProjectionCache,
        root_ids: Sequence[int],
        config: SessionReferenceConfig,
        read_surface: ReadSurface,
        spill_store: SpillStore | None,
    ) -> None:
        self._cache = cache
        self._root_ids = tuple(root_ids)
        self._config = config
        self._read_surface = read_surface
        self._spill_store = spill_store
        self._index: CandidateIndex | None = None
        self._index_revision: int | None = None
        #: Candidate-index builds (first use, large changes) and in-place updates since start.
        self.index_builds = 0
        self.index_updates = 0
        self._rebuild = trio.Lock()
        #: The cache's revision, one thread read at a time for every concurrent query.
        self._revision = FreshRead(cache.revision)

    @Remote("candidates")
    async def remote_export_candidates(
        self, agent: Agent, query: str = ""
    ) -> list[SessionReferenceMentionCandidate]:
        """Sessions the agent may mention, cwd affinity first then newest, each with its
        canonical mention ``@[displayTitle ?? label](dsh-session:…)``."""
        index = await self._current_index()
        return index.remote_candidates(agent.state, query, config=self._config)

    @Remote("prepare", errors=SessionReferenceErrorCode)
    async def remote_prepare(
        self,
        agent: Agent,
        content: Annotated[str | list[ContentBlock], HANDLER_CHECKED],
        references: Annotated[list[SessionReferenceInput], HANDLER_CHECKED],
    ) -> PreparedReferencedMessage:
        """``{content, additionalContext?}``: ``content`` (returned as a copy) and the
        referenced sessions (at most three) frozen into one bounded, untrusted context message.

        Each reference is read once, through its own agent; the context message's source
        records what was kept of each. Malformed references answer
        ``SESSION_REFERENCE_INVALID_REFERENCE`` with upstream's exact message.
        """
        state = agent.state

        async def lookup_model_route() -> Any:
            await trio.lowlevel.checkpoint()
            return getattr(state, "model_route", None)

        prepared = await prepare(
            state,
            content,
            references,
            read_snapshot=self._read_surface,
            config=self._config,
            spill_store=self._spill_store,
            lookup_model_route=lookup_model_route,
        )
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            # Cancelled after prepare returned, before the reply ("after the spill save
            # completed but before the reply", issue 4): nothing reaches the caller, so the
            # spilled transcripts are nobody's. Remove them, then fail the way every other
            # cancel point of prepare does.
            await discard_spills(self._spill_store, prepared.spilled)
            raise SessionReferenceError.cancelled(exc) from exc
        return prepared.to_wire()

    @Remote("parseMentions", errors=Literal["SESSION_REFERENCE_INVALID_REFERENCE"])
    async def remote_parse_mentions(self, agent: Agent, text: str) -> ParsedSessionReferenceText:
        """``{text, references: [{sessionId, label}, …]}``: ``text`` with every mention
        (``@[label](dsh-session:…)`` or a bare ``dsh-session:…``) replaced by ``@label``, and
        the references in mention order, duplicates kept (``prepare`` de-duplicates).

        Raises:
            SessionReferenceError: INVALID_REFERENCE ``invalid session reference URI "<uri>"``
                for the first malformed mention.
        """
        # ``agent`` scopes the call (authorization, routing); the parse itself is pure, and
        # linear in the text: a long one (up to a frame) is parsed off the event loop.
        if len(text) <= _PARSE_INLINE:
            await trio.lowlevel.checkpoint()
            return parse_session_reference_text(text)
        return await trio.to_thread.run_sync(parse_session_reference_text, text)

    async def _current_index(self) -> CandidateIndex:
        """The candidate index, brought up to date when the cache's listing has changed.

        The cache's revision is read in a worker thread, shared by the queries that arrive
        while a read runs (``actors/_fresh_read.py``). The first call builds the index in a
        worker thread. Later changes are found by a worker
        thread (the listing is read and compared with the index, which queries may read
        meanwhile) and applied here on the event loop, between queries: only the blocks of
        the changed sessions are rebuilt. A change touching a large part of the listing
        builds a new index in the thread instead.
        """
        revision = await self._revision.get()
        if self._index is not None and self._index_revision == revision:
            return self._index
        async with self._rebuild:
            if self._index is not None and self._index_revision == revision:
                return self._index
            summaries = functools.partial(self._cache.summaries, self._root_ids)
            rows = await trio.to_thread.run_sync(summaries)
            index = self._index
            if index is None:
                index = await trio.to_thread.run_sync(CandidateIndex, rows)
                self.index_builds += 1
            else:
                changes = await trio.to_thread.run_sync(index.diff, rows)
                if len(changes) > max(_APPLY_IN_PLACE, len(index) // 10):
                    index = await trio.to_thread.run_sync(CandidateIndex, rows)
                    self.index_builds += 1
                else:
                    index.apply(changes)
                    self.index_updates += 1
            self._index, self._index_revision = index, revision
        return index
