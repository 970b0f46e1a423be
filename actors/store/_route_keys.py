"""Idempotency keys of ``sessions/setModelRoute``, kept beside the routes they recorded.

A model route lives in the projection cache's ``model_routes`` table (no log event carries it),
so its key cannot be in the log: a key recorded apart from its effect could be lost in a crash
between the two, and the retry would then apply the route again. The key goes in the same
SQLite transaction as the route instead, in ``model_route_keys``: one row per remembered key
with the outcome it answered (the route and its ``updatedAt``). Like ``model_routes`` the table
is not derived, so a re-index keeps it; it is bounded per session by the store's
`IdempotencyPolicy` (rows past the window or the capacity are deleted as new ones come).
"""

from __future__ import annotations

import sqlite3
import time

import attrs

from actors.store._idempotency import IdempotencyPolicy, KeyedRequest, key_reused
from actors.store._projection_cache import ProjectionCache, RecordedModelRoute

__all__ = ["set_model_route_keyed"]


def set_model_route_keyed(
    cache: ProjectionCache,
    session_id: str,
    route: RecordedModelRoute,
    keyed: KeyedRequest,
    policy: IdempotencyPolicy,
) -> RecordedModelRoute:
    """Record ``route`` for ``session_id`` under ``keyed`` (blocking), or return the route the
    first call with that key recorded.

    Raises:
        ArgumentsInvalidError: the key was used for a call with other arguments.
        ProjectionCacheError: the cache cannot be written.
    """
    now = time.time_ns() // 1_000_000
    # The cache's own transaction: the key commits with the route, or neither does.
    with cache._write(listing_changed=False) as db:
        if not db.in_transaction:
            # Look-up and write under one write lock: two processes cannot both miss the key.
            db.execute("BEGIN IMMEDIATE")
        found = db.execute(
            "SELECT request, provider, model, context_window, updated_at FROM model_route_keys "
            "WHERE session_id = ? AND key = ? AND updated_at >= ?",
            (session_id, keyed.key, now - policy.window_ms),
        ).fetchone()
        if found is not None:
            request, provider, model, window, updated = found
            if request != keyed.request:
                raise key_reused(keyed.key)
            return RecordedModelRoute(
                provider=provider, model=model, context_window=window, updated_at=updated
            )
        stamped = attrs.evolve(route, updated_at=now)
        db.execute(
            "INSERT OR REPLACE INTO model_routes"
            "(session_id, provider, model, context_window, updated_at) VALUES(?, ?, ?, ?, ?)",
            (session_id, route.provider, route.model, route.context_window, now),
        )
        db.execute(
            "INSERT OR REPLACE INTO model_route_keys"
            "(session_id, key, request, provider, model, context_window, updated_at) "
            "VALUES(?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                keyed.key,
                keyed.request,
                route.provider,
                route.model,
                route.context_window,
                now,
            ),
        )
        _prune(db, session_id, now, policy)
    return stamped


def _prune(db: sqlite3.Connection, session_id: str, now: int, policy: IdempotencyPolicy) -> None:
    db.execute(
        "DELETE FROM model_route_keys WHERE session_id = ? AND updated_at < ?",
        (session_id, now - policy.window_ms),
    )
    cutoff = db.execute(
        "SELECT updated_at, rowid FROM model_route_keys WHERE session_id = ? "
        "ORDER BY updated_at DESC, rowid DESC LIMIT 1 OFFSET ?",
        (session_id, policy.capacity),
    ).fetchone()
    if cutoff is not None:
        db.execute(
            "DELETE FROM model_route_keys WHERE session_id = ? "
            "AND (updated_at < ? OR (updated_at = ? AND rowid <= ?))",
            (session_id, cutoff[0], cutoff[0], cutoff[1]),
        )
