"""``prepare``: freeze referenced sessions into one bounded context message.

Step order and error precedence follow session-reference-newer §4: normalize
(INVALID_REFERENCE / SELF_REFERENCE / TOO_MANY) -> empty fast path -> cancel check ->
budget -> cancel check -> concurrent reads (READ_FAILED; CANCELLED wins) -> cancel check
-> retention (BUDGET_EXCEEDED) -> spill saves -> cancel check -> prompt and record.

CPU-heavy steps (projection and retention, the spilled transcripts, the prompt) run in worker
threads, so the server keeps answering other calls while a large prepare runs. A worker thread
is not abandoned (its work is bounded), but a cancel that landed meanwhile is honoured as soon
as it returns.

Cancellation: upstream rejects with ``SESSION_REFERENCE_CANCELLED`` when its abort signal
fires; here the signal is the caller's trio cancel scope. Where upstream checks or races
the signal, a ``trio.Cancelled`` is turned into that error (it therefore escapes the
cancelled scope as an error, as the rejection does upstream). Spill files written for a
cancelled call are removed before the error propagates (the project's fence; upstream
leaves them to expiry).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

import attrs
import trio

from actors.session_references._budget import LookupModelRoute, resolve_reference_budget
from actors.session_references._config import SessionReferenceConfig
from actors.session_references._errors import SessionReferenceError, cancellation_as_error
from actors.session_references._inputs import AgentView, NormalizedReference, normalize_references
from actors.session_references._projection import SourceSnapshot
from actors.session_references._prompt import (
    ContextMessage,
    OmissionNotice,
    build_source_record,
    render_prompt,
)
from actors.session_references._retention import RetainedSource, retain_referenced_session
from actors.session_references._spill import SaveTextSpill, SpillRef, SpillStore, render_transcript
from actors.session_references._wire_types import PreparedReferencedMessage

__all__ = [
    "PreparedMessage",
    "ReadSnapshot",
    "discard_spills",
    "prepare",
    "prepare_omissions",
    "render_sources",
    "run_off_loop",
]

#: Reads one source's surface snapshot (through its agent actor); raises on failure.
ReadSnapshot = Callable[[str], Awaitable[SourceSnapshot]]

T = TypeVar("T")

#: Upper bound on the shielded clean-up of spill files after a cancel.
_DISCARD_TIMEOUT_SECONDS = 10.0


@attrs.frozen(kw_only=True)
class PreparedMessage:
    """The result of :func:`prepare`."""

    #: A deep copy of the caller's content (never the same object).
    content: Any
    #: The context message; ``None`` (wire: key absent) when there were no references.
    additional_context: ContextMessage | None = None
    #: Transcripts saved for this call, so a caller that drops the result can discard them.
    spilled: tuple[SpillRef, ...] = ()

    def to_wire(self) -> PreparedReferencedMessage:
        """``{content, additionalContext?}`` (the key is absent, not null, when empty)."""
        if self.additional_context is None:
            return {"content": self.content}
        return {"content": self.content, "additionalContext": self.additional_context.to_wire()}


async def _read_all(
    references: Sequence[NormalizedReference], read_snapshot: ReadSnapshot
) -> list[SourceSnapshot]:
    """Read every source once, concurrently; the first failure wins and stops the rest."""
    snapshots: list[SourceSnapshot | None] = [None] * len(references)
    failures: list[Exception] = []

    async with trio.open_nursery() as nursery:

        async def read_one(index: int, session_id: str) -> None:
            try:
                snapshot = await read_snapshot(session_id)
                if not isinstance(snapshot, SourceSnapshot):
                    raise TypeError(f"session {session_id!r} read returned {snapshot!r}")
            except Exception as exc:
                failures.append(exc)
                nursery.cancel_scope.cancel()
                return
            snapshots[index] = snapshot

        for reference in references:
            nursery.start_soon(read_one, reference.input_index, reference.session_id)
    # "If a read fails and the signal is (by then) aborted, CANCELLED wins."
    await trio.lowlevel.checkpoint_if_cancelled()
    if failures:
        raise SessionReferenceError.read_failed(failures[0])
    return [snapshot for snapshot in snapshots if snapshot is not None]


def render_sources(
    references: Sequence[NormalizedReference],
    snapshots: Sequence[SourceSnapshot],
    max_bytes: int,
) -> list[RetainedSource]:
    """Project and retain each source in normalized order.

    Raises:
        SessionReferenceError: BUDGET_EXCEEDED for the first source that cannot fit.
    """
    rendered = []
    for reference, snapshot in zip(references, snapshots, strict=True):
        retained = retain_referenced_session(snapshot, reference.label, max_bytes)
        if retained is None:
            raise SessionReferenceError.budget_exceeded()
        rendered.append(retained)
    return rendered


async def run_off_loop(work: Callable[[], T]) -> T:
    """Run CPU-heavy ``work`` in a worker thread, then honour a cancel that landed meanwhile.

    Raises:
        trio.Cancelled: the caller was cancelled while the thread ran (the thread's result,
            or its exception, is dropped).
    """
    result = await trio.to_thread.run_sync(work)
    await trio.lowlevel.checkpoint_if_cancelled()
    return result


def _notice(source: RetainedSource, **full: Any) -> OmissionNotice:
    return OmissionNotice(
        session_id=source.full_data.session_id,
        captured_through_seq=source.full_data.captured_through_seq,
        omitted_messages=source.stats.omitted_messages,
        omitted_bytes=source.stats.omitted_bytes,
        **full,
    )


async def prepare_omissions(
    spill_store: SpillStore | None,
    owner_session_id: str,
    rendered: Sequence[RetainedSource],
    saved: list[SpillRef],
) -> list[OmissionNotice]:
    """Save full transcripts of truncated sources concurrently; return notices in order.

    Intact sources get no notice. Without a store the notice says
    ``storage-not-configured``; a failing save (any ``Exception``) says ``save-failed``.
    Each successful save is appended to ``saved`` as soon as it returns, so the caller
    can discard it if the call is cancelled afterwards.
    """
    notices: list[OmissionNotice | None] = [None] * len(rendered)
    truncated = [(index, source) for index, source in enumerate(rendered) if source.stats.truncated]
    if spill_store is None:
        for index, source in truncated:
            notices[index] = _notice(source, unavailable_reason="storage-not-configured")
    elif truncated:
        store = spill_store

        async def save_one(index: int, source: RetainedSource) -> None:
            content = await run_off_loop(
                functools.partial(
                    render_transcript, source.full_data, source.captured_format_version
                )
            )
            request = SaveTextSpill(
                owner_session_id=owner_session_id,
                source_session_id=source.full_data.session_id,
                source_label=source.full_data.label,
                suggested_name=f"session-reference-{index + 1}.txt",
                content=content,
            )
            try:
                ref = await store.save(request)
            except Exception:
                # "Optional storage failures cannot turn an incomplete preview into a
                # claimed full snapshot"; the cause never reaches the prompt.
                notices[index] = _notice(source, unavailable_reason="save-failed")
                return
            saved.append(ref)
            notices[index] = _notice(source, saved=ref)

        async with trio.open_nursery() as nursery:
            for index, source in truncated:
                nursery.start_soon(save_one, index, source)
    return [notice for notice in notices if notice is not None]


async def discard_spills(spill_store: SpillStore | None, refs: Iterable[SpillRef]) -> None:
    """Best-effort, shielded removal of saved transcripts (failures are ignored)."""
    refs = list(refs)
    if spill_store is None or not refs:
        return
    with trio.move_on_after(_DISCARD_TIMEOUT_SECONDS, shield=True):
        for ref in refs:
            with contextlib.suppress(Exception):
                await spill_store.discard(ref)


def _new_message_id() -> str:
    return str(uuid.uuid4())


async def prepare(
    agent: AgentView,
    content: Any,
    references: Iterable[object],
    *,
    read_snapshot: ReadSnapshot,
    config: SessionReferenceConfig,
    spill_store: SpillStore | None = None,
    lookup_model_route: LookupModelRoute | None = None,
    new_message_id: Callable[[], str] = _new_message_id,
) -> PreparedMessage:
    """Snapshot every referenced session into one untrusted, bounded context message.

    Args:
        agent: The agent receiving the message (its id may not be referenced).
        content: The message content; returned deep-copied.
        references: ``{sessionId, label?}`` maps or reference objects, in mention order.
        read_snapshot: Reads one source's surface snapshot; called once per distinct
            source, all concurrently.
        config: Validated resolver configuration.
        spill_store: Where full transcripts of truncated sources go; ``None`` yields
            ``storage-not-configured`` notices.
        lookup_model_route: The agent's model route for the automatic budget.
        new_message_id: Id factory of the context message (UUID v4 by default).

    Returns:
        The copied content and, when references remain after normalization, the context
        message.

    Raises:
        SessionReferenceError: INVALID_REFERENCE, SELF_REFERENCE or TOO_MANY from
            normalization (before anything else); CANCELLED when the caller's scope is
            cancelled at or after the first check (never on the empty fast path);
            READ_FAILED; BUDGET_EXCEEDED.
        Exception: A model-route lookup failure other than ``NO_ADAPTER``, unchanged.
        TypeError: ``references`` is not a list.

    If cancelled, raises ``SessionReferenceError`` (CANCELLED) instead of
    ``trio.Cancelled``, and removes any transcript saved for this call first.
    """
    accepted = copy.deepcopy(content)
    normalized = normalize_references(references, agent.session_id, config.max_references)
    if not normalized:
        # Upstream makes no cancellation check on this path.
        return PreparedMessage(content=accepted)
    with cancellation_as_error():
        await trio.lowlevel.checkpoint_if_cancelled()
        max_bytes = await resolve_reference_budget(config, lookup_model_route)
        await trio.lowlevel.checkpoint_if_cancelled()
        snapshots = await _read_all(normalized, read_snapshot)
        # Upstream retains synchronously, so no abort can land during it: BUDGET_EXCEEDED
        # from the thread propagates as is; a cancel meanwhile is honoured when it returns.
        rendered = await run_off_loop(
            functools.partial(render_sources, normalized, snapshots, max_bytes)
        )
    saved: list[SpillRef] = []
    try:
        with cancellation_as_error():
            notices = await prepare_omissions(spill_store, agent.session_id, rendered, saved)
            await trio.lowlevel.checkpoint_if_cancelled()
            message = await run_off_loop(
                lambda: ContextMessage.create(
                    build_source_record(rendered), render_prompt(rendered, notices), new_message_id
                )
            )
    except BaseException:
        await discard_spills(spill_store, saved)
        raise
    return PreparedMessage(content=accepted, additional_context=message, spilled=tuple(saved))
