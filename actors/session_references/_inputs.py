"""Reference inputs, the requesting agent's view, and normalization (session-reference §4.2).

Normalization turns the caller's raw ``references`` (wire maps or
:class:`SessionReferenceInput` values) into an ordered, de-duplicated list, rejecting
malformed elements, self references and lists longer than ``maxReferences``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import attrs

from actors.session_references._errors import SessionReferenceError
from actors.session_references._uri import MentionReference

__all__ = [
    "AgentView",
    "NormalizedReference",
    "SessionReferenceInput",
    "normalize_references",
]


class AgentView(Protocol):
    """What discovery and preparation need to know about the requesting agent.

    The agent id *is* its session id (upstream: ``agent.id === agent.session.id``).
    """

    @property
    def session_id(self) -> str:
        """The agent's own session id (excluded from candidates, rejected as a source)."""
        ...

    @property
    def cwd(self) -> str | None:
        """The agent's session header ``cwd``; ``None`` when the header has none."""
        ...


@attrs.frozen(kw_only=True)
class SessionReferenceInput:
    """One structured reference, as a host passes it (wire: ``{sessionId, label?}``)."""

    #: Authoritative source session id.
    session_id: str
    #: Display label; ``None`` means "use the session id".
    label: str | None = None


@attrs.frozen(kw_only=True)
class NormalizedReference:
    """A de-duplicated reference with its label resolved."""

    #: Source session id.
    session_id: str
    #: ``label ?? session_id`` of the first occurrence (an empty label is kept).
    label: str
    #: Position in the de-duplicated list (the source record's ``inputIndex``).
    input_index: int


_RAW_ARRAY = (list, tuple)


def _fields_of(element: object) -> tuple[object, object]:
    """Return ``(sessionId, label)`` of one element, ``label`` ``None`` when absent.

    Raises:
        SessionReferenceError: The element is not an object, or its fields are mistyped.
    """
    if isinstance(element, SessionReferenceInput | MentionReference):
        return element.session_id, element.label
    if isinstance(element, Mapping):
        session_id = element.get("sessionId")
        if "label" in element and not isinstance(element["label"], str):
            # A present `label` must be a string; JSON/msgpack null counts as present.
            raise SessionReferenceError.bad_reference_fields()
        return session_id, element.get("label")
    if isinstance(element, _RAW_ARRAY):
        # JS arrays are objects: they pass the object check and fail the field check.
        raise SessionReferenceError.bad_reference_fields()
    raise SessionReferenceError.not_an_object()


def normalize_references(
    references: Iterable[object], target_id: str, max_references: int
) -> tuple[NormalizedReference, ...]:
    """Validate and de-duplicate references, in order.

    For each element: not an object -> INVALID_REFERENCE; non-string ``sessionId`` or a
    present non-string ``label`` -> INVALID_REFERENCE; the target's own id ->
    SELF_REFERENCE (checked before de-duplication); a repeated id is skipped (the first
    occurrence and its label win). Finally more than ``max_references`` distinct ids ->
    TOO_MANY. The empty string is a valid id.

    Args:
        references: Wire maps ``{sessionId, label?}`` or reference objects.
        target_id: Session id of the agent receiving the message.
        max_references: Configured ``maxReferences``.

    Returns:
        The normalized references; ``input_index`` counts from 0.

    Raises:
        SessionReferenceError: As above, in element order, TOO_MANY last.
        TypeError: ``references`` is not a list-like iterable (upstream throws a
            ``TypeError`` too); a mapping is not accepted as the list.
    """
    if isinstance(references, Mapping):
        # A JS plain object is not iterable; a Python dict would iterate its keys.
        raise TypeError(f"references must be a list, not {type(references).__name__}")
    seen: set[str] = set()
    normalized: list[NormalizedReference] = []
    for element in references:
        session_id, label = _fields_of(element)
        if not isinstance(session_id, str) or (label is not None and not isinstance(label, str)):
            raise SessionReferenceError.bad_reference_fields()
        if session_id == target_id:
            raise SessionReferenceError.self_reference(target_id)
        if session_id in seen:
            continue
        seen.add(session_id)
        normalized.append(
            NormalizedReference(
                session_id=session_id,
                label=session_id if label is None else label,
                input_index=len(normalized),
            )
        )
    if len(normalized) > max_references:
        raise SessionReferenceError.too_many(max_references)
    return tuple(normalized)
