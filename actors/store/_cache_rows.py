"""The rows of the projection cache: what it knows of one session, and of one rejected file.

A session has a row when its log's header passes the listing's shape check (upstream's listing
reads headers only, `session-log-format` §2.4), whether or not the rest of the log loads: a
row whose body failed carries the loader's reason in ``load_error`` and no projected facts
(title, subagent label, last seq), so discovery labels it by its id, as upstream's does for a
session no projection answers for (`session-reference-newer` §3.2). A file the listing
would skip (a header that fails the shape check, a layout problem) is a `Rejection` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from actors.session_references import SessionSummary

__all__ = [
    "COLUMNS",
    "CachedSession",
    "ListCursor",
    "Rejection",
    "SessionListing",
    "row_of",
    "values_of",
]


@attrs.frozen(kw_only=True)
class SessionListing:
    """One session as listings show it (also the wire shape of a ``sessions/list`` row)."""

    session_id: str
    """Header ``id``."""
    created_at: int
    """Header ``createdAt`` (epoch ms)."""
    cwd: str | None = None
    """Header ``cwd``."""
    parent_session: str | None = None
    """Header ``parentSession``."""
    origin: str | None = None
    """Header ``origin`` (``"subagent"``)."""
    title: str | None = None
    """Latest ``session/title`` text."""
    subagent_label: str | None = None
    """First ``subagent/descriptor`` label."""
    last_seq: int | None = None
    """Seq of the last event (closers included), None for a log without events."""


@attrs.frozen(kw_only=True)
class CachedSession(SessionListing):
    """One session as the cache knows it: the listing facts and where its transcript is."""

    root_id: int
    """The sessions root it lives in (see `ProjectionCache.root_id`)."""
    path: str
    """Its transcript."""
    file_size: int = 0
    """Transcript size when this row was written."""
    file_mtime_ns: int = 0
    """Transcript mtime (ns) when this row was written."""
    load_error: str | None = None
    """Why the log did not load, when its header is listed but its body fails (the loader's
    reason, without the path); None for a session that loads."""

    def listing(self) -> SessionListing:
        """The listing facts alone (without the storage fields)."""
        return SessionListing(**{name: getattr(self, name) for name in _LISTING_FIELDS})

    def summary(self) -> SessionSummary:
        """The row as session-reference discovery consumes it (label = title)."""
        return SessionSummary(
            session_id=self.session_id,
            cwd=self.cwd,
            created_at=self.created_at,
            label=self.title,
            display_title=self.subagent_label,
        )


_LISTING_FIELDS = tuple(field.name for field in attrs.fields(SessionListing))


@attrs.frozen
class ListCursor:
    """Where a page of the newest-first listing ended: its last row's ``(createdAt, id)``."""

    created_at: int
    session_id: str


@attrs.frozen(kw_only=True)
class Rejection:
    """A transcript the indexer could not accept (entirely, or its body), and why."""

    path: str
    reason: str
    listed: bool = False
    """The header passes the listing's shape check, so the session is still listed (and a
    candidate); only its body failed to load."""


#: `CachedSession` attributes in the order of `COLUMNS`.
_ROW_FIELDS = (
    "session_id",
    "root_id",
    "path",
    "cwd",
    "created_at",
    "parent_session",
    "origin",
    "title",
    "subagent_label",
    "last_seq",
    "file_size",
    "file_mtime_ns",
    "load_error",
)

#: The ``sessions`` columns, in the order of a row's values.
COLUMNS = (
    "id, root_id, path, cwd, created_at, parent_session, origin, title, subagent_label, "
    "last_seq, file_size, file_mtime_ns, load_error"
)


def row_of(values: Sequence[Any]) -> CachedSession:
    """The row of a ``SELECT {COLUMNS}`` result."""
    return CachedSession(**dict(zip(_ROW_FIELDS, values, strict=True)))


def values_of(row: CachedSession) -> tuple[Any, ...]:
    """A row's values in the order of `COLUMNS`."""
    return tuple(getattr(row, name) for name in _ROW_FIELDS)
