"""Candidate discovery: ``listCandidates`` and the remote ``candidates`` face (newer §3).

Candidates are every listed session except the requesting agent's own, ranked by cwd
affinity (same cwd, then no cwd, then any other), newest first within a rank, filtered
case-insensitively on id, cwd, label and display title (never on transcript text).
Labels come only from projection reads, which the session store has already folded
into each :class:`SessionSummary`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence

import attrs
import trio

from actors.session_references._config import SessionReferenceConfig, as_positive_safe_integer
from actors.session_references._errors import SessionReferenceError, cancellation_as_error
from actors.session_references._inputs import AgentView
from actors.session_references._uri import format_session_reference_mention
from actors.session_references._wire_types import (
    SessionReferenceCandidate,
    SessionReferenceMentionCandidate,
)

__all__ = [
    "Candidate",
    "SessionSummary",
    "candidate_rank",
    "list_candidates",
    "list_candidates_async",
    "listing_order",
    "remote_candidates",
    "resolve_limit",
    "to_mention_candidates",
]


@attrs.frozen(kw_only=True)
class SessionSummary:
    """One listed session as the projection cache knows it (no log reads).

    ``label`` and ``display_title`` are the raw projection values: ``None`` means no
    projection answered (e.g. a cold session without a checkpoint, one seeded straight to
    disk, or one whose log is listed by its header but does not load), and discovery then
    falls back to the id (resp. the label).
    """

    #: Session id (header ``id``).
    session_id: str
    #: Header ``cwd``; ``None`` when absent.
    cwd: str | None
    #: Header ``createdAt``, Unix epoch milliseconds.
    created_at: int
    #: Projected title: text of the last ``session/title`` event; ``None`` when none.
    label: str | None = None
    #: Projected subagent creation label; ``None`` when not a labelled subagent child.
    display_title: str | None = None


@attrs.frozen(kw_only=True)
class Candidate:
    """A session the agent may mention."""

    session_id: str
    #: Projected title, else the session id.
    label: str
    #: Subagent creation label, else ``label``.
    display_title: str
    #: Header cwd; ``None`` = key absent on the wire.
    cwd: str | None
    #: The candidate has a cwd exactly equal to the agent's cwd.
    same_workspace: bool
    created_at: int

    @classmethod
    def from_summary(cls, summary: SessionSummary, target_cwd: str | None) -> Candidate:
        """Resolve labels and workspace affinity for one summary."""
        label = summary.session_id if summary.label is None else summary.label
        return cls(
            session_id=summary.session_id,
            label=label,
            display_title=label if summary.display_title is None else summary.display_title,
            cwd=summary.cwd,
            same_workspace=summary.cwd is not None and summary.cwd == target_cwd,
            created_at=summary.created_at,
        )

    @property
    def mention(self) -> str:
        """The canonical mention, labelled ``displayTitle ?? label`` (N+dt)."""
        return format_session_reference_mention(self.session_id, self.display_title)

    def to_wire(self) -> SessionReferenceCandidate:
        """``{sessionId, label, displayTitle, cwd?, sameWorkspace, createdAt}``."""
        if self.cwd is None:
            return {
                "sessionId": self.session_id,
                "label": self.label,
                "displayTitle": self.display_title,
                "sameWorkspace": self.same_workspace,
                "createdAt": self.created_at,
            }
        return {
            "sessionId": self.session_id,
            "label": self.label,
            "displayTitle": self.display_title,
            "cwd": self.cwd,
            "sameWorkspace": self.same_workspace,
            "createdAt": self.created_at,
        }

    def to_mention_wire(self) -> SessionReferenceMentionCandidate:
        """The remote element: :meth:`to_wire` keys, then ``mention``."""
        return {**self.to_wire(), "mention": self.mention}


def candidate_rank(candidate_cwd: str | None, target_cwd: str | None) -> int:
    """0 = same cwd (exact string equality), 1 = candidate has no cwd, 2 = anything else."""
    if candidate_cwd is not None and target_cwd is not None and candidate_cwd == target_cwd:
        return 0
    if candidate_cwd is None:
        return 1
    return 2


def listing_order(summaries: Iterable[SessionSummary]) -> list[SessionSummary]:
    """Sort newest first: ``createdAt`` descending, ties by id ascending.

    Upstream breaks ties with ``localeCompare``; code-point order equals it for typical
    (ASCII, UUID) ids.
    """
    return sorted(summaries, key=lambda s: (-s.created_at, s.session_id))


def resolve_limit(limit: object, config: SessionReferenceConfig) -> int:
    """``None`` -> the configured ``candidateLimit``; else a positive safe integer.

    Raises:
        SessionReferenceError: INVALID_REFERENCE ``candidate limit must be a positive
            safe integer``.
    """
    if limit is None:
        return config.candidate_limit
    checked = as_positive_safe_integer(limit)
    if checked is None:
        raise SessionReferenceError.invalid_limit()
    return checked


def _matches(candidate: Candidate, needle: str) -> bool:
    return (
        needle in candidate.session_id.lower()
        or (candidate.cwd is not None and needle in candidate.cwd.lower())
        or needle in candidate.label.lower()
        or needle in candidate.display_title.lower()
    )


def _rank_filter(
    agent: AgentView, ordered: Sequence[SessionSummary], needle: str, limit: int
) -> list[Candidate]:
    target_cwd = agent.cwd
    ranked: list[tuple[int, int, Candidate]] = []
    index = 0
    for summary in ordered:
        if summary.session_id == agent.session_id:
            continue
        candidate = Candidate.from_summary(summary, target_cwd)
        if needle == "" or _matches(candidate, needle):
            ranked.append((candidate_rank(summary.cwd, target_cwd), index, candidate))
        index += 1
    ranked.sort(key=lambda entry: (entry[0], entry[1]))
    return [candidate for _rank, _index, candidate in ranked[:limit]]


def list_candidates(
    agent: AgentView,
    summaries: Iterable[SessionSummary],
    query: str = "",
    limit: int | None = None,
    *,
    config: SessionReferenceConfig,
    presorted: bool = False,
) -> list[Candidate]:
    """List sessions ``agent`` may reference, best first.

    Args:
        agent: The requesting agent (excluded; its cwd drives ranking).
        summaries: Every listed session with its projected labels.
        query: Case-insensitive substring (``str.lower``, not trimmed: ``" "`` filters).
        limit: Result cap; ``None`` uses ``config.candidate_limit``.
        config: Resolver configuration.
        presorted: ``summaries`` is already in listing order (newest first).

    Raises:
        SessionReferenceError: INVALID_REFERENCE for a bad ``limit`` (checked first).
        TypeError: ``query`` is not a string.
    """
    checked_limit = resolve_limit(limit, config)
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, not {type(query).__name__}")
    ordered = list(summaries) if presorted else listing_order(summaries)
    return _rank_filter(agent, ordered, query.lower(), checked_limit)


async def list_candidates_async(
    agent: AgentView,
    list_sessions: Callable[[], Awaitable[Iterable[SessionSummary]]],
    query: str = "",
    limit: int | None = None,
    *,
    config: SessionReferenceConfig,
) -> list[Candidate]:
    """:func:`list_candidates` over an async listing, with upstream's cancellation points.

    Order: limit check, then a cancellation check, then the listing (cancellation while
    it is pending -> CANCELLED). Listing failures propagate unwrapped.

    Raises:
        SessionReferenceError: INVALID_REFERENCE (bad limit) before CANCELLED.
    """
    checked_limit = resolve_limit(limit, config)
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, not {type(query).__name__}")
    with cancellation_as_error():
        await trio.lowlevel.checkpoint_if_cancelled()
        summaries = await list_sessions()
    return _rank_filter(agent, listing_order(summaries), query.lower(), checked_limit)


def to_mention_candidates(
    candidates: Iterable[Candidate],
) -> list[SessionReferenceMentionCandidate]:
    """Wire elements of the remote ``candidates`` result (each with its ``mention``)."""
    return [candidate.to_mention_wire() for candidate in candidates]


def remote_candidates(
    agent: AgentView,
    summaries: Iterable[SessionSummary],
    query: str = "",
    *,
    config: SessionReferenceConfig,
) -> list[SessionReferenceMentionCandidate]:
    """``sessionReferenceResolver/candidates(agentId, query)``: the configured limit applies."""
    return to_mention_candidates(list_candidates(agent, summaries, query, None, config=config))
