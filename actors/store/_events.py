"""Events as hosts hand them to an agent, and the all-or-nothing check of one batch.

A host appends a list of ``{type, data, surfaceOp?, sourceEventSeqs?, ignorable?}``; the actor
assigns ``seq`` and ``time``. A batch is atomic: every event is first recorded and validated
exactly as the log writer does (`check_new_event`, then the surface fold of
`session-log-format` §6.6) against a copy of the session's fold, and only a batch that passes
as a whole reaches the writer. So a rejected batch leaves the log and the actor unchanged, and
the error names the first offending event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from actors.session_log import (
    FENCE_TYPES,
    IDEMPOTENCY_KEY_TYPE,
    SurfaceFolder,
    check_new_event,
    dumps_line,
    normalize_title,
    parse_line,
)

__all__ = [
    "AppendRejectedError",
    "EventInput",
    "check_batch",
    "record_event",
    "title_event",
]


@attrs.frozen(kw_only=True)
class EventInput:
    """One event to append (wire: ``{type, data, surfaceOp?, sourceEventSeqs?, ignorable?}``)."""

    type: str
    """The event type (one of the 48 known types, or any type with ``ignorable``)."""
    data: Any
    """The JSON payload."""
    surface_op: str | dict[str, Any] | None = None
    """``"append"`` or ``{"op": "replace", "start": s, "end": e}``; required on
    ``user/message``, ``assistant/message`` and ``tool/result``, forbidden on other types."""
    source_event_seqs: list[int] | None = None
    """Provenance: distinct seqs earlier than this event (every shadowed seq of a replace)."""
    ignorable: bool = False
    """Mark an event readers may skip when they do not know its type."""


class AppendRejectedError(ValueError):
    """An event of a batch breaks a write rule; nothing of the batch was appended.

    Attributes:
        index: position of the offending event in the batch.
        event_type: its ``type`` as given.
        seq: the seq it would have had.
        detail: the rule it breaks (the log reader's wording).
    """

    def __init__(self, index: int, event_type: object, seq: int, detail: str) -> None:
        self.index = index
        self.event_type = event_type
        self.seq = seq
        self.detail = detail
        super().__init__(
            f"event {index} ({event_type!r}, would be seq {seq}) rejected: {detail}; "
            "nothing of this batch was appended"
        )


def record_event(item: EventInput, seq: int, time_ms: int) -> dict[str, Any]:
    """Build the event as the writer records it: envelope in upstream's key order, then a
    JSON round trip (what a reader will see).

    Raises:
        TypeError, ValueError: the payload is not losslessly JSON-serializable.
    """
    event: dict[str, Any] = {"type": item.type, "seq": seq, "time": time_ms, "data": item.data}
    if item.source_event_seqs is not None:
        event["sourceEventSeqs"] = list(item.source_event_seqs)
    if item.surface_op is not None:
        op = item.surface_op
        event["surfaceOp"] = dict(op) if isinstance(op, Mapping) else op
    if item.ignorable:
        event["ignorable"] = True
    recorded: dict[str, Any] = parse_line(dumps_line(event))
    return recorded


def check_batch(
    items: Sequence[EventInput],
    folder: SurfaceFolder,
    session_id: str,
    time_ms: int,
    *,
    prefix: Sequence[EventInput] = (),
) -> tuple[SurfaceFolder, list[dict[str, Any]]]:
    """Validate a batch as one unit against a copy of ``folder``.

    Args:
        items: the host's events; the fencing types (`actors.session_log._epochs`) and the
            idempotency key record (`actors.session_log._idempotency`) are reserved for the
            store and rejected.
        folder: the session's fold.
        session_id: the session id (for error messages).
        time_ms: the batch's ``time``.
        prefix: the store's own records to put ahead of the host's (an epoch record, a key
            record).

    Returns:
        The fold after the batch (``folder`` itself is untouched) and the recorded events
        (``prefix`` first).

    Raises:
        AppendRejectedError: the first event that breaks a rule, with its index among
            ``items``.
    """
    fold = folder.copy()
    recorded: list[dict[str, Any]] = []
    for item in prefix:
        event = record_event(item, fold.next_seq, time_ms)
        check_new_event(event, session_id)
        fold.apply(event)
        recorded.append(event)
    for index, item in enumerate(items):
        seq = fold.next_seq
        if item.type in FENCE_TYPES:
            raise AppendRejectedError(
                index, item.type, seq, "this event type is reserved for the store's fencing"
            )
        if item.type == IDEMPOTENCY_KEY_TYPE:
            raise AppendRejectedError(
                index, item.type, seq, "this event type is reserved for idempotency keys"
            )
        try:
            event = record_event(item, seq, time_ms)
            check_new_event(event, session_id)
            fold.apply(event)
        except (TypeError, ValueError, RecursionError) as error:
            # EventError, SurfaceError and JSON errors are all ValueErrors.
            raise AppendRejectedError(index, item.type, seq, str(error)) from None
        recorded.append(event)
    return fold, recorded


def title_event(title: str) -> EventInput:
    """A ``session/title`` event for an explicit user rename (§7: pins the title).

    Raises:
        ValueError: the title is empty after normalization (one line, controls removed,
            at most 80 UTF-8 bytes).
    """
    text = normalize_title(title)
    if not text:
        raise ValueError("session title is empty after normalization")
    return EventInput(
        type="session/title",
        data={"title": text, "messageSeqs": [], "source": {"kind": "user"}},
    )
